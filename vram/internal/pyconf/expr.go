package pyconf

import (
	"fmt"
	"strconv"
	"strings"
)

// Expressions of the Python subset (python_parse.go), by the language
// reference's precedence: lambda and conditional expressions, or, and,
// not, comparisons, bitwise operators, + -, * / // % @, unary, **, then
// calls, attributes and subscripts on an atom.

// exprList reads an expression, or a tuple of them without brackets.
func (p *pyParser) exprList() (pyExpr, error) {
	e, err := p.expr()
	if err != nil || !p.isOp(",") {
		return e, err
	}
	elts := []pyExpr{e}
	for p.accept(",") && p.startsExpr() {
		if e, err = p.expr(); err != nil {
			return nil, err
		}
		elts = append(elts, e)
	}
	return pyList{elts}, nil
}

// startsExpr says whether the next token can begin an expression.
func (p *pyParser) startsExpr() bool {
	t := p.peek()
	switch t.kind {
	case pyNameTok:
		return !pyKeywords[t.text] || t.text == "not" || t.text == "lambda"
	case pyNumber, pyString, pyFString:
		return true
	case pyOp:
		return strings.Contains("([{-+~*", t.text) && len(t.text) == 1 || t.text == "..." || t.text == "**"
	}
	return false
}

func (p *pyParser) expr() (pyExpr, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, fmt.Errorf("python: line %d: expressions nested more than %d deep", p.peek().line, maxDepth)
	}
	if p.isName("lambda") {
		for p.advance(); !p.isOp(":"); p.advance() {
			if k := p.peek().kind; k == pyEOF || k == pyNewline {
				return nil, p.fail("want the lambda's \":\"")
			}
		}
		p.advance()
		if _, err := p.expr(); err != nil {
			return nil, err
		}
		return pyOpaque{"a lambda"}, nil
	}
	x, err := p.binary(0)
	if err != nil || !p.isName("if") {
		return x, err
	}
	p.advance()
	if _, err := p.binary(0); err != nil {
		return nil, err
	}
	if !p.isName("else") {
		return nil, p.fail("want \"else\" in a conditional expression")
	}
	p.advance()
	if _, err := p.expr(); err != nil {
		return nil, err
	}
	return pyOpaque{"a conditional expression"}, nil
}

// pyLevels are the binary operators by precedence, lowest first; a name
// is a keyword operator.
var pyLevels = [][]string{{"or"}, {"and"}, nil /* not */, {"<", ">", "==", ">=", "<=", "!=", "in", "not", "is"},
	{"|"}, {"^"}, {"&"}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "//", "%", "@"}}

// binary reads the operators of precedence level and above.
func (p *pyParser) binary(level int) (pyExpr, error) {
	if level == len(pyLevels) {
		return p.unary()
	}
	if pyLevels[level] == nil { // not x
		if p.isName("not") {
			p.advance()
			if p.chain++; p.chain > maxPyExprDepth {
				return nil, p.tooDeep()
			}
			x, err := p.binary(level)
			p.chain--
			if err != nil {
				return nil, err
			}
			u := pyUnary{op: "not", x: x}
			u.depth, err = p.nest(x)
			return u, err
		}
		return p.binary(level + 1)
	}
	x, err := p.binary(level + 1)
	for err == nil {
		op, ok := p.binaryOp(level)
		if !ok {
			break
		}
		var y pyExpr
		if y, err = p.binary(level + 1); err == nil {
			b := pyBinary{op: op, x: x, y: y}
			b.depth, err = p.nest(x, y)
			x = b
		}
	}
	return x, err
}

// nest is the depth of an operator over parts, refused past
// maxPyExprDepth: a chain such as 1+1+…+1 is a tree as deep as it is
// long, which the evaluator and the messages walk.
func (p *pyParser) nest(parts ...pyExpr) (int, error) {
	d := 0
	for _, x := range parts {
		d = max(d, pyDepth(x))
	}
	if d++; d > maxPyExprDepth {
		return d, p.tooDeep()
	}
	return d, nil
}

