// Package hostile holds the shapes of text that random mutation never
// builds — long operator chains, deep nesting, many short lines, values
// that double at each line — for the tests and fuzzers of every reader of
// users' text. Each shape is generated at any size:
//
//	for _, s := range hostile.Shapes {
//		data := []byte(s.Build(1 << 16))
//		budget.Check(t, len(data), func() { read(data) })
//	}
package hostile

import (
	"fmt"
	"strings"
)

// Shape builds an input of about n repetitions of its unit.
type Shape struct {
	Name  string
	Build func(n int) string
}

// Registry wraps lines as the body of a torchtitan config function, so the
// Python reader evaluates them.
func Registry(body string) string {
	return "def f() -> Trainer.Config:\n" + body + "    return Trainer.Config(training=Training(seq_len=8192))\n"
}

// Shapes are the audit's shapes; each reaches every reader in the tests
// that range over it.
var Shapes = []Shape{
	{"an operator chain", func(n int) string { return Registry("    x = 1" + strings.Repeat("+1", n) + "\n") }},
	{"a chain of unary minus", func(n int) string { return Registry("    x = " + strings.Repeat("-", n) + "1\n") }},
	{"a chain of not", func(n int) string { return Registry("    x = " + strings.Repeat("not ", n) + "y\n") }},
	{"a chain of powers", func(n int) string { return Registry("    x = 2" + strings.Repeat("**2", n) + "\n") }},
	{"an attribute chain", func(n int) string { return Registry("    x = a" + strings.Repeat(".b", n) + "\n") }},
	{"a call chain", func(n int) string { return Registry("    x = f" + strings.Repeat("()", n) + "\n") }},
	{"an unknown operand chain", func(n int) string { return Registry("    x = y" + strings.Repeat(" * z", n) + "\n") }},
	{"skipped assignments", func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "    y[%d] = 1\n", i)
		}
		return Registry(b.String())
	}},
	{"doubling variables", func(n int) string {
		return "A=xxxxxxxx\n" + strings.Repeat("A=$A$A\n", n) + "vllm serve gpt2 --max-model-len $A\n"
	}},
	{"a folded plain scalar", func(n int) string { return "base_model: x\n" + strings.Repeat("  y\n", n) }},
	{"a flow sequence over many lines", func(n int) string { return "lora_target_modules: [q,\n" + strings.Repeat("  q,\n", n) + "  q]\n" }},
	{"a flow mapping over many lines", func(n int) string { return "a: {k0: 1,\n" + strings.Repeat("  k: 1,\n", n) + "  z: 1}\n" }},
	{"nested brackets", func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }},
	{"nested objects", func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }},
	{"many keys", func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "k%d: %d\n", i, i)
		}
		return b.String()
	}},
	{"many flags", func(n int) string {
		return "vllm serve gpt2" + strings.Repeat(" --max-model-len 1024 --max_model_len 2048", n) + "\n"
	}},
	{"many commands", func(n int) string { return strings.Repeat("echo x; ", n) + "vllm serve gpt2\n" }},
	{"one long line", func(n int) string { return "x: " + strings.Repeat("a", 8*n) + "\n" }},
	{"many TOML tables", func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "[t%d]\nk = 1\n", i)
		}
		return b.String()
	}},
	{"interpolations", func(n int) string {
		var b strings.Builder
		b.WriteString("actor_rollout_ref: {}\nk0: xx\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "k%d: ${k%d}${k%d}\n", i, i-1, i-1)
		}
		return b.String()
	}},
}

// Seeds are the shapes at a fuzzer's size, for the corpora.
func Seeds() [][]byte {
	var out [][]byte
	for _, s := range Shapes {
		out = append(out, []byte(s.Build(200)))
	}
	return out
}
