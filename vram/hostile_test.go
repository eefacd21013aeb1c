package vram

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram/internal/pyconf"
	"github.com/vramlab/vramlab/vram/internal/toml"
	"github.com/vramlab/vramlab/vram/internal/yaml"

	"github.com/vramlab/vramlab/vram/fileio/budget"
)

// The third hardening audit: shapes that random mutation never builds —
// long chains of operators, deep recursion, many short lines, values that
// double at each line — each generated at several sizes and given to
// every reader of users' text, which must stay within the readers' budget
// (fileio/budget) whether it answers or refuses. A reader added to
// textReaders is held to every shape; a shape added to hostileShapes
// reaches every reader. The fuzzers take the shapes as seeds.

// hostileShape builds an input of about n repetitions of its unit.
type hostileShape struct {
	name  string
	build func(n int) string
}

// registry wraps lines as the body of a torchtitan config function, so the
// Python reader evaluates them.
func registry(body string) string {
	return "def f() -> Trainer.Config:\n" + body + "    return Trainer.Config(training=Training(seq_len=8192))\n"
}

var hostileShapes = []hostileShape{
	{"an operator chain", func(n int) string { return registry("    x = 1" + strings.Repeat("+1", n) + "\n") }},
	{"a chain of unary minus", func(n int) string { return registry("    x = " + strings.Repeat("-", n) + "1\n") }},
	{"a chain of not", func(n int) string { return registry("    x = " + strings.Repeat("not ", n) + "y\n") }},
	{"a chain of powers", func(n int) string { return registry("    x = 2" + strings.Repeat("**2", n) + "\n") }},
	{"an attribute chain", func(n int) string { return registry("    x = a" + strings.Repeat(".b", n) + "\n") }},
	{"a call chain", func(n int) string { return registry("    x = f" + strings.Repeat("()", n) + "\n") }},
	{"an unknown operand chain", func(n int) string { return registry("    x = y" + strings.Repeat(" * z", n) + "\n") }},
	{"skipped assignments", func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "    y[%d] = 1\n", i)
		}
		return registry(b.String())
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

// textReaders are the entry points that read users' text.
var textReaders = []struct {
	name string
	read func(data []byte)
}{
	{"a torchtitan registry", func(d []byte) { ImportConfig("config_registry.py", d, ImportOptions{}) }},
	{"a launch script", func(d []byte) { ImportConfig("launch.sh", d, ImportOptions{}) }},
	{"a YAML config", func(d []byte) { ImportConfig("config.yaml", d, ImportOptions{}) }},
	{"a verl config", func(d []byte) { ImportConfig("ppo.yaml", d, ImportOptions{Kind: KindVerl}) }},
	{"a TOML config", func(d []byte) { ImportConfig("config.toml", d, ImportOptions{}) }},
	{"a JSON config", func(d []byte) { ImportConfig("config.json", d, ImportOptions{}) }},
	{"a plan", func(d []byte) { ParsePlan(d, "") }},
	{"a config.json", func(d []byte) { FromHFConfig(d) }},
	{"YAML", func(d []byte) { yaml.Parse(d) }},
	{"TOML", func(d []byte) { toml.Parse(d) }},
	{"Python", func(d []byte) {
		if m, err := pyconf.Parse(d); err == nil {
			m.Run("f")
		}
	}},
}

// TestReadersOnHostileShapes: every reader, every shape, at sizes from a
// few kilobytes to a megabyte, within the budget (1 s + 50 ns/B, 4 MiB +
// 64 B/B; ten times the time under the race detector).
func TestReadersOnHostileShapes(t *testing.T) {
	sizes := []int{1 << 12, 1 << 16, 1 << 20}
	if testing.Short() {
		sizes = sizes[:2]
	}
	for _, s := range hostileShapes {
		for _, size := range sizes {
			// n repetitions make about size bytes.
			unit := max(1, len(s.build(64))/64)
			data := []byte(s.build(max(1, size/unit)))
			for _, r := range textReaders {
				t.Run(s.name+"/"+r.name, func(t *testing.T) {
					budget.Check(t, len(data), func() { r.read(data) })
				})
			}
		}
	}
}

