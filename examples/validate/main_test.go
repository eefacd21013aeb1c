package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio/budget"
	"github.com/vramlab/vramlab/vram/snapshot"
)

var verdictRE = regexp.MustCompile(`(?m)^verdicts kind=(\S+) failed_starts=(\d+) agree=(\d+)$`)

var summaryRE = regexp.MustCompile(`(?m)^summary kind=(\S+) cases=(\d+) predicted=(\d+) skipped=(\d+) median_abs_err=([\d.]+)% p90_abs_err=([\d.]+)%$`)

// TestValidateReference runs the published measured cases and holds the
// engine to the accuracy examples/validate/README.md publishes (a regression guard: the
// numbers come from this run, with a small margin).
func TestValidateReference(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"testdata/cases.jsonl"}, &out); err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	for _, m := range summaryRE.FindAllStringSubmatch(out.String(), -1) {
		var v []float64
		for _, s := range m[2:] {
			f, _ := strconv.ParseFloat(s, 64)
			v = append(v, f)
		}
		got[m[1]] = v
	}
	for _, k := range []string{"allocated_peak", "reserved_peak", "nvidia_smi", "other", "memory", "vllm_weights_gib", "llamacpp_kv_mib", "serving", "all"} {
		if _, ok := got[k]; !ok {
			t.Fatalf("no summary line for kind %s in:\n%s", k, out.String())
		}
	}
	if mem := got["memory"]; mem[0] != 110 || mem[1]+mem[2] != mem[0] {
		t.Errorf("summary memory = %v: want 110 cases, predicted + skipped = cases", mem)
	}
	if all, srv := got["all"], got["serving"]; all[0] != 160 || srv[0] != 50 || all[1]+all[2] != all[0] {
		t.Errorf("summary all = %v, serving = %v: want 160 and 50 cases", all, srv)
	}
	// Serving logs: vLLM's weights as it loads them, llama.cpp's KV
	// buffers to the MiB, and the KV figures of the carve.
	if w := got["vllm_weights_gib"]; w[1] < 8 || w[3] > 1.5 || w[4] > 4 {
		t.Errorf("vllm_weights_gib: %v", w)
	}
	if kv := got["llamacpp_kv_mib"]; kv[1] != 6 || kv[4] != 0 {
		t.Errorf("llamacpp_kv_mib: %v", kv)
	}
	if srv := got["serving"]; srv[1] < 34 || srv[3] > 6 || srv[4] > 12 {
		t.Errorf("serving accuracy regressed: %v", srv)
	}
	for _, m := range verdictRE.FindAllStringSubmatch(out.String(), -1) {
		if m[2] != m[3] {
			t.Errorf("verdicts of failed starts (kind %s): %s of %s agree", m[1], m[3], m[2])
		}
	}
	alloc := got["allocated_peak"]
	if alloc[1] < 38 {
		t.Errorf("allocated_peak: only %v of %v cases predicted", alloc[1], alloc[0])
	}
	if alloc[3] > 6.0 || alloc[4] > 13.0 {
		t.Errorf("allocated_peak accuracy regressed: median %.1f%%, p90 %.1f%%", alloc[3], alloc[4])
	}
	if v := got["nvidia_smi"]; v[1] < v[0]-1 || v[3] > 12 {
		t.Errorf("nvidia_smi: %v of %v predicted, median %.1f%%", v[1], v[0], v[3])
	}
	// The reserved peaks are torchtune's and torchtitan's runs (the
	// torchtitan ones 8B–405B with FSDP2, TP, PP, CP, float8, compile).
	if v := got["reserved_peak"]; v[1] < 35 || v[3] > 6 || v[4] > 21 {
		t.Errorf("reserved_peak: %v of %v predicted, median %.1f%%, p90 %.1f%%", v[1], v[0], v[3], v[4])
	}
	if o := got["other"]; o[3] > 6 || o[4] > 28 {
		t.Errorf("other: accuracy regressed: median %.1f%%, p90 %.1f%%", o[3], o[4])
	}
	if all := got["all"]; all[3] > 7 || all[4] > 28 {
		t.Errorf("overall accuracy regressed: median %.1f%%, p90 %.1f%%", all[3], all[4])
	}
	// Every skipped case says why.
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "skipped:") && strings.TrimSpace(line[strings.Index(line, "skipped:")+8:]) == "" {
			t.Errorf("skip without a reason: %q", line)
		}
	}
}