// binaryOp takes the operator of a level when it is next ("not in" and
// "is not" as one).
func (p *pyParser) binaryOp(level int) (string, bool) {
	t := p.peek()
	if t.kind != pyOp && t.kind != pyNameTok {
		return "", false
	}
	for _, op := range pyLevels[level] {
		if t.text != op {
			continue
		}
		p.advance()
		if op == "not" { // only "not in" is a comparison
			if !p.isName("in") {
				p.i--
				return "", false
			}
			p.advance()
			return "not in", true
		}
		if op == "is" && p.isName("not") {
			p.advance()
			return "is not", true
		}
		return op, true
	}
	return "", false
}

// tooDeep is the error of an expression past maxPyExprDepth.
func (p *pyParser) tooDeep() error {
	return fmt.Errorf("python: line %d: an expression more than %d operators deep (CPython 3.11's compiler stops at %d too)", p.peek().line, maxPyExprDepth, maxPyExprDepth)
}

// unary reads prefix - + ~ and a power, whose right side is a unary
// again: both recurse, so each level counts towards maxPyExprDepth.
func (p *pyParser) unary() (pyExpr, error) {
	if p.chain++; p.chain > maxPyExprDepth {
		return nil, p.tooDeep()
	}
	defer func() { p.chain-- }()
	for _, op := range []string{"-", "+", "~"} {
		if p.accept(op) {
			x, err := p.unary()
			if err != nil {
				return nil, err
			}
			u := pyUnary{op: op, x: x}
			u.depth, err = p.nest(x)
			return u, err
		}
	}
	x, err := p.primary()
	if err != nil || !p.accept("**") {
		return x, err
	}
	y, err := p.unary()
	if err != nil {
		return nil, err
	}
	b := pyBinary{op: "**", x: x, y: y}
	b.depth, err = p.nest(x, y)
	return b, err
}

// primary reads an atom and its calls, attributes and subscripts.
func (p *pyParser) primary() (pyExpr, error) {
	x, err := p.atom()
	for err == nil {
		switch {
		case p.isOp("("):
			x, err = p.call(x)
		case p.accept("."):
			t := p.advance()
			if t.kind != pyNameTok {
				p.i--
				return nil, p.fail("want a name after \".\"")
			}
			a := pyAttr{x: x, name: t.text}
			if a.depth, err = p.nest(x); err != nil {
				return nil, err
			}
			x = a
		case p.accept("["):
			if err = p.skipTo("]"); err == nil {
				x = pyOpaque{"a subscript"}
			}
		default:
			return x, nil
		}
	}
	return nil, err
}

// skipTo passes over tokens to the bracket that closes the one opened.
func (p *pyParser) skipTo(close string) error {
	depth := 0
	for {
		t := p.advance()
		switch {
		case t.kind == pyEOF:
			return fmt.Errorf("python: line %d: %q never comes", t.line, close)
		case t.kind != pyOp:
		case t.text == "(" || t.text == "[" || t.text == "{":
			depth++
		case t.text == ")" || t.text == "]" || t.text == "}":
			if depth == 0 {
				return nil
			}
			depth--
		}
	}
}

// call reads the arguments of a call of fn.
func (p *pyParser) call(fn pyExpr) (pyExpr, error) {
	c := pyCall{fn: fn, line: int(p.advance().line)}
	var err error
	if c.depth, err = p.nest(fn); err != nil {
		return nil, err
	}
	for !p.accept(")") {
		switch {
		case p.accept("**"):
			v, err := p.expr()
			if err != nil {
				return nil, err
			}
			c.kw = append(c.kw, pyKeyword{"", v})
		case p.accept("*"):
			if _, err := p.expr(); err != nil {
				return nil, err
			}
			c.args = append(c.args, pyOpaque{"a *argument"})
		case p.peek().kind == pyNameTok && p.toks[p.i+1].kind == pyOp && p.toks[p.i+1].text == "=":
			name := p.advance().text
			p.advance()
			v, err := p.expr()
			if err != nil {
				return nil, err
			}
			c.kw = append(c.kw, pyKeyword{name, v})
		default:
			v, err := p.expr()
			if err != nil {
				return nil, err
			}
			if p.isName("for") { // a generator expression
				return pyOpaque{"a call over a generator"}, p.skipTo(")")
			}
			c.args = append(c.args, v)
		}
		if !p.accept(",") && !p.isOp(")") {
			return nil, p.fail("want \",\" or \")\" in a call's arguments")
		}
	}
	return c, nil
}