// hostileSeeds are the shapes at a fuzzer's size, for the corpora.
func hostileSeeds() [][]byte {
	var out [][]byte
	for _, s := range hostileShapes {
		out = append(out, []byte(s.build(200)))
	}
	return out
}

// TestHostileReproducers: the audit's reproducers, each answered within
// the budget with a clear error or the framework's own answer.
func TestHostileReproducers(t *testing.T) {
	folded := "base_model: x\n" + strings.Repeat("  continued words of a folded scalar\n", 640<<10/38)
	flow := "base_model: x\nlora_target_modules: [q_proj,\n" + strings.Repeat("  v_proj,\n", 600<<10/10) + "  k_proj]\n"
	doubling := "A=xxxxxxxx\n" + strings.Repeat("A=$A$A\n", 30) + "vllm serve gpt2 --served-model-name $A\n"
	for _, c := range []struct {
		name, file, data string
		want             string // an error's words; "" for an answer
	}{
		{"1+1+…+1 at 40 KB", "config_registry.py", registry("    x = 1" + strings.Repeat("+1", 20<<10) + "\n"), "more than 2993 operators deep"},
		{"----…-1 at 1 MB", "config_registry.py", registry("    x = " + strings.Repeat("-", 1<<20) + "1\n"), "more than 1048576 tokens"},
		{"----…-1 at 512 KB", "config_registry.py", registry("    x = " + strings.Repeat("-", 1<<19) + "1\n"), "more than 2993 operators deep"},
		{"not not … at 400 KB", "config_registry.py", registry("    x = " + strings.Repeat("not ", 100<<10) + "y\n"), "more than 2993 operators deep"},
		{"2**2**… at 300 KB", "config_registry.py", registry("    x = 2" + strings.Repeat("**2", 100<<10) + "\n"), "more than 2993 operators deep"},
		{"a.b.b… at 200 KB", "config_registry.py", registry("    x = a" + strings.Repeat(".b", 100<<10) + "\n"), "more than 2993 operators deep"},
		{"f()()… at 200 KB", "config_registry.py", registry("    x = f" + strings.Repeat("()", 100<<10) + "\n"), "more than 2993 operators deep"},
		{"1,000 operators compile", "config_registry.py", registry("    x = 1" + strings.Repeat("+1", 1000) + "\n"), ""},
		{"130,000 skipped assignments", "config_registry.py", hostileShapes[7].build(130000), ""},
		{"A=$A$A doubling", "launch.sh", doubling, "expanding $A makes the script's words more than 1048576 bytes"},
		{"YAML folding at 640 KB", "axolotl.yml", folded, ""},
		{"YAML flow continuation at 600 KB", "axolotl.yml", flow, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			budget.Check(t, len(c.data), func() { _, err = ImportConfig(c.file, []byte(c.data), ImportOptions{Model: "gpt2", GPUs: 8}) })
			switch {
			case c.want == "" && err != nil && (strings.Contains(err.Error(), "yaml:") || strings.Contains(err.Error(), "python:")):
				t.Errorf("%v, want the file read", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestSkippedNotesAreBounded: a registry that assigns into subscripts
// 130,000 times lists 64 of them and says how many more.
func TestSkippedNotesAreBounded(t *testing.T) {
	m, err := pyconf.Parse([]byte(hostileShapes[7].build(130000)))
	if err != nil {
		t.Fatal(err)
	}
	_, skipped, err := m.Run("f")
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 64+1 || skipped[64] != "and 129936 more statements passed over" {
		t.Errorf("%d notes, last %q", len(skipped), skipped[len(skipped)-1])
	}
}
