package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/answer"
)

func TestPlanExamples(t *testing.T) {
	files, _ := filepath.Glob("../plans/*.json")
	if len(files) < 4 {
		t.Fatalf("found %d example plans", len(files))
	}
	for _, f := range files {
		if isPostTraining(f) {
			continue // TestPostTrainingPlans
		}
		var out bytes.Buffer
		if err := gate([]string{f}, &out); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		judged := "judged on device-used"
		if strings.Contains(f, "serve") {
			judged = "judged on what vLLM takes of the card"
		}
		for _, want := range []string{"Peak allocated memory per GPU", "total", "allocated peak", "reserved peak", "device used", judged} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: output lacks %q:\n%s", f, want, out.String())
			}
		}
		out.Reset()
		if err := gate([]string{"-json", f}, &out); err != nil {
			t.Fatal(err)
		}
		var rep answer.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%s: -json output does not decode: %v", f, err)
		}
		if rep.Peak <= 0 || rep.Fit == nil {
			t.Errorf("%s: report %+v", f, rep)
		}
		m := rep.Measures
		if !(m.Allocated > 0 && m.Reserved >= m.Allocated && m.DeviceUsed == m.Reserved+m.Context+m.NCCL && m.Context > 0) {
			t.Errorf("%s: measures %+v (peak %v)", f, m, rep.Peak)
		}
		need := m.DeviceUsed // the plan's own allocator replay, or the serving engine's figure
		if rep.VLLM != nil {
			need = rep.VLLM.DeviceUsed
			want := rep.VLLM.Requested + rep.VLLM.NonTorch
			if !rep.VLLM.GraphsInBudget {
				want += rep.VLLM.CUDAGraphs // captured after the cache, beside it
			}
			if rep.Fit.Engine != "vLLM" || !rep.VLLM.Starts || need != want {
				t.Errorf("%s: a vLLM plan judged by %q: %+v", f, rep.Fit.Engine, rep.VLLM)
			}
		}
		if rep.Fit != nil && (rep.Fit.Measure != "device_used" || rep.Fit.Need != need || rep.Fit.Fits != (need <= rep.Fit.Limit) || rep.Fit.Why == "") {
			t.Errorf("%s: fit %+v, measures %+v", f, rep.Fit, m)
		}
	}
}