func TestValidateErrors(t *testing.T) {
	// A device or a FIFO is refused before it is read.
	for _, args := range [][]string{nil, {"missing.jsonl"}, {"a", "b"}, {"/dev/zero"}, {"."}} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 3, 2, 4}
	if q := quantile(xs, 0.5); q != 3 {
		t.Errorf("median = %v", q)
	}
	if q := quantile(xs, 0.9); q < 4.5 || q > 4.7 {
		t.Errorf("p90 = %v", q)
	}
	if q := quantile(nil, 0.5); q != 0 {
		t.Errorf("empty = %v", q)
	}
}

// TestCalibrationCase: a snapshot plus its plan becomes a measured case
// (vram/snapshot.CalibrationCase) that this command reads and predicts —
// the example snapshot's run within 2 % of its allocated peak.
func TestCalibrationCase(t *testing.T) {
	s, err := snapshot.ReadFile("../snapshot/tiny-llama.snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.Rebuild(0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := vram.ReadPlan("../snapshot/tiny-llama.json")
	if err != nil {
		t.Fatal(err)
	}
	line, err := snapshot.CalibrationCase("../snapshot/tiny-llama.json", *p.Training, run, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "mine.jsonl")
	if err := os.WriteFile(file, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	cases, err := readCases(file)
	if err != nil || len(cases) != 1 {
		t.Fatalf("%d cases: %v", len(cases), err)
	}
	r := predict(cases[0], 0)
	if r.Skip != "" {
		t.Fatalf("skipped: %s", r.Skip)
	}
	if math.Abs(r.Err) > 0.02 || cases[0].ID != "snapshot_tiny-llama" {
		t.Errorf("%s: predicted %v, error %+.1f %% (measured %.4f GiB)", cases[0].ID, r.Predicted, 100*r.Err, cases[0].Measured.GiB)
	}
	var out bytes.Buffer
	if err := run2(file, &out); err != nil || !strings.Contains(out.String(), "snapshot_tiny-llama") {
		t.Errorf("validate %s: %v\n%s", file, err, out.String())
	}
}

func run2(file string, w io.Writer) error { return run([]string{file}, w) }

// TestCasesMeasuredChecked: a measured value of 0, a negative, NaN-like or
// an overflowing one (a context measurement too) is an error naming the
// case and the field, never a +Inf% row or a NaN% summary.
func TestCasesMeasuredChecked(t *testing.T) {
	for _, gib := range []string{"0", "-1", "1e300", "2e6", "5e-324", "1e-310", "1e-10"} {
		line := `{"id": "x_00", "kind": "context_only", "trust": "A", "gpu": "H100", "measured": {"what": "nvidia_smi", "gib": ` + gib + `}}`
		_, err := parseCases("c.jsonl", []byte(line+"\n"))
		if err == nil || !strings.Contains(err.Error(), `c.jsonl:1: case "x_00": measured.gib = `) {
			t.Errorf("gib %s: %v", gib, err)
		}
	}
	p := filepath.Join(t.TempDir(), "c.jsonl")
	os.WriteFile(p, []byte(`{"id": "x_00", "kind": "train", "trust": "A", "measured": {"what": "allocated_peak", "gib": 0}}`+"\n"), 0o644)
	var out bytes.Buffer
	if err := run([]string{p}, &out); err == nil || strings.Contains(out.String(), "Inf") || strings.Contains(out.String(), "NaN") {
		t.Errorf("a measured 0 ran: %v\n%s", err, out.String())
	}
}

// TestCasesCountsNotNegative: a negative count anywhere in a case (the
// GPUs, a sequence length, a parallel degree, the device) is an error that
// names it; a serving value too small to be a byte, token or block is
// refused before it divides anything.
func TestCasesCountsNotNegative(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"id": "x_01", "kind": "inference", "inference": {"gpus": -1}, "measured": {"what": "allocated_peak", "gib": 1}}`, "inference.gpus = -1: a count is never negative"},
		{`{"id": "x_02", "kind": "train", "train": {"seq_len": -4096}, "measured": {"what": "allocated_peak", "gib": 1}}`, "train.seq_len = -4096"},
		{`{"id": "x_03", "kind": "train", "train": {"parallel": {"tp": -2}}, "measured": {"what": "allocated_peak", "gib": 1}}`, "train.parallel.tp = -2"},
		{`{"id": "x_04", "kind": "inference", "inference": {"engine": "vllm"}, "measured": {"what": "vllm_kv_tokens", "value": 5, "device": -1}}`, "measured.device = -1"},
		{`{"id": "x_05", "kind": "inference", "inference": {"engine": "vllm"}, "measured": {"what": "vllm_kv_tokens", "value": 1e-300}}`, "a positive number of tokens is at least 1 (a token)"},
		{`{"id": "x_06", "kind": "inference", "inference": {"engine": "vllm"}, "measured": {"what": "vllm_available_kv_gib", "value": 5e-324}}`, "a positive number of GiB is at least"},
	} {
		_, err := parseCases("c.jsonl", []byte(c.line+"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.line, err, c.want)
		}
	}
}

// FuzzParseCases: any bytes read to cases or an error within the readers'
// budget; every case read has a measured value a prediction can divide by.
func FuzzParseCases(f *testing.F) {
	b, err := os.ReadFile("testdata/cases.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	f.Add(bytes.Join(lines[:3], nil))
	f.Add([]byte(`{"id": "x", "measured": {"gib": 0}}`))
	f.Add([]byte(`{"id": "x", "measured": {"gib": 1e400}}`))
	f.Add([]byte(`{"id": "x", "kind": "inference", "inference": {"engine": "vllm"}, "measured": {"what": "vllm_kv_tokens", "value": 5}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var cs []Case
		var err error
		budget.Check(t, len(data), func() { cs, err = parseCases("f", data) })
		if err != nil {
			return
		}
		for _, c := range cs {
			if _, ok := servingUnit[c.Measured.What]; ok {
				if v := c.Measured.Value; v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
					t.Fatalf("serving case %q read with value %v", c.ID, v)
				}
				continue
			}
			if g := c.Measured.GiB; !(g > 0) || math.IsInf(g, 0) {
				t.Fatalf("case %q read with measured %v", c.ID, g)
			}
		}
	})
}

