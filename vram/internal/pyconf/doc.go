// Package pyconf reads config modules written in a subset of Python — a
// torchtitan config_registry.py, whose functions build Trainer configs —
// and evaluates a function of the module: its statements run in order; a
// call of another function of the module runs it; a call of anything else
// (a config class, a factory) becomes a mapping of its keyword arguments
// with "_class" (the callee's dotted name) and "_args" (its positional
// arguments), so a config reads as the trees the YAML and TOML readers
// make. What it cannot compute is a value that says what it is (printed
// with %v). Compound statements (if, for, with, try) are passed over and
// listed. Budgets: maxBytes of source, maxPyTokens tokens, maxDepth of
// brackets, maxPyExprDepth of operators (CPython's own limit), maxNodes
// evaluations, maxPyCallDepth calls. It knows nothing of memory.
//
//	m, err := pyconf.Parse(src)
//	for _, f := range m.Functions() { … f.Name, f.Params, f.Returns … }
//	tree, skipped, err := m.Run("llama3_8b") // map[string]any
package pyconf

// The budgets: what a config module is never larger than.
const (
	maxBytes = 4 << 20
	maxDepth = 64
	maxNodes = 1 << 17
)

// Func is a function of a module, as its def line declares it.
type Func struct {
	Name    string
	Params  []string
	Returns string // the return annotation, as written
}

// Parse reads a module.
func Parse(src []byte) (*Module, error) { return parsePython(src) }

// Module is a parsed config module.
type Module = pyModule

// Functions lists the module's functions in the file's order.
func (m *Module) Functions() []Func {
	out := make([]Func, 0, len(m.order))
	for _, name := range m.order {
		f := m.funcs[name]
		out = append(out, Func{Name: name, Params: f.params, Returns: f.returns})
	}
	return out
}

// Has tells whether the module defines a function of that name.
func (m *Module) Has(name string) bool { return m.funcs[name] != nil }

// Run evaluates a function of the module that takes no arguments: its
// value, and what was passed over (by function and line).
func (m *Module) Run(name string) (any, []string, error) { return m.runFunc(name) }

// Float is a number the evaluator computed, as a float64.
func Float(v any) (float64, bool) { return pyFloat(v) }
