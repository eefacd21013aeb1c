package pyconf

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

// The evaluator of config modules (python_parse.go): a function of the
// module runs with its statements in order; a call of another function
// of the module runs it; a call of anything else — a config class, a
// factory such as torchtitan's model_registry — becomes a mapping of its
// keyword arguments with "_class" (the callee's dotted name) and "_args"
// (its positional arguments), so a config reads as the trees the YAML
// and TOML readers make. Attribute assignments write into those
// mappings, making the missing ones (the class's defaults, which the
// importer knows). What it cannot compute is a pyUnknown that says what
// it is. Budgets: maxPyCallDepth nested calls, maxNodes evaluations.

// pyUnknown is a value the evaluator does not compute: what it is, in
// words, or the expression it came from, written out only when a message
// needs it (a chain of unknowns would otherwise write its text at every
// operator).
type pyUnknown struct {
	what string
	expr pyExpr
}

func (u pyUnknown) String() string { return u.text() + ", which the importer does not evaluate" }

func (u pyUnknown) text() string {
	if u.expr != nil {
		return pyText(u.expr)
	}
	return u.what
}

const maxPyCallDepth = 32

type pyEval struct {
	mod     *pyModule
	depth   int
	nodes   int
	strLen  int             // bytes of strings the evaluator made
	skipped []string        // what was passed over, by function and line
	noted   map[string]bool // skipped, as a set
	more    int             // notes past maxPyNotes
}

// pyBuiltins are Python's functions that configs call on values; their
// results are unknown (never a config mapping).
var pyBuiltins = map[string]bool{"len": true, "cast": true, "int": true, "float": true, "str": true, "min": true,
	"max": true, "sum": true, "round": true, "list": true, "tuple": true, "range": true, "sorted": true, "getattr": true,
	"isinstance": true, "print": true, "any": true, "all": true, "set": true, "bool": true, "abs": true,
	"enumerate": true, "zip": true, "type": true, "hasattr": true, "dict": true, "replace": true, "deepcopy": true}