// TestFitsOnAllocatedNotOnDevice: a plan whose allocated peak fits the card
// but whose nvidia-smi figure does not is reported as not fitting, and the
// reason says the allocator's cache and the context make the difference.
func TestFitsOnAllocatedNotOnDevice(t *testing.T) {
	dir := t.TempDir()
	write := func(gpu string) string {
		p := filepath.Join(dir, "plan.json")
		plan := `{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 2, "precision": "bf16", "trainable": "lora",
			"lora": {"rank": 16, "targets": ["all_linear"]}}` + gpu + `}`
		if err := os.WriteFile(p, []byte(plan), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var out bytes.Buffer
	if err := gate([]string{"-json", write("")}, &out); err != nil {
		t.Fatal(err)
	}
	var rep answer.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	// A card (a bare capacity: no context) between the allocated peak and
	// what nvidia-smi would show, both within the 5 % margin.
	m := rep.Measures
	capacity := (m.Allocated + (m.Reserved-m.Allocated)/2) * 100 / 95
	out.Reset()
	if err := gate([]string{write(fmt.Sprintf(`, "gpu": "%d B"`, int64(capacity)))}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "does not fit") || !strings.Contains(s, "the allocated peak alone") {
		t.Errorf("output:\n%s", s)
	}
}

func TestPlanErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		plan, want string
	}{
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_bach": 2}}`, `train.micro_bach: unknown field; did you mean "micro_batch"?`},
		{`{"model": "gpt5", "train": {"seq_len": 128, "micro_batch": 2}}`, `unknown model preset "gpt5"`},
		{`{"model": "gpt2"}`, `"train", "inference" or "post_training" object is required`},
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 0}}`, "micro_batch must be in [1, "},
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1, "optimizer": "adamx"}}`, `unknown optimizer "adamx"`},
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1}, "gpu": "A200"}`, `unknown GPU "A200"`},
		{`{"model": {"hf_config": "nope.json"}, "train": {"seq_len": 1, "micro_batch": 1}}`, "model.hf_config"},
		{`[1, 2]`, "cannot unmarshal"},
	} {
		p := filepath.Join(dir, "plan.json")
		if err := os.WriteFile(p, []byte(tc.plan), 0o644); err != nil {
			t.Fatal(err)
		}
		err := gate([]string{p}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.plan, err, tc.want)
		}
	}
	if err := gate(nil, &bytes.Buffer{}); err == nil {
		t.Error("no arguments should be an error")
	}
}

var update = flag.Bool("update", false, "rewrite the prepared files of examples/measure/gpu-grid and README's example output")

// TestGPUGridPrepared: the GPU grid's plans carry their HF config and
// resolved settings in gpu-grid/prepared/, so examples/measure can run them
// on a machine without Go; those files are what this tool prints today
// (go test ./examples/plan -update rewrites them).
func TestGPUGridPrepared(t *testing.T) {
	plans, _ := filepath.Glob("../measure/gpu-grid/*.json")
	if len(plans) < 10 {
		t.Fatalf("found %d GPU grid plans", len(plans))
	}
	for _, f := range plans {
		prepared := map[string]json.RawMessage{}
		for _, mode := range []string{"hf_config", "resolved"} {
			var out bytes.Buffer
			if err := gate([]string{"-" + strings.ReplaceAll(mode, "_", "-"), f}, &out); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			prepared[mode] = json.RawMessage(bytes.TrimSpace(out.Bytes()))
		}
		want, err := json.MarshalIndent(prepared, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		p := filepath.Join(filepath.Dir(f), "prepared", filepath.Base(f))
		if *update {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what the plan tool prints now (go test ./examples/plan -update)", p)
		}
	}
}

// TestGGUF: -gguf summarises a GGUF header (the file gguf-py wrote with
// every ggml type); a file that is not GGUF is an error that says so.
func TestGGUF(t *testing.T) {
	var out bytes.Buffer
	if err := gate([]string{"-gguf", "../../vram/testdata/gguf/every-type.gguf"}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, `architecture "llama", 34 tensors`) || !strings.Contains(s, "Q4_K") || !strings.Contains(s, "MXFP4") {
		t.Errorf("output:\n%s", s)
	}
	out.Reset()
	if err := gate([]string{"-json", "-gguf", "../../vram/testdata/gguf/every-type.gguf"}, &out); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Total  int64            `json:"total"`
		ByType map[string]int64 `json:"by_type"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.ByType["Q6_K"] != 840 || v.Total <= 0 {
		t.Errorf("json %s: %v", out.String(), err)
	}
	if err := gate([]string{"-gguf", "../plans/llama3-8b-lora.json"}, &out); err == nil || !strings.Contains(err.Error(), "not a GGUF file") {
		t.Errorf("a plan as GGUF: %v", err)
	}
}

