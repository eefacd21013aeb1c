package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// TestSearchExample: the search example lays Llama-3.1-405B out on its
// 1,024 H100s and prints the fastest layouts that fit, the best as
// torchtitan's launch flags (float8 among the searched dimensions, with a
// column of its own and its converter); -json prints the search's result, whose
// layouts are the plans the table shows.
func TestSearchExample(t *testing.T) {
	const file = "../search/llama3.1-405b-h100.json"
	var out bytes.Buffer
	if err := run([]string{file}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"layouts of meta-llama/Llama-3.1-405B on 1024 × H100-80GB", "rank", "the fastest, as launched: torchrun --nproc_per_node 8", "--parallelism.tensor_parallel_degree",
		"recompute float8   offload", "rowwise", "Float8LinearConverter.Config(recipe_name=\"rowwise\"", "note: float8 layouts' converted linears run at H100-80GB's float8 peak"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run([]string{"-json", "-top", "3", file}, &out); err != nil {
		t.Fatal(err)
	}
	var res vram.SearchResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Layouts) != 3 || res.Candidates == 0 {
		t.Fatalf("-json: %d layouts of %d candidates, %v", len(res.Layouts), res.Candidates, err)
	}
	for _, l := range res.Layouts {
		if p := l.Training.Parallel; p.DP*p.TP*p.PP*p.CP != 1024 || !l.Fits {
			t.Errorf("layout %+v", p)
		}
	}
}

// TestSearchFlag: -search lays out any training plan on -gpus; it refuses
// an inference plan and a search without GPUs, naming what is missing.
func TestSearchFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-search", "-gpus", "8", "-gpu", "H100-80GB", "../plans/llama3.1-70b-fsdp.json"}, &out); err != nil || !strings.Contains(out.String(), "on 8 × H100-80GB") {
		t.Errorf("-search: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run([]string{"-search", "-gpus", "2", "../plans/llama3-8b-serve.json"}, &out); err != nil || !strings.Contains(out.String(), "the first, as launched: vllm serve meta-llama/Meta-Llama-3-8B") {
		t.Errorf("-search on a vLLM plan: %v\n%s", err, out.String())
	}
	generate := filepath.Join(t.TempDir(), "generate.json")
	if err := os.WriteFile(generate, []byte(`{"model": "llama-3-8b", "inference": {"batch": 1, "prompt_tokens": 1024}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-search", "-gpus", "8", generate}, "training plan"},
		{[]string{"-search", "../plans/llama3.1-70b-fsdp.json"}, "-gpus N"},
		{[]string{"-search", "../plans/llama3-8b-serve.json"}, "-gpus N"},
	} {
		if err := run(c.args, &out); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
