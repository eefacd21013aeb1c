package pyconf

import (
	"fmt"
	"strings"
)

// The parser of the Python subset config modules are written in: a
// module's functions (def, with their statements), its imports (passed
// over) and its constants; inside a function, assignments to names and
// attributes, return, assert and docstrings. Expressions: calls with
// positional and keyword arguments, attributes, names, numbers, strings,
// True/False/None, lists, tuples and dicts, arithmetic and boolean
// operators, comparisons. What it does not evaluate — lambdas,
// comprehensions, subscripts, f-strings, conditional expressions — it
// keeps as text (pyOpaque); compound statements in a function (if, for,
// with, try) are passed over and said (pyFunc.skipped). Budget:
// maxDepth of nesting, besides the lexer's tokens.

type pyExpr interface{}

type (
	pyName  struct{ name string }
	pyConst struct{ v any } // int64, float64, string, bool or nil
	pyAttr  struct {
		x     pyExpr
		name  string
		depth int
	}
	pyCall struct {
		fn    pyExpr
		args  []pyExpr
		kw    []pyKeyword
		line  int
		depth int
	}
	pyKeyword struct {
		name string // "" for **mapping
		v    pyExpr
	}
	pyList   struct{ elts []pyExpr } // a list, a tuple or a set
	pyDict   struct{ keys, vals []pyExpr }
	pyBinary struct {
		op    string
		x, y  pyExpr
		depth int
	}
	pyUnary struct {
		op    string
		x     pyExpr
		depth int
	}
	pyOpaque struct{ text string } // an expression kept as text
)

// maxPyExprDepth bounds how deep operators, attributes and calls nest in
// one expression: CPython 3.11 compiles `1` followed by 2,993 `+1` (or
// 2,993 prefix minus signs, or attributes) and raises RecursionError past
// that (measured with eval), so a config cannot need more.
const maxPyExprDepth = 2993

// pyDepth is how deep an expression's operators nest (0 for a leaf).
func pyDepth(x pyExpr) int {
	switch x := x.(type) {
	case pyBinary:
		return x.depth
	case pyUnary:
		return x.depth
	case pyAttr:
		return x.depth
	case pyCall:
		return x.depth
	}
	return 0
}

// pyStmt is a statement of a function: an assignment (targets = value),
// a return (value), or an expression (value alone).
type pyStmt struct {
	targets []pyExpr
	value   pyExpr
	ret     bool
	line    int
}

type pyFunc struct {
	name    string
	params  []string
	body    []pyStmt
	skipped []string // compound statements passed over, as "line 12: if"
	returns string   // the return annotation, as written
	line    int
}

type pyModule struct {
	funcs  map[string]*pyFunc
	order  []string          // the functions in the file's order
	consts map[string]pyExpr // module-level NAME = value
}

type pyParser struct {
	toks  []pyToken
	i     int
	depth int // brackets and nested expressions (maxDepth)
	chain int // prefix operators and powers being read (maxPyExprDepth)
}

