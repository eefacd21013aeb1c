package vram

import (
	"fmt"
	"github.com/vramlab/vramlab/vram/fileio/budget"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// releases are checkpoints as released, each with the total its
// model.safetensors.index.json states (metadata.total_size) or, where the
// index was not at hand, the total the hub's per-dtype element counts
// give; and the config.json fixture it is read from.
var releases = []struct {
	preset, config string
	total          int64
	source         string
	exact          bool
}{
	{"gpt-oss-20b", "gpt-oss-20b.json", 13_761_264_768, "openai/gpt-oss-20b model.safetensors.index.json metadata.total_size", true},
	{"gpt-oss-120b", "gpt-oss-120b.json", 65_248_815_744, "openai/gpt-oss-120b: its 15 shards' tensor bytes", true},
	// HF's per-dtype counts: F8_E4M3 680,571,043,840 + BF16 3,918,786,560
	// + F32 41,555,600 elements (the MTP layer and the fp32 router biases
	// included).
	{"deepseek-v3", "deepseek-v3.json", 680_571_043_840 + 2*3_918_786_560 + 4*41_555_600, "deepseek-ai/DeepSeek-V3 safetensors per-dtype counts", true},
	{"deepseek-r1", "", 680_571_043_840 + 2*3_918_786_560 + 4*41_555_600, "deepseek-ai/DeepSeek-R1 safetensors per-dtype counts (as V3)", true},
	{"kimi-k2-instruct", "kimi-k2-instruct.json", 1_029_173_256_720, "moonshotai/Kimi-K2-Instruct model.safetensors.index.json metadata.total_size", false},
	// HF's count for the FP8 release, 235,107,904,512 elements: F8
	// 233,798,893,568 + F32 14,269,952 + BF16 1,294,740,992.
	{"qwen3-235b-a22b-fp8", "qwen3-235b-a22b-fp8.json", 233_798_893_568 + 4*14_269_952 + 2*1_294_740_992, "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 safetensors counts", true},
	// bf16 releases: 2 bytes × the hub's parameter count, the vision
	// encoder's 0.87 B parameters included (its text model alone,
	// llama-4-scout-text, has 107,769,861,120).
	{"llama-4-scout", "", 2 * 108_641_793_536, "meta-llama/Llama-4-Scout-17B-16E parameter count, all bf16", true},
	{"llama-4-maverick", "", 2 * 401_583_781_376, "meta-llama/Llama-4-Maverick-17B-128E parameter count, all bf16", true},
	// Meta's recipe: the routed experts of the 24 MoE layers in fp8 with
	// fp32 row scales, the rest (the tower too) bf16.
	{"llama-4-maverick-fp8", "", 416_884_747_264, "Meta's FP8 recipe applied to Maverick's parameters (derived: the release's index was not at hand)", false},
}

// TestReleasedStorage: every preset of a released checkpoint stores what
// the checkpoint does, within 1 % of its total (to the byte where the
// parts are known), and its config.json reads to the same storage.
func TestReleasedStorage(t *testing.T) {
	for _, c := range releases {
		m := MustPreset(c.preset)
		got := int64(m.StoredBytes())
		if c.exact && got != c.total || math.Abs(float64(got-c.total))/float64(c.total) > 0.01 {
			t.Errorf("%s: stored %d bytes, the checkpoint %d (%s)", c.preset, got, c.total, c.source)
		}
		if c.config == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", "hf", c.config))
		if err != nil {
			t.Fatal(err)
		}
		fm, err := FromHFConfig(b)
		if err != nil {
			t.Fatalf("%s: %v", c.config, err)
		}
		if fb := fm.StoredBytes(); int64(fb) != got || fm.Release.Method != m.Release.Method || fm.Release.Format != m.Release.Format {
			t.Errorf("%s: the config stores %d bytes as %+v, the preset %d as %+v", c.config, fb, fm.Release, got, m.Release)
		}
	}
}

// storedAs lists m's tensors as a released checkpoint's headers name and
// shape them, by the rules the releases document (independent of
// Release): mxfp4 experts as _blocks [E, out, in/32, 16] and _scales
// [E, out, in/32] bytes; block fp8 linear weights with a weight_scale_inv
// [⌈out/128⌉, ⌈in/128⌉] in fp32; the rest in bf16.
func storedAs(m Model, method string) []ckTensor {
	var out []ckTensor
	for _, t := range append(m.Tensors(), m.storedOnly()...) {
		switch {
		case t.DType == FP32:
			out = append(out, ckTensor{t.Name, "F32", t.Shape})
		case method == "mxfp4" && t.Stacked > 0 && t.Role != "bias":
			e, in, o := t.Shape[0], t.Shape[1], t.Shape[2]
			out = append(out, ckTensor{t.Name + "_blocks", "U8", []int64{e, o, in / 32, 16}}, ckTensor{t.Name + "_scales", "U8", []int64{e, o, in / 32}})
		case method == "fp8" && t.IsLinear() && t.Role != "lm_head" && t.Role != "router":
			o, in := t.Shape[0], t.Shape[1]
			scale := strings.TrimSuffix(t.Name, ".weight") + ".weight_scale_inv"
			out = append(out, ckTensor{t.Name, "F8_E4M3", t.Shape}, ckTensor{scale, "F32", []int64{(o + 127) / 128, (in + 127) / 128}})
		default:
			out = append(out, ckTensor{t.Name, "BF16", t.Shape})
		}
	}
	return out
}

// TestReleasedCheckpointAgrees: a checkpoint folder of the release's
// headers (its config.json as released) reads to the preset's storage,
// tensor for tensor, with its format named.
func TestReleasedCheckpointAgrees(t *testing.T) {
	oneGoroutineTable(t)
	for _, c := range []struct{ preset, config, method, format string }{
		{"gpt-oss-20b", "gpt-oss-20b.json", "mxfp4", "mxfp4"},
		{"deepseek-v3", "deepseek-v3.json", "fp8", "fp8"},
	} {
		dir := filepath.Join(t.TempDir(), c.preset)
		m := MustPreset(c.preset)
		writeCheckpoint(t, dir, m, storedAs(m.Normalize(), c.method), 8)
		cfg, err := os.ReadFile(filepath.Join("testdata", "hf", c.config))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		ck, err := OpenCheckpoint(dir)
		if err != nil {
			t.Fatalf("%s: %v", c.preset, err)
		}
		if ck.Total != m.StoredBytes() || ck.Format != c.format {
			t.Errorf("%s: the checkpoint stores %d bytes (%s), the preset %d", c.preset, ck.Total, ck.Format, m.StoredBytes())
		}
		for _, tn := range m.Normalize().Tensors() {
			if want := m.Release.storedBytes(tn); ck.Stored[tn.Name] != want {
				t.Errorf("%s: %s stored %d bytes, the release %d", c.preset, tn.Name, ck.Stored[tn.Name], want)
				break
			}
		}
	}
}

// TestModelOptFolder: a ModelOpt export's folder — config.json without a
// quantization_config, hf_quant_config.json beside it and NVFP4 weights
// (packed e2m1, fp8 group scales, two fp32 per-tensor scales) — reads as
// the NVFP4 release it is, byte for byte.
func TestModelOptFolder(t *testing.T) {
	m, err := FromHFConfig([]byte(`{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000, "torch_dtype": "bfloat16"}`))
	if err != nil {
		t.Fatal(err)
	}
	var ts []ckTensor
	for _, tn := range m.Normalize().Tensors() {
		if !tn.IsLinear() || tn.Role == "lm_head" {
			ts = append(ts, ckTensor{tn.Name, "BF16", tn.Shape})
			continue
		}
		o, in, p := tn.Shape[0], tn.Shape[1], strings.TrimSuffix(tn.Name, ".weight")
		ts = append(ts, ckTensor{tn.Name, "U8", []int64{o, in / 2}}, ckTensor{p + ".weight_scale", "F8_E4M3", []int64{o, in / 16}},
			ckTensor{p + ".weight_scale_2", "F32", []int64{}}, ckTensor{p + ".input_scale", "F32", []int64{}})
	}
	dir := t.TempDir()
	writeCheckpoint(t, dir, m, ts, 1)
	hq := `{"producer": {"name": "modelopt", "version": "0.37.0"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": null, "group_size": 16, "exclude_modules": ["lm_head"]}}`
	if err := os.WriteFile(filepath.Join(dir, "hf_quant_config.json"), []byte(hq), 0o644); err != nil {
		t.Fatal(err)
	}
	ck, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := ck.Model.Release
	if r == nil || r.Method != "modelopt" || r.Format.DType != NVFP4 || ck.Total != ck.Model.StoredBytes() {
		t.Errorf("release %+v; the folder stores %d bytes, the release %d", r, ck.Total, ck.Model.StoredBytes())
	}
	if err := os.WriteFile(filepath.Join(dir, "hf_quant_config.json"), []byte(`{"quantization": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "hf_quant_config.json") {
		t.Errorf("a broken hf_quant_config.json: %v", err)
	}
}

// TestModelOptConfigBounded: hf_quant_config.json is a downloaded file
// like config.json: deep nesting, a million keys, a long exclude list and
// a file past MaxConfigFile each read (or fail, naming the file) within
// the reader's budget, and never panic.
func TestModelOptConfigBounded(t *testing.T) {
	m, err := FromHFConfig([]byte(`{"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeCheckpoint(t, dir, m, asStored(m.Normalize(), "BF16", nil), 1)
	n := 1 << 18
	var many strings.Builder
	for i := 0; i < n/8; i++ {
		fmt.Fprintf(&many, `"k%d": 1, `, i)
	}
	for name, body := range map[string]string{
		"deep nesting":        `{"quantization": {"quant_algo": "NVFP4", "x": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}`,
		"many keys":           `{"quantization": {` + many.String() + `"quant_algo": "NVFP4"}}`,
		"a long exclude list": `{"quantization": {"quant_algo": "NVFP4", "exclude_modules": [` + strings.Repeat(`"model.layers.*.x*", `, n/20) + `"lm_head"]}}`,
		"past the size limit": `{"quantization": {"quant_algo": "NVFP4", "pad": "` + strings.Repeat("a", int(MaxConfigFile)) + `"}}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, "hf_quant_config.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		budget.Check(t, len(body), func() { _, err = OpenCheckpoint(dir) })
		refused := strings.HasPrefix(name, "deep") || strings.HasPrefix(name, "past")
		if refused != (err != nil) || err != nil && !strings.Contains(err.Error(), "hf_quant_config.json") {
			t.Errorf("%s: %v (want it refused, naming the file: %v)", name, err, refused)
		}
	}
}

// TestReleaseFromConfig: each quant_method's quantization_config reads to
// the format transformers' config class gives it, the modules it leaves
// alone and what it converts; what is not modelled is an error naming it.
func TestReleaseFromConfig(t *testing.T) {
	llama := `"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000, "torch_dtype": "float16"`
	for _, c := range []struct {
		name, qc string
		want     Quant
		head     bool
		q, down  bool // q_proj and down_proj of block 0 converted
	}{
		// Qwen/Qwen2.5-Coder-1.5B-Instruct-GPTQ-Int4 config.json.
		{"gptq", `{"bits": 4, "group_size": 128, "desc_act": false, "sym": true, "quant_method": "gptq", "lm_head": false}`, Quant{DType: INT4, GroupSize: 128}, false, true, true},
		// TheBloke/zephyr-7B-alpha-AWQ (transformers docs, awq.md).
		{"awq", `{"quant_method": "awq", "zero_point": true, "group_size": 128, "bits": 4, "version": "gemm"}`, Quant{DType: INT4, GroupSize: 128, Layout: "awq"}, false, true, true},
		// A pre-quantized bitsandbytes 4-bit export.
		{"bnb nf4", `{"_load_in_4bit": true, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, "llm_int8_skip_modules": ["down_proj"], "load_in_4bit": true, "quant_method": "bitsandbytes"}`, Quant{DType: NF4, DoubleQuant: true}, false, true, false},
		{"bnb int8", `{"load_in_8bit": true, "quant_method": "bitsandbytes"}`, Quant{DType: INT8}, false, true, true},
		// nm-testing/Meta-Llama-3.1-8B-Instruct-FP8-hf (transformers docs,
		// compressed_tensors.md).
		{"compressed-tensors fp8", `{"config_groups": {"group_0": {"input_activations": {"num_bits": 8, "strategy": "tensor", "type": "float"}, "targets": ["Linear"], "weights": {"num_bits": 8, "strategy": "tensor", "type": "float"}}}, "format": "naive-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors"}`, Quant{DType: FP8E4M3}, false, true, true},
		// Kimi-K2-Thinking's INT4 W4A16 (group 32, symmetric), attention ignored.
		{"compressed-tensors int4", `{"config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": true}}}, "format": "pack-quantized", "ignore": ["lm_head", "re:.*self_attn.*"], "quant_method": "compressed-tensors"}`, Quant{DType: INT4, GroupSize: 32, Layout: "symmetric"}, false, false, true},
		{"fp8 block", `{"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128], "modules_to_not_convert": ["mlp"]}`, Quant{DType: FP8E4M3, Block: 128}, false, true, false},
		{"fbgemm", `{"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["model.layers.0.self_attn"]}`, Quant{DType: FP8E4M3, PerChannel: true}, false, false, true},
		// A ModelOpt NVFP4 export's config.json (nvidia/*-NVFP4): its
		// exclude list in shell wildcards.
		{"modelopt nvfp4", `{"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "ignore": ["lm_head", "model.layers.*.self_attn*"], "kv_cache_scheme": null}`, Quant{DType: NVFP4, GroupSize: 16}, false, false, true},
		{"modelopt fp8", `{"quant_method": "modelopt", "quant_algo": "fp8", "exclude_modules": ["model.layers.0.mlp.down_proj"]}`, Quant{DType: FP8E4M3}, false, true, false},
		// llm-compressor's NVFP4 preset (nvfp4-pack-quantized).
		{"compressed-tensors nvfp4", `{"config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": true}, "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"}}}, "format": "nvfp4-pack-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors"}`, Quant{DType: NVFP4, GroupSize: 16}, false, true, true},
	} {
		m, err := FromHFConfig([]byte("{" + llama + `, "quantization_config": ` + c.qc + "}"))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		r := m.Release
		conv := map[string]bool{}
		for _, tn := range m.Normalize().Tensors() {
			conv[tn.Name] = r.converts(tn)
		}
		if r.Format != c.want || r.Head != c.head || r.DType != FP16 ||
			conv["model.layers.0.self_attn.q_proj.weight"] != c.q || conv["model.layers.0.mlp.down_proj.weight"] != c.down || conv["lm_head.weight"] != c.head || conv["model.embed_tokens.weight"] {
			t.Errorf("%s: %+v; q_proj %v, down_proj %v, lm_head %v", c.name, r, conv["model.layers.0.self_attn.q_proj.weight"], conv["model.layers.0.mlp.down_proj.weight"], conv["lm_head.weight"])
		}
	}
	for _, c := range []struct{ qc, want string }{
		{`{"quant_method": "hqq"}`, `quant_method "hqq" is not modelled`},
		{`{"quant_method": "modelopt"}`, "quant_algo is missing"},
		{`{"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}`, `quant_algo "W4A8_AWQ": NVFP4 and FP8 are modelled`},
		{`{"quant_method": "fp8", "weight_block_size": [128, 64]}`, "square blocks"},
		{`{"quant_method": "gptq", "bits": 3}`, "bits 3"},
		{`{"quant_method": "bitsandbytes"}`, "neither load_in_4bit nor load_in_8bit"},
		{`{"quant_method": "mxfp4", "modules_to_not_convert": [7]}`, "modules_to_not_convert[0] must be a module name"},
		{`"fp8"`, `"quantization_config" must be an object`},
	} {
		_, err := FromHFConfig([]byte("{" + llama + `, "quantization_config": ` + c.qc + "}"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.qc, err, c.want)
		}
	}
}

// TestQuantSizes: each released format's bytes for one matrix, from its
// stored tensors' shapes.
func TestQuantSizes(t *testing.T) {
	const rows, cols = 5760, 2880 // gpt-oss's gate_up_proj of one expert
	for _, c := range []struct {
		q    Quant
		want int64
	}{
		{Quant{DType: MXFP4}, rows*cols/2 + rows*cols/32},                                 // _blocks + _scales
		{Quant{DType: NVFP4}, rows*cols/2 + rows*cols/16 + 8},                             // weight, weight_scale (fp8), weight_scale_2 and input_scale
		{Quant{DType: FP8E4M3, Block: 128}, rows*cols + 4*45*23},                          // weight + weight_scale_inv [45, 23]
		{Quant{DType: FP8E4M3, PerChannel: true}, rows*cols + 4*rows},                     // weight + weight_scale [rows, 1]
		{Quant{DType: INT4, GroupSize: 128, Layout: "awq"}, rows*cols/2 + 23*rows*5/2},    // qweight, qzeros, scales
		{Quant{DType: INT4, GroupSize: 32, Layout: "symmetric"}, rows*cols/2 + 90*rows*2}, // weight_packed, weight_scale
		{Quant{DType: INT4, GroupSize: 128}, rows*cols/2 + 23*rows*5/2 + 4*cols},          // GPTQ: g_idx too
	} {
		if got := int64(c.q.Size(rows, cols)); got != c.want {
			t.Errorf("%v: %d bytes, want %d", c.q, got, c.want)
		}
	}
	for _, s := range []string{`"nf4"`, `"mxfp4"`, `{"dtype": "fp8", "block": 128}`} {
		var q Quant
		if err := q.UnmarshalJSON([]byte(s)); err != nil || !q.Quantized() {
			t.Errorf("%s: %+v, %v", s, q, err)
		}
	}
	for s, want := range map[string]string{
		`{"dtype": "nf4", "block": 128}`:   "block and per_channel scales apply to fp8",
		`{"dtype": "int4", "layout": "x"}`: `layout "x"`,
		`{"dtype": "int4", "blocks": 1}`:   `blocks`,
		`"float128"`:                       `unknown dtype "float128"`,
	} {
		var q Quant
		if err := q.UnmarshalJSON([]byte(s)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", s, err, want)
		}
	}
}

// TestModelOptCapabilityByRelease: each engine release refuses a GPU below
// its own ModelOpt minimum, by algorithm (the release rows' modeloptCC):
// vLLM 0.11.0 FP8 8.9 and NVFP4 8.0, 0.33.0 8.0 and 7.5; SGLang 0.5.3
// NVFP4 10.0, 0.5.23 8.0.
func TestModelOptCapabilityByRelease(t *testing.T) {
	base := `"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"`
	model := func(algo string) Model {
		m, err := FromHFConfig([]byte(`{` + base + `, "quantization_config": {"quant_method": "modelopt", "quant_algo": "` + algo + `"}}`))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, c := range []struct {
		engine, version, algo, gpu string
		refused                    bool
	}{
		{"vllm", "0.11.0", "NVFP4", "T4", true},
		{"vllm", "0.11.0", "NVFP4", "A100-80GB", false},
		{"vllm", "0.33.0", "NVFP4", "T4", false},
		{"vllm", "0.11.0", "FP8", "A100-80GB", true},
		{"vllm", "0.33.0", "FP8", "A100-80GB", false},
		{"sglang", "0.5.3", "NVFP4", "H100-80GB", true},
		{"sglang", "0.5.23", "NVFP4", "H100-80GB", false},
	} {
		in := Inference{Model: model(c.algo)}
		var msg string
		if c.engine == "vllm" {
			cv, err := VLLM{Version: c.version, MaxModelLen: 4096}.Carve(in, mustGPU(c.gpu))
			if err != nil {
				t.Fatalf("%+v: %v", c, err)
			}
			msg = cv.Err
		} else {
			p, err := SGLang{Version: c.version}.Carve(in, mustGPU(c.gpu))
			if err != nil {
				t.Fatalf("%+v: %v", c, err)
			}
			msg = p.Err
		}
		if got := strings.Contains(msg, "quantization method modelopt is not supported"); got != c.refused {
			t.Errorf("%s %s, %s on %s: refused %v (%q)", c.engine, c.version, c.algo, c.gpu, got, msg)
		}
	}
}