// TestVLLMPlan: a plan with a "vllm" object shows how vLLM carves the GPU
// (in -json too); "vllm" on a training plan, or with a misspelt field, is an
// error that names it.
func TestVLLMPlan(t *testing.T) {
	var out bytes.Buffer
	if err := gate([]string{"../plans/llama3-8b-serve.json"}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "GPU KV cache size") || !strings.Contains(s, "maximum concurrency for 8192 tokens per request") {
		t.Errorf("output:\n%s", s)
	}
	out.Reset()
	if err := gate([]string{"-json", "../plans/llama3-8b-serve.json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		VLLM *struct {
			KVCache struct {
				Blocks int64 `json:"blocks"`
				Fits   bool  `json:"fits"`
			} `json:"kv_cache"`
		} `json:"vllm"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.VLLM == nil || rep.VLLM.KVCache.Blocks < 1000 || !rep.VLLM.KVCache.Fits {
		t.Errorf("json: %v %s", err, out.String())
	}
	dir := t.TempDir()
	for plan, want := range map[string]string{
		`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1}, "vllm": {}}`:                                                              "applies to an inference plan",
		`{"model": "gpt2", "inference": {"batch": 1, "prompt_tokens": 8, "new_tokens": 8}, "vllm": {"max_model_lenn": 8}}`:                        "vllm.max_model_lenn",
		`{"model": "llama-3-8b", "inference": {"batch": 1, "prompt_tokens": 8, "new_tokens": 8}, "vllm": {"max_model_len": 900000}, "gpu": "L4"}`: "max_model_len",
	} {
		p := filepath.Join(dir, "plan.json")
		if err := os.WriteFile(p, []byte(plan), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := gate([]string{p}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", plan, err, want)
		}
	}
}

// TestSGLangPlan: a plan with an "sglang" object shows SGLang's KV pool.
func TestSGLangPlan(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "plan.json")
	plan := `{"model": "llama-3.1-8b", "inference": {"weights": {"dtype": "bf16"}, "batch": 8, "prompt_tokens": 1024, "new_tokens": 256},
		"sglang": {"mem_fraction_static": 0.85}, "tgi": {"max_batch_prefill_tokens": 8192}, "gpu": "A100-80GB"}`
	if err := os.WriteFile(p, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := gate([]string{p}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "SGLang 0.5.23 on A100-80GB") || !strings.Contains(s, "max_total_num_tokens") || !strings.Contains(s, "max_batch_total_tokens") {
		t.Errorf("output:\n%s", s)
	}
	// Without a fraction, SGLang 0.5.23's default for the card: an A100
	// 80GB (81,920 MiB) keeps back 13,904 MiB (0.5.3's 13,440 and 58
	// prefill graphs at 8 MiB), (81920 − 13904) / 81920.
	if err := os.WriteFile(p, []byte(strings.Replace(plan, `"mem_fraction_static": 0.85`, "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := gate([]string{p}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "(mem_fraction_static 0.83)") || !strings.Contains(s, "SGLang 0.5.23's default") {
		t.Errorf("default fraction: output:\n%s", s)
	}
	// Speculative decoding: the draft's lines apart, under the pool's.
	spec := strings.Replace(plan, `"mem_fraction_static": 0.85`, `"speculative": {"algorithm": "NEXTN"}`, 1)
	spec = strings.Replace(spec, `"llama-3.1-8b"`, `"glm-4.5-air"`, 1)
	spec = strings.Replace(spec, `"A100-80GB"`, `"H200"`, 1)
	spec = strings.Replace(spec, `{"dtype": "bf16"}`, `{"dtype": "fp8"}`, 1)
	if err := os.WriteFile(p, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := gate([]string{p}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"speculative decoding: EAGLE, 3 step(s) of topk 1, 4 draft token(s)", "draft: the checkpoint's own MTP layer (Glm4MoeForCausalLMNextN)",
		"draft weights", "held when the pool was sized", "draft KV pool", "priced into the pool's cell", "draft buffers", "outside the budget"} {
		if s := out.String(); !strings.Contains(s, want) {
			t.Errorf("speculative: %q not in output:\n%s", want, s)
		}
	}
	bad := `{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1}, "sglang": {}}`
	if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gate([]string{p}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "applies to an inference plan") {
		t.Errorf("sglang on a training plan: %v", err)
	}
}

// TestNoNegativeSizes: hostile and oversized plans — a model far larger
// than its card under each serving engine, a card too small for its own
// CUDA context's share, a tiny memory fraction — print no negative byte
// count anywhere, in the text or in -json, and each engine's refusal is
// in its words.
func TestNoNegativeSizes(t *testing.T) {
	dir := t.TempDir()
	plans := map[string]string{
		"deepseek-vllm-4090": `{"model": "deepseek-v3", "inference": {"batch": 1, "prompt_tokens": 100, "new_tokens": 10}, "gpu": "RTX-4090", "vllm": {}}`,
		"gpt-oss-vllm-t4":    `{"model": "gpt-oss-120b", "inference": {"batch": 1, "prompt_tokens": 100, "new_tokens": 10}, "gpu": "T4", "vllm": {}}`,
		"70b-vllm-util":      `{"model": "llama-3.1-70b", "inference": {"batch": 8, "prompt_tokens": 4000, "new_tokens": 1000}, "gpu": "A100-80GB", "vllm": {"gpu_memory_utilization": 0.05}}`,
		"70b-vllm-full":      `{"model": "llama-3.1-70b", "inference": {"batch": 8, "prompt_tokens": 4000, "new_tokens": 1000}, "gpu": "A100-80GB", "vllm": {"gpu_memory_utilization": 1.0}}`,
		"70b-sglang":         `{"model": "llama-3.1-70b", "inference": {"batch": 8, "prompt_tokens": 4000, "new_tokens": 1000}, "gpu": "L4", "sglang": {}}`,
		"70b-tgi":            `{"model": "llama-3.1-70b", "inference": {"batch": 8, "prompt_tokens": 4000, "new_tokens": 1000}, "gpu": "L4", "tgi": {}}`,
		"405b-generate-tiny": `{"model": "llama-3.1-405b", "inference": {"batch": 64, "prompt_tokens": 8000, "new_tokens": 8000}, "gpu": "1 GiB"}`,
		"train-tiny-card":    `{"model": "llama-3-8b", "train": {"seq_len": 8192, "micro_batch": 16}, "gpu": "100 MiB"}`,
	}
	neg := regexp.MustCompile(`(^|[\s(=:,])[-−]\s?\d[\d.,]*\s?(B|KiB|MiB|GiB|TiB|KB|MB|GB)\b`)
	for name, plan := range plans {
		f := filepath.Join(dir, name+".json")
		if err := os.WriteFile(f, []byte(plan), 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := gate([]string{f}, &out); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if m := neg.FindString(out.String()); m != "" {
			t.Errorf("%s: a negative size %q in:\n%s", name, m, out.String())
		}
		out.Reset()
		if err := gate([]string{"-json", f}, &out); err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		walkNumbers(v, "", func(path string, x float64) {
			if x < 0 && !strings.HasSuffix(path, ".layer") { // layer -1: outside the blocks
				t.Errorf("%s: %s = %v", name, path, x)
			}
		})
		var rep answer.Report
		json.Unmarshal(out.Bytes(), &rep)
		if rep.Fit == nil || rep.Fit.Fits {
			t.Errorf("%s: judged to fit: %+v", name, rep.Fit)
		}
	}
}

// walkNumbers calls f with every number in a decoded JSON value and its path.
func walkNumbers(v any, path string, f func(string, float64)) {
	switch x := v.(type) {
	case float64:
		f(path, x)
	case map[string]any:
		for k, e := range x {
			walkNumbers(e, path+"."+k, f)
		}
	case []any:
		for i, e := range x {
			walkNumbers(e, fmt.Sprintf("%s[%d]", path, i), f)
		}
	}
}

// gate runs the command as the tests of its reports want it: a plan that
// does not fit its GPU is a verdict in the report, not a failure.
func gate(args []string, w io.Writer) error {
	err := run(args, w)
	var nf notFit
	if errors.As(err, &nf) {
		return nil
	}
	return err
}

// TestLaunchGate: the exit code says whether the plans fit (0), one does
// not (1) or an input is invalid (2); -h is not an error; several plans
// go in one call; a plan that does not fit prints the changes that would
// make it fit in its framework's own flags (the HF Trainer's, torchtune's,
// torchtitan's) or vLLM's.
func TestLaunchGate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	train := func(framework, gpu string) string {
		return write(framework+"-"+gpu+".json", `{"model": "llama-3.2-1b", "gpu": "`+gpu+`", "train": {"seq_len": 2048, "micro_batch": 8, "precision": "amp_bf16", "attention": "sdpa", "optimizer": "adamw", "framework": "`+framework+`"}}`)
	}
	fits := train("hf_trainer", "B200")
	const configs = "../../vram/importer/testdata/configs/"
	for _, c := range []struct {
		args  []string
		code  int
		flags []string
	}{
		{[]string{fits}, exitFits, nil},
		{[]string{"-h"}, exitFits, nil},
		{[]string{train("hf_trainer", "RTX-4090")}, exitNoFit, []string{"--per_device_train_batch_size 4 --gradient_accumulation_steps 2", "--gradient_checkpointing true", "--use_liger_kernel true"}},
		{[]string{train("torchtune", "RTX-4090")}, exitNoFit, []string{"enable_activation_checkpointing=True", "batch_size=4 gradient_accumulation_steps=2"}},
		{[]string{train("torchtitan", "RTX-4090")}, exitNoFit, []string{"--activation_checkpoint.mode full", "--training.local_batch_size 4"}},
		{[]string{"-gpu", "RTX-4090", fits}, exitNoFit, []string{"--gradient_checkpointing true"}},
		{[]string{"-gpu", "B200", "../plans/llama3-8b-serve.json", fits}, exitFits, nil},
		{[]string{write("serve.json", `{"model": "llama-3.1-70b", "gpu": "H100", "inference": {"batch": 1, "prompt_tokens": 1024, "new_tokens": 256, "weights": "fp8"}, "vllm": {"max_model_len": 131072}, "versions": {"vllm": "0.11.0"}}`)}, exitNoFit,
			[]string{"starts         needs 71.8 GiB   shards the weights and the KV heads over twice the GPUs: --tensor-parallel-size 2", "would not start: ValueError: No available memory for the cache blocks"}},
		{[]string{fits, write("bad.json", `{"model": "llama-3.1-8b", "train": {"seq_len": -1}}`)}, exitInvalid, nil},
		// Configs as users have them, the flags after the file.
		{[]string{configs + "axolotl/llama-3__fft-8b.yaml", "-gpu", "RTX-4090"}, exitNoFit, []string{"To make it fit (axolotl's settings", "sequence_len: 4096", "adapter: qlora, load_in_4bit: true"}},
		{[]string{configs + "llamafactory/train_lora__qwen3_lora_sft.yaml", "cutoff_len=8192", "-gpu", "RTX-4090"}, exitNoFit, []string{"enable_liger_kernel: true", "cutoff_len: 4096"}},
		{[]string{configs + "torchtune/llama3_1__8B_lora_single_device.yaml", "tokenizer.max_seq_len=2048", "-gpu", "RTX-4060"}, exitNoFit, []string{"tune run --nproc_per_node 2 lora_finetune_distributed", "tokenizer.max_seq_len=1024"}},
		{[]string{configs + "hf_trainer/sft_py_full_training.sh", "-gpu", "RTX-4060"}, exitNoFit, []string{"--use_peft --lora_r 16 --lora_target_modules all-linear --load_in_4bit", "--optim adafactor"}},
		{[]string{configs + "hf_trainer/peft_integration_qlora.sh", "-gpu", "RTX-4060"}, exitFits, nil},
		{[]string{configs + "vllm/vllm-recipes__qwen3-32b_tpu_v6e.sh", "-gpu", "L4"}, exitFits, nil},
		{[]string{configs + "vllm/vllm-recipes__Llama-3.1-8B-Instruct.yaml", "-gpu", "L4"}, exitNoFit, []string{"--max-model-len", "--kv-cache-dtype fp8"}},
		{[]string{configs + "torchtune/llama3_1__8B_lora_single_device.yaml", "-gpu", "RTX-4060"}, exitInvalid, nil}, // tokenizer.max_seq_len is the data's
		{[]string{configs + "README.md"}, exitInvalid, nil},
		{[]string{"missing.json"}, exitInvalid, nil},
	} {
		var out, stderr bytes.Buffer
		code := exitCode(run(c.args, &out), &stderr)
		if code != c.code {
			t.Errorf("plan %q: exit %d, want %d\n%s%s", c.args, code, c.code, out.String(), stderr.String())
			continue
		}
		for _, f := range c.flags {
			if !strings.Contains(out.String(), f) {
				t.Errorf("plan %q: no %q among the changes:\n%s", c.args, f, out.String())
			}
		}
		if c.code == exitNoFit && !strings.Contains(out.String(), "To make it fit") {
			t.Errorf("plan %q: no advice:\n%s", c.args, out.String())
		}
	}
	// -json carries the advice, and several plans are an array.
	var out bytes.Buffer
	if err := run([]string{"-json", "-gpu", "RTX-4090", fits, fits}, &out); !errors.As(err, new(notFit)) {
		t.Fatalf("two plans that do not fit: %v", err)
	}
	var reps []answer.Report
	if err := json.Unmarshal(out.Bytes(), &reps); err != nil || len(reps) != 2 || len(reps[0].Advice) == 0 || reps[0].Advice[0].Flags == "" {
		t.Errorf("-json of two plans: %v %+v", err, reps)
	}
}

// TestReadmeExample: the output README shows for its example plan is what
// this command prints today (-update rewrites it).
func TestReadmeExample(t *testing.T) {
	const command = "<!-- BEGIN go test ./examples/plan -run TestReadmeExample -update -->\n"
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(readme, []byte(command))
	j := bytes.Index(readme[max(i, 0):], []byte("<!-- END -->"))
	if i < 0 || j < 0 {
		t.Fatalf("README.md has no section %q … <!-- END -->", strings.TrimSpace(command))
	}
	var out bytes.Buffer
	if err := run([]string{"../plans/llama3-8b-lora.json"}, &out); err != nil {
		t.Fatal(err)
	}
	want := "```console\n$ go run ./examples/plan examples/plans/llama3-8b-lora.json\n" + out.String() + "```\n"
	start := i + len(command)
	if got := string(readme[start : i+j]); got != want {
		if !*update {
			t.Fatalf("README's example output is not what the command prints today: go test ./examples/plan -run TestReadmeExample -update")
		}
		updated := append(append(append([]byte{}, readme[:start]...), want...), readme[i+j:]...)
		if err := os.WriteFile("../../README.md", updated, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReleasesFlag: -releases lists every modelled release table.
func TestReleasesFlag(t *testing.T) {
	var out bytes.Buffer
	if err := gate([]string{"-releases"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vllm 0.9.2 0.11.0 0.14.1 0.33.0 0.34.0\n", "sglang 0.4.4 0.4.9 0.5.3 0.5.23\n", "transformers 4.57.6 5.23.0\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-releases printed %q, want a line %q", out.String(), want)
		}
	}
}

// TestSchemaFlag: plan -schema prints the published schema files.
func TestSchemaFlag(t *testing.T) {
	for _, which := range []string{"plan", "report"} {
		var out bytes.Buffer
		if err := run([]string{"-schema", which}, &out); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile("../../vram/answer/" + which + ".schema.json")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("plan -schema %s differs from vram/answer/%s.schema.json", which, which)
		}
	}
	if err := run([]string{"-schema", "nope"}, io.Discard); err == nil || !strings.Contains(err.Error(), `"plan", "report"`) {
		t.Errorf("plan -schema nope: %v", err)
	}
}

// TestLogFlag: plan -log sets an engine's startup log beside the
// prediction, for the plan its own args make or for a plan file given.
func TestLogFlag(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "vllm.log")
	text := "INFO vLLM server version 0.33.0, serving model x\n" +
		"INFO non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 8192}\n" +
		"INFO Model loading took 14.99 GiB memory and 5.2 seconds\nINFO Available KV cache memory: 52.34 GiB\n" +
		"INFO GPU KV cache size: 428,768 tokens, Maximum concurrency for 8,192 tokens per request: 52.34x\n"
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"-log", log, "-gpu", "H100-80GB"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vLLM 0.33.0 startup log beside the prediction for llama-3.1-8b on H100-80GB",
		"vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192", "weights", "14.99 GiB", "428,768", "max_model_len", "agrees"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan -log lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run([]string{"-json", "-log", log, "-gpu", "H100-80GB", "../plans/llama3-8b-serve.json"}, &out); err != nil {
		t.Fatal(err)
	}
	var ex answer.Explanation
	if err := json.Unmarshal(out.Bytes(), &ex); err != nil || len(ex.Checks) < 3 || ex.Report.Model != "llama-3-8b" {
		t.Errorf("plan -json -log with a plan file: %v %+v", err, ex.Checks)
	}
	// An SGLang log alone: its server_args line names the plan.
	for _, file := range []string{"sglang-0.5.3.log", "sglang-0.5.23.log"} {
		out.Reset()
		if err := run([]string{"-log", "../../vram/importer/testdata/enginelog/" + file, "-gpu", "H100-80GB"}, &out); err != nil {
			t.Fatalf("plan -log %s: %v", file, err)
		}
		for _, want := range []string{"SGLang (release not in the log) startup log beside the prediction for llama-3.1-8b on H100-80GB",
			"the log's command line: python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct", "--tp-size 2", "weights", "kv_tokens", "the plan is the log's server_args"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("plan -log %s lacks %q:\n%s", file, want, out.String())
			}
		}
	}
	bare := filepath.Join(dir, "bare.log")
	os.WriteFile(bare, []byte("INFO Model loading took 1.00 GiB memory and 1 seconds\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-log", bare, "-gpu", "H100-80GB"}, "plan: the log names no command line"},
		{[]string{"-log", log, "a.json", "b.json"}, "-log takes one plan file"},
		{[]string{"-log", filepath.Join(dir, "none.log")}, "none.log"},
	} {
		if err := run(c.args, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("plan %v: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestLogFlagLlamaCpp: plan -log with a llama.cpp log and its plan prints
// each figure in MiB as llama.cpp prints it, by buffer, with what explains
// a difference; llama-fit-params' output sets its line beside the fit's;
// a llama.cpp log without a plan is refused, saying why.
func TestLogFlagLlamaCpp(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "mistral.json")
	os.WriteFile(plan, []byte(`{"model": {"family": "mistral", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 32000, "max_position": 32768}, `+
		`"inference": {"batch": 1, "prompt_tokens": 512, "new_tokens": 16}, "gpu": "RTX-4090", "llama_cpp": {"n_gpu_layers": 10}}`), 0o644)
	log := filepath.Join(dir, "llama.log")
	os.WriteFile(log, []byte("build: 6173 (4227c9be) with cc (Ubuntu 13.3.0) 13.3.0 for x86_64-linux-gnu\n"+
		"load_tensors: offloaded 10/33 layers to GPU\n"+
		"llama_kv_cache_unified:      CUDA0 KV buffer size =   160.00 MiB\n"+
		"llama_kv_cache_unified:        CPU KV buffer size =   356.00 MiB\n"+
		"llama_context:      CUDA0 compute buffer size =   164.00 MiB\n"), 0o644)
	var out bytes.Buffer
	if err := run([]string{"-log", log, plan}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"llama.cpp b6173 startup log beside the prediction for the plan's model on RTX-4090", "llama.cpp's load as modelled: fit off, n_ctx 4096, 10/33 layers offloaded",
		"kv_buffer CUDA0", "160.00 MiB", "kv_buffer CPU", "356.00 MiB", "352.00 MiB", "-1.1 %", "why: the cache follows n_ctx", "layers_offloaded", "agrees",
		"compute buffers are not modelled", "the log's, b6173 (4227c9be), is modelled"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan -log (llama.cpp) lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run([]string{"-json", "-log", log, plan}, &out); err != nil {
		t.Fatal(err)
	}
	var ex answer.Explanation
	if err := json.Unmarshal(out.Bytes(), &ex); err != nil || ex.Log.Engine != "llama_cpp" || ex.LlamaCppLoad == nil || len(ex.Checks) != 4 {
		t.Errorf("plan -json -log (llama.cpp): %v %+v", err, ex.Checks)
	}
	// llama-fit-params' README example (b6895) beside b10573's fit of
	// Qwen3-30B-A3B at F16 on its 24077 MiB free, its 898 MiB compute
	// buffer: the line is set beside the fit's, which differs.
	qwen := filepath.Join(dir, "qwen3.json")
	os.WriteFile(qwen, []byte(`{"model": "qwen3-30b-a3b", "inference": {"batch": 1, "prompt_tokens": 512}, `+
		`"llama_cpp": {"device_free": ["24077 MiB"], "compute_buffers": ["898 MiB"]}, "versions": {"llama_cpp": "b10573"}}`), 0o644)
	out.Reset()
	if err := run([]string{"-log", "../../vram/importer/testdata/enginelog/llama-fit-params-b6895.log", qwen}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"llama.cpp b6895 startup log", "fit_ctx_reduced", "fit_layers CUDA0", "llama-fit-params' line (line 15)", "log:       -c 4096 -ngl 48 -ot",
		"the plan names build b10573, the log was printed by b6895"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan -log (llama-fit-params) lacks %q:\n%s", want, out.String())
		}
	}
	if err := run([]string{"-log", log, "-gpu", "RTX-4090"}, io.Discard); err == nil || !strings.Contains(err.Error(), "llama.cpp prints no command line") {
		t.Errorf("a llama.cpp log alone: %v", err)
	}
}

// TestGGUFOllama: -gguf shows how Ollama loads the header's model: the
// current release (0.32.15) llama-server's flags and fit on -gpu, 0.11.10
// its up-front estimate; without -gpu the current release says it needs
// one.
func TestGGUFOllama(t *testing.T) {
	g := &vram.GGUF{Version: 3, Alignment: 32, Metadata: map[string]any{
		"general.architecture": "llama", "llama.block_count": int64(2), "llama.embedding_length": int64(256),
		"llama.attention.head_count": int64(4), "llama.attention.head_count_kv": int64(2), "llama.context_length": int64(2048),
		"llama.feed_forward_length": int64(512), "tokenizer.ggml.tokens": vram.GGUFArray{Type: "string", Len: 1000},
	}}
	add := func(name string, n int64) {
		g.Tensors = append(g.Tensors, vram.GGUFTensor{Name: name, Dims: []int64{n}, Type: 1, Bytes: vram.Bytes(2 * n)})
	}
	add("token_embd.weight", 256*1000)
	for _, p := range []string{"blk.0.", "blk.1."} {
		add(p+"attn_q.weight", 256*256)
		add(p+"ffn_up.weight", 256*512)
	}
	add("output.weight", 256*1000)
	var out bytes.Buffer
	if err := printGGUF(&out, g, false, vram.Ollama{}, "RTX-4090"); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "Ollama 0.32.15: num_ctx 2048 × num_parallel 1") || !strings.Contains(s, "llama-server -c 2048 -np 1") || !strings.Contains(s, "CUDA0 (GPU 0): 3 layers") {
		t.Errorf("0.32.15:\n%s", s)
	}
	out.Reset()
	if err := printGGUF(&out, g, false, vram.Ollama{Version: "0.11.10"}, "RTX-4090"); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "Ollama 0.11.10's estimate (num_ctx 4096") || !strings.Contains(s, "3 of 3 layers on the GPU") {
		t.Errorf("0.11.10:\n%s", s)
	}
	out.Reset()
	if err := printGGUF(&out, g, true, vram.Ollama{}, ""); err != nil || !strings.Contains(out.String(), `"ollama_release"`) || strings.Contains(out.String(), `"ollama_placement"`) {
		t.Errorf("no -gpu, json: %s, %v", out.String(), err)
	}
	out.Reset()
	if err := printGGUF(&out, g, false, vram.Ollama{}, ""); err != nil || !strings.Contains(out.String(), "name one with -gpu") {
		t.Errorf("no -gpu: %s, %v", out.String(), err)
	}
}
