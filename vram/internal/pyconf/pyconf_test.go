package pyconf

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram/fileio/budget"
	"github.com/vramlab/vramlab/vram/internal/hostile"
)

// pyJSON renders a value with unknowns as <what>, for comparison.
func pyJSON(v any) string {
	var conv func(any) any
	conv = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				out[k] = conv(e)
			}
			return out
		case []any:
			out := []any{}
			for _, e := range x {
				out = append(out, conv(e))
			}
			return out
		case pyUnknown:
			return "<" + x.text() + ">"
		}
		return v
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(conv(v))
	return strings.TrimSpace(b.String())
}

func TestPythonValues(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"def f():\n    return 8 * 2048\n", `16384`},
		{"def f():\n    return -7 // 2, 7 % -3, 2 ** 10, 1_000, 0x10, 3 / 2, 1e3\n", `[-4,-2,1024,1000,16,1.5,1000]`},
		{"def f():\n    return 'a' 'b', \"\"\"c\nd\"\"\", r'\\n', '\\n'\n", `["ab","c\nd","\\n","\n"]`},
		{"def f():\n    return True and 3, None or 'x', not 0, 1 == 1, 'a' in ['a'], 'b' not in ['a']\n", `[3,"x",true,true,true,true]`},
		{"def f() -> T:\n    \"\"\"doc\"\"\"\n    x = A.Config(n=1, m=[1, 2])\n    x.n = 2\n    x.deep.k = 'v'\n    return x\n",
			`{"_class":"A.Config","deep":{"k":"v"},"m":[1,2],"n":2}`},
		{"def g():\n    return T(a=1)\n\ndef f():\n    c = g()\n    c.b = c.a + 1\n    return c\n", `{"_class":"T","a":1,"b":2}`},
		{"N = 4\n\ndef f():\n    return reg('8B', n=N * 2, **{'k': 1})\n", `{"_args":["8B"],"_class":"reg","k":1,"n":8}`},
		{"def f():\n    return [len(x), x[0], lambda s: s, f'{x}', a if b else c, [i for i in y], {1: 2}]\n",
			`["<len(…)>","<a subscript>","<a lambda>","<an f-string>","<a conditional expression>","<a comprehension>",{"1":2}]`},
		{"def g(a, b=2):\n    return T(a=a, b=b)\n\ndef f():\n    return g(1, b=3)\n", `{"_class":"T","a":1,"b":3}`},
		{"def f():\n    c = T()\n    c.on = c.x and 'model' in c.parts\n    return c.on\n", `"<c.x and \"model\" in c.parts>"`},
		{"def f(): return (1)\n", `1`},
		{"def f():\n    return 9223372036854775807 + 1, 2 ** 70, 1 // 0\n",
			`["<9223372036854775807 + 1>","<2 ** 70>","<1 // 0>"]`},
	} {
		m, err := parsePython([]byte(c.src))
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		v, _, err := m.runFunc("f")
		if got := pyJSON(v); err != nil || got != c.want {
			t.Errorf("%q: %s (%v), want %s", c.src, got, err, c.want)
		}
	}
}

