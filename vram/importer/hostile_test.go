package importer

import (
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio/budget"
	"github.com/vramlab/vramlab/vram/internal/hostile"
	"github.com/vramlab/vramlab/vram/internal/pyconf"
	"github.com/vramlab/vramlab/vram/internal/toml"
	"github.com/vramlab/vramlab/vram/internal/yaml"
)

// The third hardening audit: shapes that random mutation never builds —
// long chains of operators, deep recursion, many short lines, values that
// double at each line — each generated at several sizes and given to
// every reader of users' text, which must stay within the readers' budget
// (fileio/budget) whether it answers or refuses. A reader added to
// textReaders is held to every shape; a shape added to hostile.Shapes
// reaches every reader. The shapes live in internal/hostile; the fuzzers take the shapes as seeds.

// textReaders are the entry points that read users' text.
var textReaders = []struct {
	name string
	read func(data []byte)
}{
	{"a torchtitan registry", func(d []byte) { Import("config_registry.py", d, Options{}) }},
	{"a launch script", func(d []byte) { Import("launch.sh", d, Options{}) }},
	{"a YAML config", func(d []byte) { Import("config.yaml", d, Options{}) }},
	{"a verl config", func(d []byte) { Import("ppo.yaml", d, Options{Kind: KindVerl}) }},
	{"a TOML config", func(d []byte) { Import("config.toml", d, Options{}) }},
	{"a JSON config", func(d []byte) { Import("config.json", d, Options{}) }},
	{"a plan", func(d []byte) { vram.ParsePlan(d, "") }},
	{"a config.json", func(d []byte) { vram.FromHFConfig(d) }},
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
	for _, s := range hostile.Shapes {
		for _, size := range sizes {
			// n repetitions make about size bytes.
			unit := max(1, len(s.Build(64))/64)
			data := []byte(s.Build(max(1, size/unit)))
			for _, r := range textReaders {
				t.Run(s.Name+"/"+r.name, func(t *testing.T) {
					budget.Check(t, len(data), func() { r.read(data) })
				})
			}
		}
	}
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
		{"1+1+…+1 at 40 KB", "config_registry.py", hostile.Registry("    x = 1" + strings.Repeat("+1", 20<<10) + "\n"), "more than 2993 operators deep"},
		{"----…-1 at 1 MB", "config_registry.py", hostile.Registry("    x = " + strings.Repeat("-", 1<<20) + "1\n"), "more than 1048576 tokens"},
		{"----…-1 at 512 KB", "config_registry.py", hostile.Registry("    x = " + strings.Repeat("-", 1<<19) + "1\n"), "more than 2993 operators deep"},
		{"not not … at 400 KB", "config_registry.py", hostile.Registry("    x = " + strings.Repeat("not ", 100<<10) + "y\n"), "more than 2993 operators deep"},
		{"2**2**… at 300 KB", "config_registry.py", hostile.Registry("    x = 2" + strings.Repeat("**2", 100<<10) + "\n"), "more than 2993 operators deep"},
		{"a.b.b… at 200 KB", "config_registry.py", hostile.Registry("    x = a" + strings.Repeat(".b", 100<<10) + "\n"), "more than 2993 operators deep"},
		{"f()()… at 200 KB", "config_registry.py", hostile.Registry("    x = f" + strings.Repeat("()", 100<<10) + "\n"), "more than 2993 operators deep"},
		{"1,000 operators compile", "config_registry.py", hostile.Registry("    x = 1" + strings.Repeat("+1", 1000) + "\n"), ""},
		{"130,000 skipped assignments", "config_registry.py", hostile.Shapes[7].Build(130000), ""},
		{"A=$A$A doubling", "launch.sh", doubling, "expanding $A makes the script's words more than 1048576 bytes"},
		{"YAML folding at 640 KB", "axolotl.yml", folded, ""},
		{"YAML flow continuation at 600 KB", "axolotl.yml", flow, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			budget.Check(t, len(c.data), func() { _, err = Import(c.file, []byte(c.data), Options{Model: "gpt2", GPUs: 8}) })
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
	m, err := pyconf.Parse([]byte(hostile.Shapes[7].Build(130000)))
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
