package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram/answer"
)

// TestMain lets a test run the command itself: with VRAMLAB_RUN_PLAN set,
// the test binary is the plan command, stdout and stderr as main sets them.
func TestMain(m *testing.M) {
	if os.Getenv("VRAMLAB_RUN_PLAN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// runCommand runs the plan command as a user does, in a process of its own.
func runCommand(t *testing.T, args ...string) (stdout, stderr []byte) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "VRAMLAB_RUN_PLAN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run() // the exit code is the gate's
	return out.Bytes(), errOut.Bytes()
}

// TestNoEscapeReachesTheTerminal: escape sequences in a launch script's
// flags and values (a fake green "all checks passed", a window title) are
// shown as \x1b on stdout and stderr, never sent raw.
func TestNoEscapeReachesTheTerminal(t *testing.T) {
	dir := t.TempDir()
	serve := filepath.Join(dir, "serve.sh")
	os.WriteFile(serve, []byte("vllm serve gpt2 --served-model-name \"\x1b]0;pwned\a\" --\x1b[32mall-checks-passed\x1b[0m 1\n"), 0o644)
	broken := filepath.Join(dir, "broken.sh")
	os.WriteFile(broken, []byte("vllm serve gpt2 --max-model-len \"\x1b[2J\x9bhidden\"\n"), 0o644)
	for _, args := range [][]string{{serve}, {"-gpu", "H100-80GB", serve}, {broken}, {"-gpu", "\x1b[31mH100", serve}} {
		out, errOut := runCommand(t, args...)
		all := append(append([]byte{}, out...), errOut...)
		if len(all) == 0 {
			t.Fatalf("%q: no output", args)
		}
		if i := bytes.IndexAny(all, "\x1b\a\x9b"); i >= 0 || bytes.Contains(all, []byte("\xc2\x9b")) {
			t.Errorf("%q: a control byte reaches the terminal: %q", args, all)
		}
		if !strings.Contains(string(all), `\x1b`) {
			t.Errorf("%q: the escape is not shown as \\x1b:\n%s", args, all)
		}
	}
}

// TestOneLaunchOneAnswer: a plan file and the command line it stands for
// resolve to the same settings, so the engine's figures and the verdict
// are the same, byte for byte (the notes on how each was read aside).
func TestOneLaunchOneAnswer(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, plan, line string }{
		{"gpt-oss-120b, weights as released", `{"model": "gpt-oss-120b", "inference": {"batch": 1, "prompt_tokens": 1024, "new_tokens": 256}, "vllm": {"gpu_memory_utilization": 0.9, "max_model_len": 32768}}`,
			"vllm serve openai/gpt-oss-120b --gpu-memory-utilization 0.9 --max-model-len 32768"},
		{"gpt-oss-120b, weights named mxfp4", `{"model": "gpt-oss-120b", "inference": {"weights": {"dtype": "mxfp4"}, "batch": 1, "prompt_tokens": 1024, "new_tokens": 256}, "vllm": {"gpu_memory_utilization": 0.9, "max_model_len": 32768}}`,
			"vllm serve openai/gpt-oss-120b --gpu-memory-utilization 0.9 --max-model-len 32768"},
		{"Llama-3.1-8B on vLLM", `{"model": "llama-3.1-8b", "inference": {"batch": 1, "prompt_tokens": 1024, "new_tokens": 256}, "vllm": {"max_model_len": 8192, "max_num_seqs": 64}}`,
			"vllm serve meta-llama/Llama-3.1-8B --max-model-len 8192 --max-num-seqs 64"},
		{"Qwen2.5-7B on SGLang", `{"model": "qwen2.5-7b", "inference": {"batch": 1, "prompt_tokens": 1024, "new_tokens": 256}, "sglang": {"mem_fraction_static": 0.85}}`,
			"python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B --mem-fraction-static 0.85"},
		{"Llama-3.1-8B on SGLang, a 1B draft", `{"model": "llama-3.1-8b", "inference": {"batch": 1, "prompt_tokens": 1024, "new_tokens": 256}, "sglang": {"speculative": {"algorithm": "STANDALONE", "draft_model_path": "llama-3.2-1b", "num_steps": 4, "eagle_topk": 1, "num_draft_tokens": 5}}}`,
			"python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --speculative-algorithm STANDALONE --speculative-draft-model-path meta-llama/Llama-3.2-1B --speculative-num-steps 4 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			planFile, lineFile := filepath.Join(dir, "plan.json"), filepath.Join(dir, "serve.sh")
			os.WriteFile(planFile, []byte(c.plan), 0o644)
			os.WriteFile(lineFile, []byte(c.line+"\n"), 0o644)
			var a, b bytes.Buffer
			errA := gate([]string{"-json", "-gpu", "H100-80GB", planFile}, &a)
			errB := gate([]string{"-json", "-gpu", "H100-80GB", lineFile}, &b)
			if (errA == nil) != (errB == nil) {
				t.Fatalf("the plan: %v; the command line: %v", errA, errB)
			}
			var ra, rb answer.Report
			if err := json.Unmarshal(a.Bytes(), &ra); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b.Bytes(), &rb); err != nil {
				t.Fatal(err)
			}
			for _, part := range []struct {
				name string
				a, b any
			}{{"vllm", ra.VLLM, rb.VLLM}, {"sglang", ra.SGLang, rb.SGLang}, {"fit", ra.Fit, rb.Fit}, {"measures", ra.Measures, rb.Measures}} {
				ja, jb := withoutNotes(part.a), withoutNotes(part.b)
				if !bytes.Equal(ja, jb) {
					t.Errorf("%s differs:\nplan:         %s\ncommand line: %s", part.name, ja, jb)
				}
			}
		})
	}
}

// withoutNotes is v's JSON without its "notes" (which say how each input
// was read, and may differ).
func withoutNotes(v any) []byte {
	b, _ := json.Marshal(v)
	var tree any
	json.Unmarshal(b, &tree)
	var drop func(any)
	drop = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "notes")
			for _, e := range x {
				drop(e)
			}
		case []any:
			for _, e := range x {
				drop(e)
			}
		}
	}
	drop(tree)
	out, _ := json.Marshal(tree)
	return out
}