// pyTreeSize counts a value's nodes and fails past maxNodes: a
// config's values may share parts, or hold themselves (x.a = x), and are
// walked as trees after evaluation.
func pyTreeSize(v any, n *int) error {
	if *n++; *n > maxNodes {
		return fmt.Errorf("python: the config's value has more than %d parts (or holds itself)", maxNodes)
	}
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if err := pyTreeSize(e, n); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := pyTreeSize(e, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// runFunc evaluates a function of the module that takes no arguments and
// returns its value, with what was passed over.
func (m *pyModule) runFunc(name string) (any, []string, error) {
	f, ok := m.funcs[name]
	if !ok {
		return nil, nil, fmt.Errorf("python: no function %q", name)
	}
	e := &pyEval{mod: m, noted: map[string]bool{}}
	v, err := e.call(f, nil, nil)
	if err == nil {
		n := 0
		err = pyTreeSize(v, &n)
	}
	if e.more > 0 {
		e.skipped = append(e.skipped, fmt.Sprintf("and %d more statements passed over", e.more))
	}
	return v, e.skipped, err
}

func (e *pyEval) call(f *pyFunc, args []any, kw map[string]any) (any, error) {
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxPyCallDepth {
		return nil, fmt.Errorf("python: line %d: calls nested more than %d deep (%s calls itself?)", f.line, maxPyCallDepth, f.name)
	}
	for _, s := range f.skipped {
		e.note(f.name + ", " + s)
	}
	locals := map[string]any{}
	for i, name := range f.params {
		switch {
		case i < len(args):
			locals[name] = args[i]
		case kw[name] != nil:
			locals[name] = kw[name]
		default:
			locals[name] = pyUnknown{what: "the parameter " + name}
		}
	}
	for _, st := range f.body {
		v, err := e.eval(st.value, locals)
		if err != nil {
			return nil, err
		}
		if st.ret {
			return v, nil
		}
		for _, t := range st.targets {
			e.assign(t, v, locals, st.line, f.name)
		}
	}
	return nil, nil
}

// maxPyNotes bounds what the evaluator lists as passed over; past it, one
// line says how many more there were.
const maxPyNotes = 64

func (e *pyEval) note(s string) {
	switch {
	case e.noted[s]:
	case len(e.noted) < maxPyNotes:
		e.noted[s] = true
		e.skipped = append(e.skipped, s)
	default:
		e.more++
	}
}

func (e *pyEval) eval(x pyExpr, locals map[string]any) (any, error) {
	if e.nodes++; e.nodes > maxNodes {
		return nil, fmt.Errorf("python: more than %d evaluations, more than a config needs", maxNodes)
	}
	switch x := x.(type) {
	case pyConst:
		return x.v, nil
	case pyName:
		return e.name(x.name, locals)
	case pyAttr:
		base, err := e.eval(x.x, locals)
		if m, ok := base.(map[string]any); ok && err == nil {
			if v, ok := m[x.name]; ok {
				return v, nil
			}
		}
		return pyUnknown{expr: x}, err
	case pyCall:
		return e.callExpr(x, locals)
	case pyList:
		out := make([]any, 0, len(x.elts))
		for _, el := range x.elts {
			v, err := e.eval(el, locals)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case pyDict:
		return e.dict(x, locals)
	case pyBinary:
		return e.binary(x, locals)
	case pyUnary:
		v, err := e.eval(x.x, locals)
		return pyUnaryValue(x, v), err
	case pyOpaque:
		return pyUnknown{what: x.text}, nil
	}
	return pyUnknown{what: "an expression"}, nil
}

// name looks a name up: the function's variables, then the module's
// constants.
func (e *pyEval) name(n string, locals map[string]any) (any, error) {
	if v, ok := locals[n]; ok {
		return v, nil
	}
	if c, ok := e.mod.consts[n]; ok {
		e.depth++
		defer func() { e.depth-- }()
		if e.depth > maxPyCallDepth {
			return nil, fmt.Errorf("python: the constant %s refers to itself", n)
		}
		return e.eval(c, map[string]any{})
	}
	if _, ok := e.mod.funcs[n]; ok {
		return pyUnknown{what: "the function " + n}, nil
	}
	return pyUnknown{what: n}, nil
}

func (e *pyEval) callExpr(c pyCall, locals map[string]any) (any, error) {
	args := make([]any, 0, len(c.args))
	for _, a := range c.args {
		v, err := e.eval(a, locals)
		if err != nil {
			return nil, err
		}
		args = append(args, v)
	}
	kw := map[string]any{}
	for _, k := range c.kw {
		v, err := e.eval(k.v, locals)
		if err != nil {
			return nil, err
		}
		if k.name != "" {
			kw[k.name] = v
		} else if m, ok := v.(map[string]any); ok {
			for key, val := range m {
				kw[key] = val
			}
		}
	}
	if n, ok := c.fn.(pyName); ok {
		if f, ok := e.mod.funcs[n.name]; ok {
			return e.call(f, args, kw)
		}
		if pyBuiltins[n.name] {
			return pyUnknown{expr: c}, nil
		}
	}
	if a, ok := c.fn.(pyAttr); ok && pyBuiltins[a.name] {
		return pyUnknown{expr: c}, nil
	}
	kw["_class"] = pyText(c.fn)
	if len(args) > 0 {
		kw["_args"] = args
	}
	return kw, nil
}

func (e *pyEval) dict(d pyDict, locals map[string]any) (any, error) {
	out := map[string]any{}
	for i := range d.keys {
		k, err := e.eval(d.keys[i], locals)
		if err != nil {
			return nil, err
		}
		v, err := e.eval(d.vals[i], locals)
		if err != nil {
			return nil, err
		}
		out[fmt.Sprint(k)] = v
	}
	return out, nil
}

// assign binds a statement's value to a target: a name, or an attribute
// of a mapping (made where the config leaves the class's defaults).
func (e *pyEval) assign(t pyExpr, v any, locals map[string]any, line int, fn string) {
	switch t := t.(type) {
	case pyName:
		locals[t.name] = v
		return
	case pyAttr:
		if m := e.target(t.x, locals); m != nil {
			m[t.name] = v
			return
		}
	}
	e.note(fmt.Sprintf("%s, line %d: the assignment to %s", fn, line, pyText(t)))
}

// target finds (or makes) the mapping an attribute assignment writes in.
func (e *pyEval) target(x pyExpr, locals map[string]any) map[string]any {
	switch x := x.(type) {
	case pyName:
		m, _ := locals[x.name].(map[string]any)
		return m
	case pyAttr:
		parent := e.target(x.x, locals)
		if parent == nil {
			return nil
		}
		m, ok := parent[x.name].(map[string]any)
		if !ok {
			m = map[string]any{}
			parent[x.name] = m
		}
		return m
	}
	return nil
}

// binary computes arithmetic on numbers and strings, and/or on known
// values, == != and in on plain values; the rest is unknown.
func (e *pyEval) binary(b pyBinary, locals map[string]any) (any, error) {
	x, err := e.eval(b.x, locals)
	if err != nil {
		return nil, err
	}
	y, err := e.eval(b.y, locals)
	if err != nil {
		return nil, err
	}
	unknown := pyUnknown{expr: b}
	switch b.op {
	case "and", "or":
		tx, ok := pyTruth(x)
		if !ok {
			return unknown, nil
		}
		if tx == (b.op == "and") {
			return y, nil
		}
		return x, nil
	case "==", "!=", "in", "not in":
		return pyCompare(b.op, x, y, unknown), nil
	}
	if s, ok := x.(string); ok && b.op == "+" {
		if t, ok := y.(string); ok && e.strLen+len(s)+len(t) <= maxBytes {
			e.strLen += len(s) + len(t)
			return s + t, nil
		}
		return unknown, nil
	}
	return pyArith(b.op, x, y, unknown), nil
}

func pyTruth(v any) (bool, bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case nil:
		return false, true
	case int64:
		return v != 0, true
	case float64:
		return v != 0, true
	case string:
		return v != "", true
	case []any:
		return len(v) > 0, true
	}
	return false, false
}

func pyCompare(op string, x, y any, unknown pyUnknown) any {
	plain := func(v any) bool {
		switch v.(type) {
		case bool, nil, int64, float64, string:
			return true
		}
		return false
	}
	switch op {
	case "==", "!=":
		if !plain(x) || !plain(y) {
			return unknown
		}
		return pyEqual(x, y) == (op == "==")
	}
	list, ok := y.([]any)
	if !ok || !plain(x) {
		return unknown
	}
	found := false
	for _, el := range list {
		if !plain(el) {
			return unknown
		}
		found = found || pyEqual(el, x)
	}
	return found == (op == "in")
}

// pyEqual is Python's == on plain values: numbers compare by value
// across bool, int and float (True == 1 == 1.0), exactly, as CPython
// compares an int with a float; other kinds equal only themselves.
func pyEqual(x, y any) bool {
	a, aNum := pyExact(x)
	b, bNum := pyExact(y)
	if aNum && bNum {
		return a.Cmp(b) == 0
	}
	return x == y
}

// pyExact is a bool, int or float as an exact rational (false for other
// kinds, and for a NaN, which equals nothing).
func pyExact(v any) (*big.Rat, bool) {
	switch v := v.(type) {
	case bool:
		return big.NewRat(map[bool]int64{true: 1}[v], 1), true
	case int64:
		return big.NewRat(v, 1), true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, false
		}
		return new(big.Rat).SetFloat64(v), true
	}
	return nil, false
}

// pyArith computes + - * / // % ** on int64 and float64, unknown past
// 64 bits or on division by zero.
func pyArith(op string, x, y any, unknown pyUnknown) any {
	a, aInt := x.(int64)
	b, bInt := y.(int64)
	if aInt && bInt && op != "/" {
		if r, ok := pyIntOp(op, a, b); ok {
			return r
		}
		return unknown
	}
	fa, okA := pyFloat(x)
	fb, okB := pyFloat(y)
	if !okA || !okB {
		return unknown
	}
	var r float64
	switch op {
	case "+":
		r = fa + fb
	case "-":
		r = fa - fb
	case "*":
		r = fa * fb
	case "/":
		r = fa / fb
	case "**":
		r = math.Pow(fa, fb)
	default:
		return unknown
	}
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return unknown
	}
	return r
}

func pyFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

func pyIntOp(op string, a, b int64) (int64, bool) {
	const lim = 1 << 62
	small := func(v int64) bool { return v > -lim && v < lim }
	switch op {
	case "+", "-":
		if !small(a) || !small(b) {
			return 0, false
		}
		if op == "-" {
			b = -b
		}
		return a + b, true
	case "*":
		if a != 0 && (a*b/a != b || a == -1 && b == math.MinInt64) {
			return 0, false
		}
		return a * b, true
	case "//", "%":
		if b == 0 || a == math.MinInt64 && b == -1 {
			return 0, false
		}
		q, m := a/b, a%b
		if m != 0 && (m < 0) != (b < 0) { // Python floors
			q, m = q-1, m+b
		}
		return map[bool]int64{true: q, false: m}[op == "//"], true
	case "**":
		if b < 0 || b > 64 {
			return 0, false
		}
		r := int64(1)
		for i := int64(0); i < b; i++ {
			if r, _ = pyIntOp("*", r, a); r == 0 && a != 0 {
				return 0, false
			}
		}
		return r, true
	}
	return 0, false
}

func pyUnaryValue(u pyUnary, v any) any {
	switch u.op {
	case "not":
		if t, ok := pyTruth(v); ok {
			return !t
		}
	case "-":
		switch n := v.(type) {
		case int64:
			if n != math.MinInt64 {
				return -n
			}
		case float64:
			return -n
		}
	case "+":
		if _, ok := pyFloat(v); ok {
			return v
		}
	}
	return pyUnknown{expr: u}
}