// TestPythonSkipped: statements the reader passes over are said, by
// function and line.
func TestPythonSkipped(t *testing.T) {
	src := "def f():\n    c = T(a=1)\n    if x:\n        c.a = 2\n    else:\n        c.a = 3\n    for i in y:\n        pass\n    c[0] = 1\n    return c\n"
	m, err := parsePython([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	v, skipped, err := m.runFunc("f")
	if err != nil || pyJSON(v) != `{"_class":"T","a":1}` {
		t.Fatalf("%s %v", pyJSON(v), err)
	}
	want := []string{"f, line 3: if", "f, line 5: else", "f, line 7: for", "f, line 9: the assignment to a subscript"}
	if strings.Join(skipped, "|") != strings.Join(want, "|") {
		t.Errorf("skipped %q, want %q", skipped, want)
	}
}

func TestPythonErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"def f(a b):\n    return 1\n", "line 1: want \",\" or \")\" in the parameters"},
		{"def f():\n    return (1, 2\n", "does not close"},
		{"def f():\n  x = 1\n y = 2\n", "line 3: unindent does not match"},
		{"def f():\n    return 'abc\n", "line 2: a string that does not end on its line"},
		{"def f():\n    return 99999999999999999999\n", "is not a 64-bit integer"},
		{"def f():\n    return 1 $ 2\n", "line 2: unexpected character '$'"},
		{"def f():\n    return )\n", "closes nothing"},
		{"def f():\n    return f()\n", "calls nested more than 32 deep (f calls itself?)"},
		{"A = B\nB = A\ndef f():\n    return A\n", "the constant"},
		{"def f():\n    return " + strings.Repeat("(", 70) + "1" + strings.Repeat(")", 70) + "\n", "nested more than 64 deep"},
		{"def f():\n    x = T()\n    x.me = x\n    return x\n", "holds itself"},
		{"def f():\n    s = 'aaaaaaaa'\n" + strings.Repeat("    s = s + s\n", 40) + "    return T(s=s)\n", ""},
	} {
		m, err := parsePython([]byte(c.src))
		if err == nil {
			_, _, err = m.runFunc("f")
		}
		if c.want == "" { // bounded, not an error: the string stops growing
			if err != nil {
				t.Errorf("%q: %v", c.src, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "python: ") {
			t.Errorf("%q: %v, want an error with %q", c.src, err, c.want)
		}
	}
}

// TestPythonSharedValues: a value made of shared parts is bounded as the
// tree the importer walks.
func TestPythonSharedValues(t *testing.T) {
	var b strings.Builder
	b.WriteString("def f():\n    a = T()\n")
	for i := 0; i < 40; i++ {
		b.WriteString("    a = T(x=a, y=a)\n")
	}
	b.WriteString("    return a\n")
	m, err := parsePython([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.runFunc("f"); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("%v, want the parts bounded", err)
	}
}

// FuzzParsePython: any bytes parse and every function runs, or fails,
// within the readers' budget.
func FuzzParsePython(f *testing.F) {
	f.Add([]byte("from x import y\n\ndef f() -> T.Config:\n    c = T.Config(a=[1, 2], b=G(n=8 * 2048))\n    c.b.n = 2\n    return c\n"))
	f.Add([]byte("def f():\n    if x:\n        return 1\n    return {**d, 'k': [i for i in y]}\n"))
	f.Add([]byte("def f():\n    return f()\n"))
	f.Add([]byte("@dec\nclass C:\n    x: int = 1\n\ndef g(a, *b, c=1, **d):\n    return lambda z: z\n"))
	for _, seed := range hostile.Seeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		budget.Check(t, len(data), func() {
			m, err := parsePython(data)
			if err != nil {
				return
			}
			for _, name := range m.order {
				if _, _, err := m.runFunc(name); err != nil && !strings.HasPrefix(err.Error(), "python: ") {
					panic(fmt.Sprintf("an error without its reader: %v", err))
				}
			}
		})
	})
}

// TestPythonLayout: the layout rule as Python's lexer applies it —
// brackets and backslashes join lines, CRLF and tabs indent, comments and
// blank lines say nothing, decorators, classes and a main guard are passed
// over, docstrings hold quotes.
func TestPythonLayout(t *testing.T) {
	src := "# header\r\nimport os\r\n\r\n@decorator(x=1)\r\nclass C:\r\n\tdef m(self):\r\n\t\treturn 1\r\n\r\n" +
		"def f() -> T.Config:\r\n\t'''a \"doc\" with ''quotes'' '''\r\n\tc = T(a=[1,\r\n\t\t2],  # a comment\r\n\t    b=3 + \\\r\n\t\t4)\r\n\r\n\treturn c\r\n\r\n" +
		"if __name__ == '__main__':\r\n\tf()\r\n"
	m, err := parsePython([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.order) != 1 || m.funcs["f"].returns != "T.Config" {
		t.Fatalf("functions %v", m.order)
	}
	v, skipped, err := m.runFunc("f")
	if got := pyJSON(v); err != nil || got != `{"_class":"T","a":[1,2],"b":7}` || len(skipped) != 0 {
		t.Errorf("%s %v %v", got, skipped, err)
	}
}

// TestPythonEqualityAsPython: == and in compare numbers by value across
// bool, int and float, as CPython does; a registry that picks its
// sequence length by such a test gets the length Python would pick.
func TestPythonEqualityAsPython(t *testing.T) {
	for _, c := range []struct {
		expr string
		want any
	}{
		{"1 == 1.0", true}, {"True == 1", true}, {"False == 0.0", true}, {"1 != 1.0", false},
		{"2 == 2.5", false}, {"'1' == 1", false}, {"None == 0", false}, {"1.0 in [1, 2]", true},
		{"True in [1]", true}, {"3 not in [1.0, 2.0]", true}, {"9007199254740993 == 9007199254740992.0", false},
		{"(1 == 1.0) and 8192 or 65536", int64(8192)},
	} {
		m, err := parsePython([]byte("def f():\n    return " + c.expr + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		v, _, err := m.runFunc("f")
		if err != nil || v != c.want {
			t.Errorf("%s = %v (%v), want %v", c.expr, v, err, c.want)
		}
	}
}
