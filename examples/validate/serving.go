package main

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// Serving-log cases: what a serving engine's startup log prints, measured
// in the log's own unit (testdata/cases-format.md, "Serving-log kinds"),
// with the engine's settings as the launch named them.

// servingUnit is the unit of each serving-log kind, by kind.
var servingUnit = map[string]string{
	"vllm_weights_gib":      "GiB",
	"vllm_available_kv_gib": "GiB",
	"vllm_kv_tokens":        "tokens",
	"vllm_gpu_blocks":       "blocks",
	"vllm_max_concurrency":  "x",
	"sglang_kv_tokens":      "tokens",
	"sglang_kv_gib":         "GiB",
	"llamacpp_kv_mib":       "MiB",
	"llamacpp_compute_mib":  "MiB",
	"llamacpp_model_mib":    "MiB",
}

// servingKinds lists the serving-log kinds in report order.
func servingKinds() []string {
	var ks []string
	for k := range servingUnit {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// servingLeast is the least positive value of each unit a log can show (a
// byte, a token, a block; a normal float for a concurrency), so that a
// prediction's error is never divided by a subnormal.
var (
	servingLeast    = map[string]float64{"GiB": 1.0 / (1 << 30), "MiB": 1.0 / (1 << 20), "tokens": 1, "blocks": 1, "x": 0x1p-1022}
	servingLeastWhy = map[string]string{"GiB": "a byte", "MiB": "a byte", "tokens": "a token", "blocks": "a block", "x": "the least normal number"}
)

// maxServingValue bounds a serving-log value (tokens, blocks, GiB, MiB).
const maxServingValue = 1e12

// checkServing checks a serving-log case's value: a finite number within
// bounds (a failed start logs 0 blocks or a negative KV memory).
func checkServing(c Case) error {
	v := c.Measured.Value
	if v == nil {
		return fmt.Errorf("measured.value is required for measured.what %q (in %s)", c.Measured.What, servingUnit[c.Measured.What])
	}
	unit := servingUnit[c.Measured.What]
	if math.IsNaN(*v) || math.Abs(*v) > maxServingValue {
		return fmt.Errorf("measured.value = %v: must be a number of %s within ±%g", *v, unit, maxServingValue)
	}
	if *v > 0 && *v < servingLeast[unit] {
		return fmt.Errorf("measured.value = %v: a positive number of %s is at least %g (%s); 0 or less is a failed start", *v, unit, servingLeast[unit], servingLeastWhy[unit])
	}
	if c.Kind != "inference" || c.Infer == nil {
		return fmt.Errorf("measured.what %q is a serving log: kind must be inference, with an inference object", c.Measured.What)
	}
	return nil
}

// settings are a case's engine_settings, read by name with a type check
// that names the field.
type settings map[string]json.RawMessage

func (s settings) num(key string) (float64, bool, error) {
	raw, ok := s[key]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, fmt.Errorf("inference.engine_settings.%s: want a number, got %s", key, raw)
	}
	return f, true, nil
}

// int reads a whole number in [lo, hi]; first of the names that is set.
func (s settings) int(lo, hi int, keys ...string) (int, error) {
	for _, k := range keys {
		f, ok, err := s.num(k)
		if err != nil || !ok {
			if err != nil {
				return 0, err
			}
			continue
		}
		if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
			return 0, fmt.Errorf("inference.engine_settings.%s = %v: want a whole number in [%d, %d]", k, f, lo, hi)
		}
		return int(f), nil
	}
	return 0, nil
}

func (s settings) str(keys ...string) (string, error) {
	for _, k := range keys {
		raw, ok := s[k]
		if !ok || string(raw) == "null" {
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", fmt.Errorf("inference.engine_settings.%s: want a string, got %s", k, raw)
		}
		return v, nil
	}
	return "", nil
}