// pyText writes an expression back as Python, for messages and class
// names: at most maxPyText bytes, the rest elided.
func pyText(x pyExpr) string {
	var b strings.Builder
	writePyText(&b, x)
	if b.Len() > maxPyText {
		return b.String()[:maxPyText] + "…"
	}
	return b.String()
}

const maxPyText = 200

// writePyText writes x into b, stopping once b holds more than maxPyText
// bytes, so a chain of thousands of operators costs what its start does.
func writePyText(b *strings.Builder, x pyExpr) {
	if b.Len() > maxPyText {
		return
	}
	switch x := x.(type) {
	case pyName:
		b.WriteString(x.name)
	case pyAttr:
		writePyText(b, x.x)
		b.WriteString("." + x.name)
	case pyConst:
		if s, ok := x.v.(string); ok {
			fmt.Fprintf(b, "%q", s[:min(len(s), maxPyText)])
		} else {
			fmt.Fprint(b, x.v)
		}
	case pyCall:
		writePyText(b, x.fn)
		b.WriteString("(…)")
	case pyBinary:
		writePyText(b, x.x)
		b.WriteString(" " + x.op + " ")
		writePyText(b, x.y)
	case pyUnary:
		b.WriteString(x.op + " ")
		writePyText(b, x.x)
	case pyOpaque:
		b.WriteString(x.text)
	case pyList:
		b.WriteString("a list")
	case pyDict:
		b.WriteString("a dict")
	default:
		b.WriteString("an expression")
	}
}