// TestDescribableCasesExpressed: cases the format describes are predicted,
// not refused: an ExLlama run with its preallocated cache and the token
// embedding kept on the CPU, timm's DINOv2 ViT-giant written as a `vit`
// with a SwiGLU MLP and layer scale (transformers' Dinov2 without the mask
// token: timm's exact 1,136,479,232 parameters), and serving logs of
// vLLM, SGLang and llama.cpp in their own units.
func TestDescribableCasesExpressed(t *testing.T) {
	llama7 := `"model": {"name": "huggyllama/llama-7b", "family": "llama", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32, "ffn": 11008, "vocab": 32000, "mlp": "swiglu", "norm": "rmsnorm", "bias": false, "position": "rope", "max_position": 2048, "params": 6738415616, "head": "lm"}`
	for _, c := range []struct {
		line      string
		predicted vram.Bytes // at least; a serving case checks Value instead
		value     float64
	}{
		{`{"id": "x_exllama", "trust": "B", "kind": "inference", ` + llama7 + `, "inference": {"prompt_tokens": 128, "new_tokens": 128, "batch": 1, "weights": "gptq4", "group_size": 128, "unquantized_dtype": "fp16", "kv_dtype": "fp16", "kv_cache_tokens": 2048, "cpu_resident": ["embed_tokens"], "attention": "sdpa", "gpus": 1, "parallel": {"tp": 1, "pp": 1}, "engine": "exllama"}, "gpu": "RTX 4090", "measured": {"what": "allocated_peak", "gib": 4.5}}`,
			// 4-bit blocks, fp16 cache of 2048 tokens (1 GiB), no embedding.
			3 * vram.GiB, 0},
		{`{"id": "x_dinov2", "trust": "B", "kind": "train", "model": {"name": "timm/vit_giant_patch14_dinov2.lvd142m", "family": "vit", "layers": 40, "hidden": 1536, "heads": 24, "kv_heads": 24, "ffn": 4096, "mlp": "swiglu", "norm": "layernorm", "bias": true, "position": "learned", "max_position": 1370, "layer_scale": true, "params": 1136479232, "head": "none", "image": {"size": 518, "patch": 14, "channels": 3, "class_token": true}}, "train": {"seq_len": 1370, "micro_batch": 2, "grad_accum": 1, "weights_dtype": "fp32", "compute_dtype": "bf16", "autocast": true, "master_weights": "none", "grads_dtype": "fp32", "optimizer": "adamw", "optimizer_state_dtype": "fp32", "trainable": "full", "grad_checkpointing": "none", "attention": "sdpa", "loss": "logits_sum", "gpus": 1, "parallel": {"dp": 1, "zero_stage": 0, "fsdp": "none", "tp": 1, "pp": 1, "cp": 1, "ep": 1, "cpu_offload": "none"}, "framework": "plain_pytorch"}, "gpu": "A100-80GB", "measured": {"what": "allocated_peak", "gib": 20}}`,
			// fp32 weights, gradients and two AdamW moments: 16 B × 1.136e9.
			16 * 1136479232, 0},
		{`{"id": "x_llamacpp", "trust": "A", "kind": "inference", "model": {"name": "Qwen/Qwen2.5-Coder-32B-Instruct", "family": "qwen2", "layers": 64, "hidden": 5120, "heads": 40, "kv_heads": 8, "ffn": 27648, "vocab": 152064}, "inference": {"engine": "llama.cpp", "gpus": 2, "engine_settings": {"ctx-size": 32768, "ubatch-size": 256, "flash-attn": true, "cache-type-k": "q8_0", "cache-type-v": "q8_0", "n-gpu-layers": 99, "tensor-split": "10,6"}}, "gpu": "RTX 3090", "measured": {"what": "llamacpp_kv_mib", "value": 1564, "device": 1}}`,
			0, 1564},
		{`{"id": "x_sglang", "trust": "B", "kind": "inference", "model": {"name": "Qwen/Qwen3-235B-A22B-FP8", "family": "qwen3_moe"}, "inference": {"engine": "sglang", "gpus": 4, "engine_settings": {"tp_size": 4, "mem_fraction_static": 0.93}}, "gpu": "H100", "measured": {"what": "sglang_kv_tokens", "value": 367404}}`,
			0, -1},
		{`{"id": "x_vllm", "trust": "B", "kind": "inference", "model": {"name": "openai/gpt-oss-120b", "family": "gpt_oss"}, "inference": {"engine": "vllm", "engine_version": "0.11.0", "gpus": 1, "engine_settings": {"gpu_memory_utilization": 0.95, "max_num_batched_tokens": 1024}}, "gpu": "H100", "measured": {"what": "vllm_weights_gib", "value": 65.97}}`,
			0, -1},
	} {
		cases, err := parseCases("c.jsonl", []byte(c.line+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		r := predict(cases[0], 0)
		if r.Skip != "" {
			t.Errorf("%s skipped: %s", cases[0].ID, r.Skip)
			continue
		}
		switch {
		case c.value > 0 && r.Value != c.value:
			t.Errorf("%s: predicted %v %s, want %v", cases[0].ID, r.Value, r.Unit, c.value)
		case c.value < 0 && !(math.Abs(r.Err) < 0.25): // expressed; accuracy is the reference set's
			t.Errorf("%s: predicted %v %s against %v (%+.1f %%)", cases[0].ID, r.Value, r.Unit, r.Measured, 100*r.Err)
		case c.value == 0 && r.Predicted < c.predicted:
			t.Errorf("%s: predicted %v, want at least %v", cases[0].ID, r.Predicted, c.predicted)
		}
	}
}

var updateReadme = flag.Bool("update", false, "rewrite README.md's accuracy section from this run")

// TestReadmeAccuracySection: examples/validate/README.md's accuracy tables
// and case lists (the reference set, the post-training cases) are this
// command's -markdown output, never edited by hand (-update rewrites them).
func TestReadmeAccuracySection(t *testing.T) {
	for _, file := range []string{"cases.jsonl", "posttraining.jsonl"} {
		begin, end := "<!-- BEGIN go run ./examples/validate -markdown examples/validate/testdata/"+file+" -->\n", "<!-- END -->"
		readme, err := os.ReadFile("README.md")
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(readme, []byte(begin))
		j := bytes.Index(readme[max(i, 0):], []byte(end)) + max(i, 0)
		if i < 0 || j < i {
			t.Fatalf("examples/validate/README.md has no generated section for %s (%q … %q)", file, begin, end)
		}
		var out bytes.Buffer
		if err := run([]string{"-markdown", filepath.Join("testdata", file)}, &out); err != nil {
			t.Fatal(err)
		}
		if got := readme[i+len(begin) : j]; !bytes.Equal(got, out.Bytes()) {
			if *updateReadme {
				updated := append(append(append([]byte{}, readme[:i+len(begin)]...), out.Bytes()...), readme[j:]...)
				if err := os.WriteFile("README.md", updated, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("examples/validate/README.md's section for %s is not this run's: go test ./examples/validate -run TestReadmeAccuracySection -update", file)
		}
	}
}

// TestDiff: two example snapshots side by side (the figures README quotes),
// and one beside its plan's prediction; wrong arguments are a usage line.
func TestDiff(t *testing.T) {
	snap := func(n string) string { return filepath.Join("..", "snapshot", n) }
	var out bytes.Buffer
	if err := run([]string{"-diff", "-sites", "3", snap("tiny-llama.snapshot.pickle"), snap("tiny-llama-checkpointed.snapshot.pickle")}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// heading, peak, where, 6 categories, 3 sites
	if len(lines) != 12 || !regexp.MustCompile(`^allocated peak\s+88\.0 MiB\s+65\.1 MiB\s+−22\.9 MiB$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^  activations\s+45\.0 MiB\s+0 B\s+−45\.0 MiB$`).MatchString(lines[3]) ||
		!regexp.MustCompile(`^  gradients\s+0 B\s+13\.0 MiB\s+\+13\.0 MiB$`).MatchString(lines[4]) ||
		!regexp.MustCompile(`^  temporaries\s+3\.9 MiB\s+13\.0 MiB\s+\+9\.1 MiB$`).MatchString(lines[5]) ||
		!strings.HasPrefix(lines[9], "transformers/models/llama/modeling_llama.py:155 forward (activations)") {
		t.Errorf("two runs:\n%s", out.String())
	}
	out.Reset()
	if err := run([]string{"-diff", snap("tiny-llama.snapshot.pickle"), snap("tiny-llama.json")}, &out); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^allocated peak\s+88\.0 MiB\s+88\.0 MiB\s+−164 B$`).MatchString(out.String()) {
		t.Errorf("run and prediction:\n%s", out.String())
	}
	for _, args := range [][]string{
		{"-diff", snap("tiny-llama.snapshot.pickle")},
		{"-diff", "-sites", "-1", snap("tiny-llama.snapshot.pickle"), snap("tiny-llama.json")},
		{"-diff", snap("tiny-llama.json"), snap("tiny-llama.json")},
		{"-diff", "-gpu", "nope", snap("tiny-llama.snapshot.pickle"), snap("tiny-llama.json")},
	} {
		if err := run(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		} else {
			t.Logf("%q: %v", args, err)
		}
	}
}

// TestHelpExitsZero: -h prints the usage and is not an error (the command
// exits 0).
func TestHelpExitsZero(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-h"}, &out); err != nil {
		t.Errorf("-h: %v", err)
	}
}

// TestPostTrainingCases: a post-training case without its plan, or with
// one the engine refuses, is skipped with the reason; a runs verdict agrees
// only when every phase fits what the configuration ran within.
func TestPostTrainingCases(t *testing.T) {
	lines := `{"id": "x_01", "source": "s", "trust": "C", "kind": "post_training", "gpu": "H100-80GB", "measured": {"what": "runs", "gib": 10}}
{"id": "x_02", "source": "s", "trust": "C", "kind": "post_training", "model": "qwen2.5-7b", "gpu": "H100-80GB", "post_training": {"algorithm": "grpo", "framework": "nope"}, "measured": {"what": "allocated_peak", "gib": 10}}
{"id": "x_03", "source": "s", "trust": "C", "kind": "post_training", "model": "qwen2.5-0.5b", "gpu": "H100-80GB", "post_training": {"algorithm": "dpo", "framework": "trl", "prompt_len": 256, "completion_len": 256, "policy": {"micro_batch": 1}}, "measured": {"what": "runs", "gib": 79}}
{"id": "x_04", "source": "s", "trust": "C", "kind": "post_training", "model": "qwen2.5-0.5b", "gpu": "H100-80GB", "post_training": {"algorithm": "dpo", "framework": "trl", "prompt_len": 256, "completion_len": 256, "policy": {"micro_batch": 1}}, "measured": {"what": "runs", "gib": 0.5}}`
	cases, err := parseCases("post.jsonl", []byte(lines))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		skip           string
		verdict, agree bool
	}{{"needs its model and its post_training object", false, false}, {`unknown post_training.framework "nope"`, false, false}, {"", true, true}, {"", true, false}}
	for i, c := range cases {
		r := predict(c, 0)
		if !strings.Contains(r.Skip, want[i].skip) || (want[i].skip == "") != (r.Skip == "") || r.Verdict != want[i].verdict || r.Agrees != want[i].agree {
			t.Errorf("%s: skip %q verdict %v agrees %v, want %+v", c.ID, r.Skip, r.Verdict, r.Agrees, want[i])
		}
	}
}

// TestBareCommandRunsTheReferenceSet: `go run ./examples/validate` from the
// repository's root, as the README writes it, predicts the reference set.
func TestBareCommandRunsTheReferenceSet(t *testing.T) {
	wd, _ := os.Getwd()
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var out bytes.Buffer
	if err := run(nil, &out); err != nil || !strings.Contains(out.String(), "summary kind=all") {
		t.Errorf("%v\n%s", err, out.String())
	}
}

// TestCasesEveryFieldRead: a case field the format does not know is
// refused, naming it, where it had been passed over; the plan's own fields
// (activation offloading, the allocator's settings, the chunked loss, the
// recompute method, NCCL, the torch release) reach the plan; the job's GPUs
// must be what the degrees multiply to.
func TestCasesEveryFieldRead(t *testing.T) {
	base := `{"id": "x_10", "kind": "train", "trust": "A", "gpu": "H100-80GB", "model": {"name": "meta-llama/Llama-3.2-1B", "family": "llama", "layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "ffn": 8192, "vocab": 128256, "mlp": "swiglu", "norm": "rmsnorm", "position": "rope", "max_position": 131072, "tied_embeddings": true}, ` +
		`"train": {"seq_len": 2048, "micro_batch": 1, "weights_dtype": "bf16", "compute_dtype": "bf16", "optimizer": "adamw", "trainable": "full", "grad_checkpointing": "full", "attention": "sdpa", "framework": "torchtune", "gpus": 2, "parallel": {"dp": 2, "fsdp": "full_shard"}, %s}, "measured": {"what": "allocated_peak", "gib": 10}}`
	if _, err := parseCases("c.jsonl", []byte(fmt.Sprintf(base, `"activation_offload": true`)+"\n")); err == nil || !strings.Contains(err.Error(), `unknown field "activation_offload"`) {
		t.Errorf("a misspelled field: %v", err)
	}
	cs, err := parseCases("c.jsonl", []byte(fmt.Sprintf(base, `"activation_offloading": true, "alloc_conf": "expandable_segments:True", "loss": "chunked_head", "loss_chunks": 8, "nccl": "2.21.5", "torch": "2.11.0", "trainable_params": 1235814400`)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs[0].training()
	if err != nil {
		t.Fatal(err)
	}
	if !tr.ActivationOffloading || tr.AllocConf != "expandable_segments:True" || tr.LossChunks != 8 || tr.NCCL != "2.21.5" || cs[0].Train.Torch != "2.11.0" {
		t.Errorf("the plan's fields did not arrive: %+v", tr)
	}
	cs, err = parseCases("c.jsonl", []byte(strings.Replace(fmt.Sprintf(base, `"loss_chunks": 8`), `"gpus": 2`, `"gpus": 4`, 1)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs[0].training(); err == nil || !strings.Contains(err.Error(), "train.gpus 4 is not the parallel degrees' dp × tp × pp × cp = 2") {
		t.Errorf("gpus against the degrees: %v", err)
	}
}

// TestTrainableCountsAsPrinted: every reference case whose source printed
// its trainable parameters is planned with that many (litgpt's fused
// q|k|v LoRA among them: lit_03 and lit_04's 2,097,152).
func TestTrainableCountsAsPrinted(t *testing.T) {
	cases, err := readCases(filepath.Join("testdata", "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases {
		if c.Train == nil || c.Train.TrainableParams == 0 || c.Train.Trainable == "adapter" {
			continue
		}
		tr, err := c.training()
		if err != nil {
			continue // skipped by validate, with its reason
		}
		est, err := tr.Estimate()
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		if est.TrainableParams != c.Train.TrainableParams {
			t.Errorf("%s: %d trainable in the plan, %d printed by the source", c.ID, est.TrainableParams, c.Train.TrainableParams)
		}
		n++
	}
	if n < 2 {
		t.Errorf("only %d cases with a printed trainable count", n)
	}
}

// TestCaseFormatCoversThePlan: every field of a training plan has a case
// field of the same name (the case reader passes none over, and none of
// the plan's is missing), but the model, which a case gives in its own
// words at the top.
func TestCaseFormatCoversThePlan(t *testing.T) {
	have := map[string]bool{}
	ct := reflect.TypeOf(caseTrain{})
	for i := range ct.NumField() {
		have[strings.Split(ct.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	tt := reflect.TypeOf(vram.Training{})
	for i := range tt.NumField() {
		f := tt.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if !f.IsExported() || name == "" || name == "-" || name == "model" {
			continue
		}
		if !have[name] {
			t.Errorf("the plan's train.%s has no case field (cases.go caseTrain, cases-format.md)", name)
		}
	}
}