func (s settings) bool(keys ...string) (bool, error) {
	for _, k := range keys {
		raw, ok := s[k]
		if !ok || string(raw) == "null" {
			continue
		}
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			return false, fmt.Errorf("inference.engine_settings.%s: want true or false, got %s", k, raw)
		}
		return v, nil
	}
	return false, nil
}

func (s settings) has(key string) bool {
	raw, ok := s[key]
	return ok && string(raw) != "null"
}

// servingModel is the case's architecture, or, where the case names only
// the checkpoint (model.name and family), the catalog's preset of that
// Hugging Face id with the storage it is released in.
func (c Case) servingModel() (vram.Model, string, error) {
	var probe struct {
		Name   string `json:"name"`
		Layers int    `json:"layers"`
		Hidden int    `json:"hidden"`
	}
	if err := json.Unmarshal(c.Model, &probe); err != nil {
		return vram.Model{}, "", fmt.Errorf("model: %v", err)
	}
	if probe.Layers > 0 || probe.Hidden > 0 {
		m, err := c.model()
		return m, "", err
	}
	p, err := vram.LookupPreset(probe.Name)
	if err != nil {
		return vram.Model{}, "", skip("model %q gives no shape and is not in the catalog", probe.Name)
	}
	return p.Model, "as released (catalog)", nil
}

// servingInference is the case's weights and KV dtype on its model.
func (c Case) servingInference(m vram.Model) (vram.Inference, error) {
	ci := c.Infer
	in := vram.Inference{Model: m, Batch: 1, PromptTokens: 1, QuantizedModules: ci.QuantizedModules}
	if ci.Weights != "" {
		w, err := dtype("inference.weights", ci.Weights)
		if err != nil {
			return in, err
		}
		in.Weights = vram.Quant{DType: w, GroupSize: ci.GroupSize, DoubleQuant: ci.DoubleQuant}
	}
	var err error
	if in.UnquantizedDType, err = dtype("unquantized_dtype", ci.UnquantizedDType); err != nil {
		return in, err
	}
	return in, nil
}

// kvDType reads an engine's KV cache dtype setting ("auto": the model's).
func kvDType(s string) (vram.DType, error) {
	if s == "" || s == "auto" {
		return vram.DTypeUnset, nil
	}
	return dtype("kv_cache_dtype", s)
}

// predictServing predicts a serving-log case.
func predictServing(c Case) Result {
	res := Result{Case: c, Unit: servingUnit[c.Measured.What], Measured: *c.Measured.Value}
	v, where, err := servingValue(c)
	if err != nil {
		var u unsupported
		if ok := asUnsupported(err, &u); ok {
			res.Skip = u.reason
		} else {
			res.Skip = "cannot express: " + err.Error()
		}
		return res
	}
	res.Value, res.Where = v.value, where
	switch {
	case res.Measured <= 0 || v.refused != "":
		// A failed start: the verdict is what can be compared.
		res.Verdict = true
		res.Agrees = (res.Measured <= 0) == (v.refused != "")
		res.Where = strings.TrimSpace(where + "; " + orText(v.refused, "starts"))
	default:
		res.Err = (v.value - res.Measured) / math.Abs(res.Measured)
	}
	return res
}