func (p *pyParser) atom() (pyExpr, error) {
	t := p.peek()
	switch t.kind {
	case pyNameTok:
		if pyKeywords[t.text] {
			return nil, p.fail("want an expression")
		}
		p.advance()
		switch t.text {
		case "True", "False":
			return pyConst{t.text == "True"}, nil
		case "None":
			return pyConst{nil}, nil
		}
		return pyName{t.text}, nil
	case pyNumber:
		p.advance()
		return pyNumberValue(t)
	case pyString, pyFString:
		return p.strings(), nil
	case pyOp:
		switch t.text {
		case "(", "[":
			p.advance()
			return p.sequence(map[string]string{"(": ")", "[": "]"}[t.text])
		case "{":
			p.advance()
			return p.dict()
		case "...":
			p.advance()
			return pyOpaque{"..."}, nil
		}
	}
	return nil, p.fail("want an expression")
}

// strings reads adjacent string literals as one; an f-string makes the
// whole opaque.
func (p *pyParser) strings() pyExpr {
	var b strings.Builder
	opaque := false
	for k := p.peek().kind; k == pyString || k == pyFString; k = p.peek().kind {
		t := p.advance()
		opaque = opaque || k == pyFString
		b.WriteString(t.text)
	}
	if opaque {
		return pyOpaque{"an f-string"}
	}
	return pyConst{b.String()}
}

func pyNumberValue(t pyToken) (pyExpr, error) {
	s := strings.ReplaceAll(t.text, "_", "")
	low := strings.ToLower(s)
	switch {
	case strings.HasSuffix(low, "j"):
		return pyOpaque{"a complex number"}, nil
	case strings.HasPrefix(low, "0x") || strings.HasPrefix(low, "0o") || strings.HasPrefix(low, "0b"):
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("python: line %d: %s is not a 64-bit integer", t.line, t.text)
		}
		return pyConst{n}, nil
	case strings.ContainsAny(low, ".e"):
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("python: line %d: %s is not a number", t.line, t.text)
		}
		return pyConst{f}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("python: line %d: %s is not a 64-bit integer", t.line, t.text)
	}
	return pyConst{n}, nil
}

// sequence reads a parenthesised expression, a tuple or a list after its
// opening bracket.
func (p *pyParser) sequence(close string) (pyExpr, error) {
	var elts []pyExpr
	tuple := close == "]"
	for !p.accept(close) {
		star := p.accept("*")
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.isName("for") {
			return pyOpaque{"a comprehension"}, p.skipTo(close)
		}
		if star {
			e = pyOpaque{"a *unpacking"}
		}
		elts = append(elts, e)
		if p.accept(",") {
			tuple = true
		} else if !p.isOp(close) {
			return nil, p.fail(fmt.Sprintf("want \",\" or %q", close))
		}
	}
	if !tuple && len(elts) == 1 {
		return elts[0], nil // (x) is x
	}
	return pyList{elts}, nil
}

// dict reads a dict or a set after its "{".
func (p *pyParser) dict() (pyExpr, error) {
	var d pyDict
	set := false
	for !p.accept("}") {
		if p.accept("**") {
			if _, err := p.expr(); err != nil {
				return nil, err
			}
			d.keys, d.vals = append(d.keys, pyOpaque{"**"}), append(d.vals, pyOpaque{"a **unpacking"})
		} else {
			k, err := p.expr()
			if err != nil {
				return nil, err
			}
			var v pyExpr = pyConst{nil}
			if p.accept(":") {
				if v, err = p.expr(); err != nil {
					return nil, err
				}
			} else {
				set = true
			}
			if p.isName("for") {
				return pyOpaque{"a comprehension"}, p.skipTo("}")
			}
			d.keys, d.vals = append(d.keys, k), append(d.vals, v)
		}
		if !p.accept(",") && !p.isOp("}") {
			return nil, p.fail("want \",\" or \"}\"")
		}
	}
	if set {
		return pyList{d.keys}, nil
	}
	return d, nil
}
