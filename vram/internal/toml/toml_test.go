package toml

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram/fileio/budget"
	"github.com/vramlab/vramlab/vram/internal/hostile"
)

func TestParseTOML(t *testing.T) {
	src := `# torchtitan Llama 3 8B
[job]
dump_folder = "./outputs"
description = 'Llama 3 8B training'

[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 1
seq_len = 8192
max_norm = 1.0  # grad norm clipping
steps = 1_000
compile = false
dataset = "c4"

[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 1

[activation_checkpoint]
mode = "selective"  # ["none", "selective", "full"]
selective_ac_option = "op"

[float8]
filter_fqns = ["output",
   "router.gate",  # trailing comma
]
[[experiments]]
name = "a"
[[experiments]]
name = "b"
opts = {x = 1, y.z = "w"}
when = 1979-05-27T07:32:00Z
at = 07:32:00
text = """
two
lines"""
`
	got, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"job":   map[string]any{"dump_folder": "./outputs", "description": "Llama 3 8B training"},
		"model": map[string]any{"name": "llama3", "flavor": "8B"},
		"training": map[string]any{"local_batch_size": int64(1), "seq_len": int64(8192), "max_norm": 1.0, "steps": int64(1000),
			"compile": false, "dataset": "c4"},
		"parallelism":           map[string]any{"data_parallel_shard_degree": int64(-1), "tensor_parallel_degree": int64(1)},
		"activation_checkpoint": map[string]any{"mode": "selective", "selective_ac_option": "op"},
		"float8":                map[string]any{"filter_fqns": []any{"output", "router.gate"}},
		"experiments": []any{map[string]any{"name": "a"}, map[string]any{"name": "b",
			"opts": map[string]any{"x": int64(1), "y": map[string]any{"z": "w"}}, "when": "1979-05-27T07:32:00Z", "at": "07:32:00", "text": "two\nlines"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	for _, c := range []struct{ src, want string }{
		{"a = 1\na = 2\n", "given twice"},
		{"[t]\n[t]\n", "defined twice"},
		{"a = bare\n", "not a TOML value"},
		{"a = \"open\n", "unterminated"},
		{"a = [1, 2\n", "without its , or ]"},
		{"a = 1 b = 2\n", "after a value"},
		{"[a\nb=1", "without its ]"},
		{"a = 1\n[a.b]\n", "is a value, not a table"},
		{"x = " + strings.Repeat("[", 80) + strings.Repeat("]", 80), "deeper"},
		{"a = 007\n", "not a TOML value"},
	} {
		if _, err := Parse([]byte(c.src)); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "toml: ") {
			t.Errorf("%q: %v, want an error with %q", c.src, err, c.want)
		}
	}
}

// FuzzParseTOML: any bytes parse or fail within the readers' budget.
func FuzzParseTOML(f *testing.F) {
	f.Add([]byte("[a.b]\nc = [1, {d = 'e'}]\n[[f]]\ng = \"\"\"x\"\"\"\n"))
	f.Add([]byte("a = " + strings.Repeat("[", 70)))
	f.Add([]byte(strings.Repeat("a.", 70) + "b = 1\n"))
	for _, seed := range hostile.Seeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		budget.Check(t, len(data), func() { _, _ = Parse(data) })
	})
}