// prediction is a serving figure and, when the engine would not start,
// why (in the engine's words).
type prediction struct {
	value   float64
	refused string
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func servingValue(c Case) (prediction, string, error) {
	var s settings
	if len(c.Infer.EngineSettings) > 0 {
		if err := json.Unmarshal(c.Infer.EngineSettings, &s); err != nil {
			return prediction{}, "", fmt.Errorf("inference.engine_settings: want an object")
		}
	}
	m, how, err := c.servingModel()
	if err != nil {
		return prediction{}, "", err
	}
	switch c.Infer.Engine {
	case "vllm":
		return vllmValue(c, m, s, how)
	case "sglang":
		return sglangValue(c, m, s, how)
	case "llama.cpp":
		return llamaCppValue(c, m, s)
	}
	return prediction{}, "", skip("measured.what %q needs inference.engine vllm, sglang or llama.cpp, not %q", c.Measured.What, c.Infer.Engine)
}

// caseGPU is the case's GPU from the catalog.
func caseGPU(c Case) (vram.GPU, error) {
	g, err := vram.LookupGPU(c.GPU)
	if err != nil {
		return g, skip("GPU %q is not in the catalog (its memory sizes the carve)", c.GPU)
	}
	return g, nil
}

func vllmSettings(s settings, m vram.Model) (vram.VLLM, error) {
	var v vram.VLLM
	var err error
	if f, ok, e := s.num("gpu_memory_utilization"); e != nil {
		return v, e
	} else if ok {
		v.GPUMemoryUtilization = f
	}
	if v.MaxModelLen, err = s.int(1, 1<<30, "max_model_len", "max_seq_len"); err != nil {
		return v, err
	}
	if v.MaxNumBatchedTokens, err = s.int(1, 1<<30, "max_num_batched_tokens"); err != nil {
		return v, err
	}
	if v.MaxNumSeqs, err = s.int(1, 1<<30, "max_num_seqs"); err != nil {
		return v, err
	}
	if f, ok, e := s.num("VLLM_USE_FLASHINFER_SAMPLER"); e != nil {
		return v, e
	} else if ok {
		v.FlashInferSampler = f == 1
	}
	if v.TP, err = s.int(1, 1024, "tensor_parallel_size"); err != nil {
		return v, err
	}
	if v.PP, err = s.int(1, 1024, "pipeline_parallel_size"); err != nil {
		return v, err
	}
	if v.BlockSize, err = s.int(1, 1<<16, "block_size"); err != nil {
		return v, err
	}
	kv, err := s.str("kv_cache_dtype")
	if err != nil {
		return v, err
	}
	if v.KVCacheDType, err = kvDType(kv); err != nil {
		return v, err
	}
	// A KV connector turns the hybrid KV cache manager off
	// (vllm/config/__init__.py VllmConfig.__post_init__).
	off, err := s.bool("disable_hybrid_kv_cache_manager")
	if err != nil {
		return v, err
	}
	v.DisableHybridKVCache = off || s.has("kv_transfer_config")
	if f, ok, err := s.num("VLLM_USE_V1"); err != nil {
		return v, err
	} else if ok {
		v.UseV1 = f == 1
	}
	if v.AllowLongMaxModelLen, err = s.bool("VLLM_ALLOW_LONG_MAX_MODEL_LEN"); err != nil {
		return v, err
	}
	if m.Release != nil && m.Release.Format.DType == vram.MXFP4 {
		v.MXFP4Backend, err = s.str("mxfp4_backend")
	}
	return v, err
}

func vllmValue(c Case, m vram.Model, s settings, how string) (prediction, string, error) {
	v, err := vllmSettings(s, m)
	if err != nil {
		return prediction{}, "", err
	}
	g, err := caseGPU(c)
	if err != nil {
		return prediction{}, "", err
	}
	in, err := c.servingInference(m)
	if err != nil {
		return prediction{}, "", err
	}
	v0 := c.Infer.EngineVersion != "" && vllmV0(c.Infer.EngineVersion, s)
	if v0 {
		if v, err = vllmV0Defaults(v, m, s); err != nil {
			return prediction{}, "", err
		}
	}
	v.Version = c.Infer.EngineVersion // the release the case ran; older and newer ones resolve to the nearest modelled
	if _, err := vram.ParseVersion("vllm", v.Version); err != nil {
		v.Version = "" // not a release the case names: the current one
	}
	carve, err := v.Carve(in, g)
	if err != nil {
		return prediction{}, "", err
	}
	engine := "the V1 engine as vLLM " + carve.Release.Release + " runs it"
	if v0 {
		engine = "the V0 engine of " + c.Infer.EngineVersion + " (the V1 rules of " + carve.Release.Release + " otherwise)"
	}
	where := fmt.Sprintf("vLLM carve (%s: profiled at %d tokens, %d sequences)", engine, carve.ProfileTokens, carve.ProfileSeqs)
	if how != "" {
		where += ", " + how
	}
	p := prediction{refused: carve.Err}
	if strings.HasPrefix(carve.Err, "ValueError: To serve") {
		// vLLM sizes the cache before it checks one request of
		// max_model_len, and logs the figures (V0 in the error itself).
		p.refused = ""
	}
	avail := float64(carve.Requested-carve.Weights-carve.Activation-carve.NonTorch-carve.CUDAGraphs) / float64(vram.GiB)
	switch c.Measured.What {
	case "vllm_weights_gib":
		p = prediction{value: carve.Weights.GiB()} // loading happens whatever follows
	case "vllm_available_kv_gib":
		p.value = avail // vLLM logs it signed
	case "vllm_kv_tokens":
		p.value = float64(carve.KVCache.Tokens)
	case "vllm_gpu_blocks":
		p.value = float64(carve.KVCache.Blocks)
	case "vllm_max_concurrency":
		p.value = carve.KVCache.MaxConcurrency
	default:
		return prediction{}, "", skip("measured.what %q is not a vLLM figure", c.Measured.What)
	}
	return p, where, nil
}

// vllmV0 reports whether a vLLM release ran its V0 engine: before 0.8,
// unless VLLM_USE_V1=1 (V1 became the default in 0.8.0).
func vllmV0(version string, s settings) bool {
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	if f, ok, _ := s.num("VLLM_USE_V1"); ok && f == 1 {
		return false
	}
	return major == 0 && minor < 8
}

// vllmV0Defaults are the V0 engine's defaults where the launch leaves
// them: 256 sequences, and without chunked prefill (its default up to
// 32768 tokens of max_model_len) a profile of max(max_model_len, 2048)
// tokens (vllm/config.py SchedulerConfig of the 0.6–0.7 releases). With
// chunked prefill the budget is left at the V1 default, which V0's is not
// known to equal.
func vllmV0Defaults(v vram.VLLM, m vram.Model, s settings) (vram.VLLM, error) {
	if v.MaxNumSeqs == 0 {
		v.MaxNumSeqs = 256
	}
	chunked, err := s.bool("enable_chunked_prefill")
	if err != nil {
		return v, err
	}
	n := v.MaxModelLen
	if n == 0 {
		n = m.MaxPosition
	}
	if v.MaxNumBatchedTokens == 0 && !chunked && n > 0 && n <= 32768 {
		v.MaxNumBatchedTokens = max(n, 2048)
	}
	return v, nil
}

func sglangValue(c Case, m vram.Model, s settings, how string) (prediction, string, error) {
	var sg vram.SGLang
	var err error
	if _, e := vram.ParseVersion("sglang", c.Infer.EngineVersion); e == nil {
		sg.Version = c.Infer.EngineVersion // the release the case ran
	}
	if f, ok, e := s.num("mem_fraction_static"); e != nil {
		return prediction{}, "", e
	} else if ok {
		sg.MemFractionStatic = f
	}
	if sg.TP, err = s.int(1, 1024, "tp_size", "tensor_parallel_size"); err != nil {
		return prediction{}, "", err
	}
	kv, err := s.str("kv_cache_dtype")
	if err != nil {
		return prediction{}, "", err
	}
	if sg.KVCacheDType, err = kvDType(kv); err != nil {
		return prediction{}, "", err
	}
	if dp, err := s.int(1, 1024, "dp_size"); err != nil {
		return prediction{}, "", err
	} else if dp > 1 {
		return prediction{}, "", skip("SGLang data-parallel attention (dp_size %d) is not modelled", dp)
	}
	g, err := caseGPU(c)
	if err != nil {
		return prediction{}, "", err
	}
	in, err := c.servingInference(m)
	if err != nil {
		return prediction{}, "", err
	}
	pool, err := sg.Carve(in, g)
	if err != nil {
		return prediction{}, "", err
	}
	where := strings.TrimSuffix("SGLang pool, "+how, ", ")
	p := prediction{refused: pool.Err}
	switch c.Measured.What {
	case "sglang_kv_tokens":
		p.value = float64(pool.Tokens)
	case "sglang_kv_gib":
		if pool.KSize == 0 {
			return prediction{}, "", skip("an MLA pool logs no K size")
		}
		p.value = pool.KSize.GiB()
	default:
		return prediction{}, "", skip("measured.what %q is not an SGLang figure", c.Measured.What)
	}
	return p, where, nil
}

func llamaCppValue(c Case, m vram.Model, s settings) (prediction, string, error) {
	switch c.Measured.What {
	case "llamacpp_compute_mib":
		return prediction{}, "", skip("llama.cpp's compute buffer is what ggml's graph allocator measures for the graph: not modelled")
	case "llamacpp_model_mib":
		return prediction{}, "", skip("llama.cpp's model buffer is the GGUF file's tensors as quantized: read the file (go run ./examples/plan -gguf)")
	case "llamacpp_kv_mib":
	default:
		return prediction{}, "", skip("measured.what %q is not a llama.cpp figure", c.Measured.What)
	}
	var l vram.LlamaCpp
	var err error
	// The build the case ran, where it names one ("b4462 (c05e8c99)"):
	// a build older than every modelled one resolves to the oldest.
	if b := llamaCppBuild.FindString(c.Infer.EngineVersion); b != "" {
		l.Version = b
	}
	if l.CtxSize, err = s.int(1, 1<<30, "ctx-size", "ctx_size", "n_ctx"); err != nil {
		return prediction{}, "", err
	}
	if l.Parallel, err = s.int(1, 1024, "parallel", "n_parallel"); err != nil {
		return prediction{}, "", err
	}
	if l.UBatch, err = s.int(1, 1<<30, "ubatch-size", "ubatch_size", "n_ubatch"); err != nil {
		return prediction{}, "", err
	}
	if l.GPULayers, err = s.int(-1, 1<<20, "n-gpu-layers", "n_gpu_layers"); err != nil {
		return prediction{}, "", err
	}
	if l.FlashAttn, err = s.bool("flash-attn", "flash_attn"); err != nil {
		return prediction{}, "", err
	}
	if l.CacheTypeK, err = s.str("cache-type-k", "type_k"); err != nil {
		return prediction{}, "", err
	}
	if l.CacheTypeV, err = s.str("cache-type-v", "type_v"); err != nil {
		return prediction{}, "", err
	}
	split, err := s.str("tensor-split", "tensor_split")
	if err != nil {
		return prediction{}, "", err
	}
	for _, f := range strings.FieldsFunc(split, func(r rune) bool { return r == ',' || r == '/' }) {
		var x float64
		if _, err := fmt.Sscanf(f, "%g", &x); err != nil {
			return prediction{}, "", fmt.Errorf("inference.engine_settings.tensor-split %q: want shares such as \"10,6\"", split)
		}
		l.TensorSplit = append(l.TensorSplit, x)
	}
	kv, err := l.KVCache(m)
	if err != nil {
		return prediction{}, "", err
	}
	dev := c.Measured.Device
	if dev < 0 || dev >= len(kv.Devices) {
		return prediction{}, "", fmt.Errorf("measured.device = %d: the split has %d devices", dev, len(kv.Devices))
	}
	where := fmt.Sprintf("llama.cpp KV, device %d: %d layers × %d cells (%s)", dev, kv.Layers[dev], kv.Cells, kv.Release.String())
	return prediction{value: float64(kv.Devices[dev]) / float64(vram.MiB)}, where, nil
}

// llamaCppBuild is a llama.cpp build tag in a case's engine_version.
var llamaCppBuild = regexp.MustCompile(`\bb[0-9]{1,6}\b`)