func parsePython(src []byte) (*pyModule, error) {
	if len(src) > maxBytes {
		return nil, fmt.Errorf("python: %d bytes, more than %d a config has", len(src), maxBytes)
	}
	if i := strings.IndexByte(string(src), 0); i >= 0 {
		return nil, fmt.Errorf("python: a NUL byte at offset %d: not a text file", i)
	}
	toks, err := pyTokenize(string(src))
	if err != nil {
		return nil, err
	}
	p := &pyParser{toks: toks}
	m := &pyModule{funcs: map[string]*pyFunc{}, consts: map[string]pyExpr{}}
	for p.peek().kind != pyEOF {
		if err := p.topLevel(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (p *pyParser) peek() pyToken { return p.toks[p.i] }

func (p *pyParser) advance() pyToken {
	t := p.toks[p.i]
	if t.kind != pyEOF {
		p.i++
	}
	return t
}

func (p *pyParser) isOp(op string) bool { t := p.peek(); return t.kind == pyOp && t.text == op }

func (p *pyParser) isName(name string) bool {
	t := p.peek()
	return t.kind == pyNameTok && t.text == name
}

func (p *pyParser) accept(op string) bool {
	if p.isOp(op) {
		p.i++
		return true
	}
	return false
}

func (p *pyParser) expect(op string) error {
	if !p.accept(op) {
		return p.fail(fmt.Sprintf("want %q", op))
	}
	return nil
}

func (p *pyParser) fail(what string) error {
	t := p.peek()
	got := t.text
	switch t.kind {
	case pyEOF:
		got = "the end of the file"
	case pyNewline:
		got = "the end of the line"
	case pyIndent, pyDedent:
		got = "a change of indentation"
	default:
		got = fmt.Sprintf("%q", got)
	}
	return fmt.Errorf("python: line %d: %s, got %s", t.line, what, got)
}

// topLevel reads one module-level statement: a def (kept), a constant
// (kept), anything else passed over with its block.
func (p *pyParser) topLevel(m *pyModule) error {
	t := p.peek()
	switch {
	case t.kind == pyNewline || t.kind == pyIndent || t.kind == pyDedent:
		p.advance()
		return nil
	case p.isOp("@"):
		return p.skipStatement()
	case p.isName("def"):
		f, err := p.funcDef()
		if err != nil {
			return err
		}
		if _, dup := m.funcs[f.name]; !dup {
			m.order = append(m.order, f.name)
		}
		m.funcs[f.name] = f
		return nil
	case t.kind == pyNameTok && p.i+1 < len(p.toks) && p.toks[p.i+1].kind == pyOp && p.toks[p.i+1].text == "=" && !pyKeywords[t.text]:
		p.i += 2
		v, err := p.exprList()
		if err != nil {
			return err
		}
		m.consts[t.text] = v
		return p.endStatement()
	}
	return p.skipStatement()
}

// pyKeywords start statements the reader does not take as expressions.
var pyKeywords = map[string]bool{"def": true, "class": true, "if": true, "elif": true, "else": true, "for": true,
	"while": true, "with": true, "try": true, "except": true, "finally": true, "import": true, "from": true,
	"return": true, "assert": true, "pass": true, "raise": true, "del": true, "global": true, "nonlocal": true,
	"break": true, "continue": true, "async": true, "match": true}

// skipStatement passes over one statement, with its indented block when
// it ends in a colon.
func (p *pyParser) skipStatement() error {
	for {
		t := p.advance()
		switch t.kind {
		case pyEOF:
			return nil
		case pyNewline:
			if p.peek().kind == pyIndent {
				return p.skipBlock()
			}
			return nil
		}
	}
}

// skipBlock passes over an indented block, from its INDENT to its DEDENT.
func (p *pyParser) skipBlock() error {
	level := 0
	for {
		switch p.advance().kind {
		case pyIndent:
			level++
		case pyDedent:
			level--
			if level == 0 {
				return nil
			}
		case pyEOF:
			return nil
		}
	}
}

func (p *pyParser) endStatement() error {
	if p.accept(";") && p.peek().kind != pyNewline {
		return nil // the next statement on the line
	}
	if p.peek().kind == pyEOF {
		return nil
	}
	if p.peek().kind != pyNewline {
		return p.fail("want the end of the statement")
	}
	p.advance()
	return nil
}

// funcDef reads def NAME(params) [-> annotation]: and its body.
func (p *pyParser) funcDef() (*pyFunc, error) {
	line := p.advance().line
	name := p.advance()
	if name.kind != pyNameTok {
		p.i--
		return nil, p.fail("want the function's name")
	}
	f := &pyFunc{name: name.text, line: int(line)}
	params, err := p.params()
	if err != nil {
		return nil, err
	}
	f.params = params
	if p.accept("->") {
		ann, err := p.expr()
		if err != nil {
			return nil, err
		}
		f.returns = pyText(ann)
	}
	if err := p.expect(":"); err != nil {
		return nil, err
	}
	return f, p.body(f)
}

// params reads a parameter list's names (defaults and annotations are
// read and dropped).
func (p *pyParser) params() ([]string, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var names []string
	for !p.accept(")") {
		for p.accept("*") || p.accept("**") || p.accept("/") {
		}
		if t := p.peek(); t.kind == pyNameTok {
			names = append(names, t.text)
			p.advance()
		}
		if p.accept(":") {
			if _, err := p.expr(); err != nil {
				return nil, err
			}
		}
		if p.accept("=") {
			if _, err := p.expr(); err != nil {
				return nil, err
			}
		}
		if !p.accept(",") && !p.isOp(")") {
			return nil, p.fail("want \",\" or \")\" in the parameters")
		}
	}
	return names, nil
}

// body reads a function's block (or its one-line body).
func (p *pyParser) body(f *pyFunc) error {
	if p.peek().kind != pyNewline {
		return p.statement(f)
	}
	p.advance()
	if p.peek().kind != pyIndent {
		return p.fail("want the function's indented body")
	}
	p.advance()
	for {
		switch p.peek().kind {
		case pyDedent:
			p.advance()
			return nil
		case pyEOF:
			return nil
		case pyNewline:
			p.advance()
			continue
		}
		if err := p.statement(f); err != nil {
			return err
		}
	}
}

// statement reads one statement of a function's body.
func (p *pyParser) statement(f *pyFunc) error {
	t := p.peek()
	if t.kind == pyNameTok && pyKeywords[t.text] {
		switch t.text {
		case "return":
			p.advance()
			st := pyStmt{ret: true, line: int(t.line), value: pyConst{nil}}
			if p.peek().kind != pyNewline && !p.isOp(";") && p.peek().kind != pyEOF {
				v, err := p.exprList()
				if err != nil {
					return err
				}
				st.value = v
			}
			f.body = append(f.body, st)
			return p.endStatement()
		case "def", "class":
			return p.skipStatement() // a helper inside the config function
		case "if", "elif", "else", "for", "while", "with", "try", "except", "finally", "match", "async":
			f.skipped = append(f.skipped, fmt.Sprintf("line %d: %s", t.line, t.text))
			return p.skipStatement()
		}
		return p.skipSimple() // assert, pass, import, raise, …
	}
	return p.assignment(f)
}

// skipSimple passes over the rest of a simple statement's line.
func (p *pyParser) skipSimple() error {
	for k := p.peek().kind; k != pyNewline && k != pyEOF; k = p.peek().kind {
		p.advance()
	}
	p.advance()
	return nil
}

// assignment reads an expression statement: targets = … = value, an
// annotated or augmented assignment, or an expression alone.
func (p *pyParser) assignment(f *pyFunc) error {
	line := p.peek().line
	e, err := p.exprList()
	if err != nil {
		return err
	}
	st := pyStmt{line: int(line)}
	if p.accept(":") { // x: T = v
		if _, err := p.expr(); err != nil {
			return err
		}
		if !p.accept("=") {
			return p.endStatement()
		}
		st.targets = append(st.targets, e)
		if e, err = p.exprList(); err != nil {
			return err
		}
	}
	for p.accept("=") {
		st.targets = append(st.targets, e)
		if e, err = p.exprList(); err != nil {
			return err
		}
	}
	if t := p.peek(); t.kind == pyOp && len(t.text) >= 2 && strings.HasSuffix(t.text, "=") && t.text != "==" && t.text != "!=" &&
		t.text != "<=" && t.text != ">=" {
		p.advance()
		if _, err := p.exprList(); err != nil {
			return err
		}
		st.targets = append(st.targets, e)
		e = pyOpaque{fmt.Sprintf("an augmented assignment (%s)", t.text)}
	}
	st.value = e
	f.body = append(f.body, st)
	return p.endStatement()
}
