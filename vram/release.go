package vram

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/vramlab/vramlab/vram/internal/strictjson"
)

// Release is how a checkpoint stores its weights as it is released, the
// way config.json's quantization_config says: gpt-oss keeps its routed
// experts in MXFP4 and the rest in bf16, DeepSeek-V3 and Kimi-K2 their
// linear layers in fp8 with 128×128 block scales. A preset carries the
// release people download; FromHFConfig reads it from the config; a
// checkpoint folder's headers confirm it tensor by tensor. Inference loads
// the weights as released unless the plan names a format (what each
// runtime keeps of them is said in Inference's notes).
type Release struct {
	// Method is quantization_config.quant_method: "mxfp4", "fp8",
	// "fbgemm_fp8", "compressed-tensors", "modelopt", "gptq", "awq",
	// "bitsandbytes";
	// empty for an unquantized release.
	Method string `json:"method,omitempty"`
	// Format is what the method stores the weights it converts as.
	Format Quant `json:"format"`
	// Scope is which weights the method converts: "linear" (every linear
	// layer and stacked expert tensor not skipped; the default), "experts"
	// (the routed experts only: transformers' mxfp4 replaces GptOssExperts
	// alone, integrations/mxfp4.py _replace_with_mxfp4_linear), "blocks"
	// (the linear layers of the transformer blocks: GPTQ's
	// block_name_to_quantize).
	Scope string `json:"scope,omitempty"`
	// Head: the output layer is converted too (GPTQ's lm_head: true, a
	// compressed-tensors config that does not ignore it); every method
	// leaves it alone by default.
	Head bool `json:"head,omitempty"`
	// Skip lists the module patterns the method leaves alone, one a line,
	// as the config names them (modules_to_not_convert, ignore,
	// llm_int8_skip_modules), matched as the method matches them.
	Skip string `json:"skip,omitempty"`
	// DType is what the other tensors are stored in (torch_dtype).
	DType DType `json:"dtype,omitempty"`
	// Source says where the release was read from.
	Source string `json:"source,omitempty"`
}

// Quantized reports whether the release stores some weights quantized.
func (r *Release) Quantized() bool { return r != nil && r.Method != "" && r.Format.DType != DTypeUnset }

// dtype is the dtype of the tensors the method does not convert.
func (r *Release) dtype() DType {
	if r == nil || r.DType == DTypeUnset {
		return BF16
	}
	return r.DType
}

// converts reports whether the release stores t in its quantized format:
// a linear weight or a stacked expert tensor in the method's scope, not an
// output layer (unless Head), not a router (no release quantizes one: a
// router is no nn.Linear in DeepSeek's code and is skipped by name in
// gpt-oss's and Qwen3's), and not matched by Skip.
func (r *Release) converts(t Tensor) bool {
	if !r.Quantized() || t.Role == "router" || t.Role == "bias" {
		return false
	}
	if !t.IsLinear() && t.Stacked == 0 {
		return false
	}
	switch {
	case t.Role == "lm_head" && !r.Head,
		r.Scope == "experts" && t.Expert < 0 && t.Stacked == 0,
		r.Scope == "blocks" && t.Layer < 0:
		return false
	}
	return !r.skips(moduleOf(t.Name))
}

// moduleOf is the module a parameter belongs to: its name without the
// last component ("model.layers.0.mlp.experts" for …experts.gate_up_proj).
func moduleOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		return name[:i]
	}
	return name
}

// skips reports whether one of the release's patterns names module, as
// its method matches them: mxfp4 as regular expressions matched at the
// start (integrations/mxfp4.py should_convert_module: re.match), fbgemm
// by a name or a prefix ending at a dot (integrations/fbgemm_fp8.py),
// compressed-tensors by a "re:" expression or an exact name
// (compressed_tensors.utils.match), the others by substring
// (integrations/finegrained_fp8.py, bitsandbytes.py: key in name).
func (r *Release) skips(module string) bool {
	for _, p := range strings.Split(r.Skip, "\n") {
		if p == "" {
			continue
		}
		switch {
		case r.Method == "mxfp4":
			if re, err := regexp.Compile("^(?:" + p + ")"); err == nil && re.MatchString(module) {
				return true
			}
		case r.Method == "compressed-tensors" && strings.HasPrefix(p, "re:"):
			if re, err := regexp.Compile("^(?:" + p[3:] + ")"); err == nil && re.MatchString(module) {
				return true
			}
		case r.Method == "compressed-tensors":
			if module == p || strings.HasSuffix(module, "."+p) {
				return true
			}
		case r.Method == "modelopt":
			// ModelOpt's exclude_modules are shell wildcards
			// (is_layer_skipped: fnmatch, modelopt.py l.7, 223 in vLLM
			// 0.33.0); a module name has no "/", so path.Match's * is
			// fnmatch's.
			if ok, err := path.Match(p, module); err == nil && ok || module == p {
				return true
			}
		case r.Method == "fbgemm_fp8":
			if module == p || strings.Contains(module+".", p+".") {
				return true
			}
		default:
			if strings.Contains(module, p) {
				return true
			}
		}
	}
	return false
}

// storedBytes is what the release stores for t: its quantized parts when
// the method converts it (a stacked expert tensor per expert matrix, its
// input features along the stacked tensor's second dimension), else t in
// the release's dtype.
func (r *Release) storedBytes(t Tensor) Bytes {
	if t.DType != DTypeUnset && !r.converts(t) {
		return t.DType.Size(t.Numel()) // a tensor stored in a dtype of its own
	}
	if !r.converts(t) {
		return r.dtype().Size(t.Numel())
	}
	rows, cols, n := t.matrix()
	return mulBytes(n, r.Format.Size(rows, cols))
}

// matrix is t as n matrices of rows (output features) × cols (input
// features): a linear weight [out, in] is one; a stacked expert tensor
// [experts, in, out] (transformers' Llama 4 and gpt-oss layout) is one per
// expert.
func (t Tensor) matrix() (rows, cols, n int64) {
	switch {
	case t.Stacked > 0 && len(t.Shape) == 3 && t.OutIn:
		return t.Shape[1], t.Shape[2], t.Shape[0]
	case t.Stacked > 0 && len(t.Shape) == 3:
		return t.Shape[2], t.Shape[1], t.Shape[0]
	case len(t.Shape) == 2:
		return t.Shape[0], t.Shape[1], 1
	}
	return 1, t.Numel(), 1
}

// describe says in a few words how the release stores the weights.
func (r *Release) describe() string {
	if !r.Quantized() {
		return r.dtype().String()
	}
	what := map[string]string{"experts": "routed experts", "blocks": "block linear layers"}[r.Scope]
	if what == "" {
		what = "linear layers"
	}
	return fmt.Sprintf("%s in %s, %s elsewhere", what, r.Format, r.dtype())
}

// StoredBytes is what the model's checkpoint stores as released: every
// tensor in its released format (Release; bf16 without one), with what the
// checkpoint holds that the model does not load as parameters (DeepSeek-V3's
// multi-token-prediction layer, MTPLayers, and its routers' fp32 bias
// buffers). It is what the checkpoint's
// model.safetensors.index.json calls total_size.
func (m Model) StoredBytes() Bytes {
	m = m.Normalize()
	var b Bytes
	for _, t := range m.tensors() {
		b = addBytes(b, m.Release.storedBytes(t))
	}
	for _, t := range m.storedOnly() {
		b = addBytes(b, m.Release.storedBytes(t))
	}
	return b
}

// storedOnly lists the tensors a checkpoint stores that the model does not
// load (the family's storedOnly).
func (m Model) storedOnly() []Tensor {
	f := lookupFamily(m.Family)
	if f == nil || f.storedOnly == nil {
		return nil
	}
	var l tensorList
	f.storedOnly(m, &l)
	return l.ts
}

// releaseMethods are the quant_methods a config.json may name.
var releaseMethods = []string{"mxfp4", "fp8", "fbgemm_fp8", "compressed-tensors", "modelopt", "gptq", "awq", "bitsandbytes"}

// release reads config.json's quantization_config (with torch_dtype: the
// dtype of the rest) the way transformers' quantizers read it
// (utils/quantization_config.py, one config class per quant_method);
// without one, torch_dtype alone. Nil when the config says neither.
func (r *hfReader) release() *Release {
	d := DTypeUnset
	for _, key := range []string{"torch_dtype", "dtype"} {
		if s := r.optString(key, ""); s != "" && s != "auto" {
			if v, err := ParseDType(strings.TrimPrefix(s, "torch.")); err == nil {
				d = v
			}
		}
	}
	raw, ok := r.c["quantization_config"]
	if !ok || raw == nil {
		if d == DTypeUnset {
			return nil
		}
		return &Release{DType: d, Source: "config.json torch_dtype"}
	}
	qc, ok := raw.(map[string]any)
	if !ok {
		r.fail(fmt.Sprintf("%q must be an object, got %s", "quantization_config", strictjson.Kind(raw)))
		return nil
	}
	q := hfReader{c: qc}
	rel := &Release{Method: q.optString("quant_method", ""), DType: d, Source: "config.json quantization_config"}
	if rel.DType == DTypeUnset {
		rel.DType = BF16
	}
	var err error
	switch rel.Method {
	case "mxfp4":
		rel.Format, rel.Scope, rel.Skip = Quant{DType: MXFP4}, "experts", q.patterns("modules_to_not_convert")
	case "fp8":
		rel.Format, err = q.blockFP8()
		rel.Skip = q.patterns("modules_to_not_convert")
	case "fbgemm_fp8":
		rel.Format, rel.Skip = Quant{DType: FP8E4M3, PerChannel: true}, q.patterns("modules_to_not_convert")
	case "gptq", "awq":
		rel.Format, rel.Scope, rel.Head, err = q.int4(rel.Method)
		rel.Skip = q.patterns("modules_to_not_convert")
	case "bitsandbytes":
		rel.Format, err = q.bitsandbytes()
		rel.Skip = q.patterns("llm_int8_skip_modules")
	case "compressed-tensors":
		rel.Format, err = q.compressedTensors()
		rel.Skip = q.patterns("ignore")
		rel.Head = !rel.skips("lm_head")
	case "modelopt":
		rel.Format, err = q.modelopt()
		rel.Skip = q.patterns("ignore")
		if rel.Skip == "" {
			rel.Skip = q.patterns("exclude_modules")
		}
	case "":
		err = fmt.Errorf("no quant_method")
	default:
		err = fmt.Errorf("quant_method %q is not modelled; modelled: %s", rel.Method, strings.Join(releaseMethods, ", "))
	}
	if err == nil {
		err = q.err
	}
	if err != nil {
		r.fail("quantization_config: " + err.Error())
		return nil
	}
	return rel
}

// modelopt reads NVIDIA ModelOpt's quantization config as vLLM does
// (ModelOptQuantConfigBase.from_config, model_executor/layers/quantization/
// modelopt.py:324-400 in 0.33.0): config.json's quantization_config
// {"quant_method": "modelopt", "quant_algo": …, "group_size": …,
// "ignore"/"exclude_modules": […]}, or the legacy hf_quant_config.json's
// "quantization" object, which a checkpoint folder's reader folds into it.
// NVFP4 (e2m1 in groups of 16 with fp8 scales) and FP8 (per-tensor) are
// modelled; lm_head is left alone (vLLM's ParallelLMHead is no LinearBase
// the method quantizes).
func (r *hfReader) modelopt() (Quant, error) {
	switch algo := strings.ToUpper(r.optString("quant_algo", "")); algo {
	case "NVFP4":
		return Quant{DType: NVFP4, GroupSize: r.optInt("group_size", 16)}, nil
	case "FP8":
		return Quant{DType: FP8E4M3}, nil
	case "":
		return Quant{}, fmt.Errorf("quant_algo is missing (vLLM: Missing 'quant_algo' in quantization config)")
	default:
		return Quant{}, fmt.Errorf("quant_algo %q: NVFP4 and FP8 are modelled", algo)
	}
}

// patterns reads a list of module patterns into Release.Skip's form.
func (r *hfReader) patterns(key string) string {
	var out []string
	for i, v := range r.optList(key) {
		s, ok := v.(string)
		if !ok {
			r.fail(fmt.Sprintf("%s[%d] must be a module name, got %s", key, i, strictjson.Kind(v)))
			return ""
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}

// blockFP8 reads FineGrainedFP8Config: fmt e4m3 (or e5m2; released
// configs also spell them as torch does, "float8_e4m3fn" in MiniMax-M2's
// — transformers itself does not read the key and loads e4m3), and
// weight_block_size, the tile that shares one scale ([128, 128]).
func (r *hfReader) blockFP8() (Quant, error) {
	q := Quant{DType: FP8E4M3}
	switch f := r.optString("fmt", "e4m3"); f {
	case "e4m3", "float8_e4m3fn", "float8_e4m3":
	case "e5m2", "float8_e5m2":
		q.DType = FP8E5M2
	default:
		return q, fmt.Errorf("fmt %q: want e4m3 or e5m2 (or torch's float8_e4m3fn, float8_e5m2)", f)
	}
	bs := r.optList("weight_block_size")
	if bs == nil {
		return q, nil // per-tensor scales
	}
	if len(bs) != 2 || bs[0] != bs[1] {
		return q, fmt.Errorf("weight_block_size %v: square blocks ([n, n]) are modelled", bs)
	}
	n, ok := bs[0].(float64)
	if !ok || n < 1 || n > 1<<16 || n != float64(int(n)) {
		return q, fmt.Errorf("weight_block_size %v: want two equal integers in [1, 65536]", bs)
	}
	q.Block = int(n)
	return q, nil
}

// int4 reads GPTQConfig and AwqConfig: 4 bits in groups of group_size
// input features (-1: one group), GPTQ's lm_head, and the block linear
// layers both quantize (AutoGPTQ's and AutoAWQ's quantizers walk the
// decoder layers).
func (r *hfReader) int4(method string) (Quant, string, bool, error) {
	bits := r.optInt("bits", r.optInt("w_bit", 4))
	if bits != 4 {
		return Quant{}, "", false, fmt.Errorf("bits %d: 4-bit %s is modelled", bits, method)
	}
	q := Quant{DType: INT4, GroupSize: r.optInt("group_size", r.optInt("q_group_size", 128)), ActOrder: r.optBool("desc_act", false)}
	if g, ok := r.c["group_size"].(float64); ok && g == -1 {
		q.GroupSize = 1 << 20 // one group across the input features
	}
	if method == "awq" {
		q.Layout = "awq"
	}
	return q, "blocks", r.optBool("lm_head", false), nil
}

// bitsandbytes reads BitsAndBytesConfig: nf4 or fp4 (with double
// quantization) under load_in_4bit, LLM.int8 under load_in_8bit.
func (r *hfReader) bitsandbytes() (Quant, error) {
	switch {
	case r.optBool("load_in_4bit", false) || r.optBool("_load_in_4bit", false):
		q := Quant{DType: NF4, DoubleQuant: r.optBool("bnb_4bit_use_double_quant", false)}
		switch t := r.optString("bnb_4bit_quant_type", "fp4"); t {
		case "nf4":
		case "fp4":
			q.DType = FP4
		default:
			return q, fmt.Errorf("bnb_4bit_quant_type %q: want nf4 or fp4", t)
		}
		return q, nil
	case r.optBool("load_in_8bit", false) || r.optBool("_load_in_8bit", false):
		return Quant{DType: INT8}, nil
	}
	return Quant{}, fmt.Errorf("neither load_in_4bit nor load_in_8bit is true")
}

// compressedTensors reads a compressed-tensors config: one config group's
// weights (num_bits, type, strategy, group_size, block_structure,
// symmetric; compressed_tensors/quantization/quant_args.py) targeting the
// linear layers.
func (r *hfReader) compressedTensors() (Quant, error) {
	groups, ok := r.c["config_groups"].(map[string]any)
	if !ok || len(groups) != 1 {
		return Quant{}, fmt.Errorf("config_groups: one group of weights is modelled, got %d", len(groups))
	}
	var g map[string]any
	for _, v := range groups {
		g, _ = v.(map[string]any)
	}
	w, ok := g["weights"].(map[string]any)
	if !ok {
		return Quant{}, fmt.Errorf("config_groups: the group has no weights")
	}
	a := hfReader{c: w}
	bits, kind, strategy := a.optInt("num_bits", 8), a.optString("type", "int"), a.optString("strategy", "tensor")
	var q Quant
	switch {
	case bits == 8 && kind == "float":
		q.DType = FP8E4M3
		switch strategy {
		case "tensor":
		case "channel":
			q.PerChannel = true
		case "block":
			bs := a.optList("block_structure")
			if len(bs) != 2 || bs[0] != bs[1] {
				return q, fmt.Errorf("block_structure %v: square blocks are modelled", bs)
			}
			n, _ := bs[0].(float64)
			q.Block = int(n)
		default:
			return q, fmt.Errorf("weights.strategy %q of fp8: tensor, channel and block are modelled", strategy)
		}
	case bits == 4 && kind == "int" && (strategy == "group" || strategy == "channel"):
		q = Quant{DType: INT4, GroupSize: a.optInt("group_size", 1<<20), Layout: "awq"}
		if a.optBool("symmetric", true) {
			q.Layout = "symmetric"
		}
	case bits == 8 && kind == "int":
		q.DType = INT8
	case bits == 4 && kind == "float" && strategy == "tensor_group":
		// nvfp4-pack-quantized: e2m1 in groups of group_size (16) with fp8
		// scales and a global scale (compressed_tensors' NVFP4 preset).
		q = Quant{DType: NVFP4, GroupSize: a.optInt("group_size", 16)}
	default:
		return q, fmt.Errorf("weights of %d-bit %s with strategy %q are not modelled", bits, kind, strategy)
	}
	if a.err != nil {
		return q, a.err
	}
	return q, nil
}

// releasedBytes is what the runtime keeps of t as the model's release
// stores it, on a GPU of compute capability in.cc (0: not known):
//   - transformers keeps MXFP4 experts with its kernels and dequantizes
//     them to bf16 when told to (Dequantize) or on a GPU below 7.5
//     (quantizer_mxfp4.py validate_environment, convert_moe_packed_tensors);
//   - vLLM pads MXFP4 experts to its backend's tiles (mxfp4.py
//     create_weights: Marlin pads the expert width to 128 and the hidden
//     size to 256, FlashInfer on 10.x both to 256, Triton the expert width
//     to 64; VLLM.MXFP4Backend) and keeps block fp8 on
//     GPUs without fp8 units through Marlin with bf16 scales per 128 input
//     features of each output (fp8.py use_marlin; marlin_utils_fp8.py);
//   - the other tensors load in the plan's unquantized dtype.
func (in Inference) releasedBytes(t Tensor) Bytes {
	r := in.Model.Release
	if !r.converts(t) {
		if t.Stacked > 0 && in.runtime == runVLLM && r.Format.DType == MXFP4 {
			return in.UnquantizedDType.Size(vllmPadded(t, in.mxfp4))
		}
		return in.UnquantizedDType.Size(t.Numel())
	}
	rows, cols, n := t.matrix()
	switch {
	case r.Format.DType == MXFP4 && in.runtime == runTransformers && (in.Dequantize || in.cc > 0 && in.cc < 75):
		return BF16.Size(t.Numel())
	case r.Format.DType == MXFP4 && in.runtime == runVLLM:
		pi, ph := vllmMXFP4Pads(in.mxfp4)
		if t.Role == "down_proj" {
			rows, cols = roundUp(rows, ph), roundUp(cols, pi)
		} else {
			rows, cols = roundUp(rows/2, pi)*2, roundUp(cols, ph)
		}
	case r.Format.Block > 0 && in.runtime == runVLLM && in.cc > 0 && in.cc < 89:
		return mulBytes(n, addBytes(Bytes(mulI64(rows, cols)), BF16.Size(mulI64(rows, (cols+127)/128))))
	}
	return mulBytes(n, r.Format.Size(rows, cols))
}

// vllmMXFP4Pads are the multiples vLLM's MXFP4 backend pads an expert's
// width and the hidden size to (mxfp4.py create_weights).
func vllmMXFP4Pads(backend string) (expert, hidden int64) {
	switch backend {
	case "flashinfer":
		return 256, 256
	case "triton":
		return 64, 1
	}
	return 128, 256 // marlin
}

// vllmPadded is a stacked expert bias's elements once vLLM pads its experts.
func vllmPadded(t Tensor, backend string) int64 {
	pi, ph := vllmMXFP4Pads(backend)
	if len(t.Shape) != 2 {
		return t.Numel()
	}
	if strings.Contains(t.Name, "down_proj") {
		return mulI64(t.Shape[0], roundUp(t.Shape[1], ph))
	}
	return mulI64(t.Shape[0], roundUp(t.Shape[1]/2, pi)*2)
}

func roundUp(n, k int64) int64 { return (n + k - 1) / k * k }

// notes say how the plan loads the weights: as released (what the release
// stores, where it was read, and what the runtime does with it), and what
// the checkpoint stores that is not loaded. weights is what they take.
func (in Inference) notes(m Model, weights Bytes) []string {
	var out []string
	if o := in.Model.Origin; o != nil {
		out = append(out, o.Notes...)
	}
	r := m.Release
	if in.asRelease {
		out = append(out, fmt.Sprintf("weights as released: %s (%s), %v", r.describe(), r.Source, weights))
		if in.namedRelease {
			out = append(out, fmt.Sprintf("the plan's weights %s are the release's own format, so they load as released (its scope and skipped modules; as the command line naming the checkpoint does)", r.Format.DType))
		}
		switch {
		case r.Format.DType == MXFP4 && in.runtime == runTransformers && !in.Dequantize && (in.cc == 0 || in.cc >= 75):
			d := in
			d.Dequantize = true
			out = append(out, fmt.Sprintf("transformers keeps the MXFP4 experts with the kernels package and triton ≥ 3.4 on a GPU of compute capability ≥ 7.5; without them (or with Mxfp4Config(dequantize=True), \"dequantize\": true) it dequantizes them to bf16 and the weights take %v", d.weightBytes(m)))
		case r.Format.DType == MXFP4 && in.runtime == runTransformers:
			out = append(out, "transformers dequantizes the MXFP4 experts to bf16 (dequantize, or a GPU below compute capability 7.5)")
		case r.Format.DType == FP8E4M3 && in.runtime == runTransformers:
			out = append(out, "transformers runs fp8 weights on GPUs of compute capability ≥ 8.9 only (quantizer_finegrained_fp8.py, quantizer_fbgemm_fp8.py); load them with dtype=\"auto\" or bf16, since without a dtype it keeps the other tensors in float32")
		}
	}
	if s := in.audioNote(m); s != "" {
		out = append(out, s) // audio.go
	}
	if s := in.speechNote(m); s != "" {
		out = append(out, s) // speech.go
	}
	if s := m.storedOnly(); len(s) > 0 && m.MTPLayers > 0 {
		var b Bytes
		for _, t := range s {
			b = addBytes(b, r.storedBytes(t))
		}
		out = append(out, fmt.Sprintf("the checkpoint also stores %d multi-token-prediction layer(s) and the routers' bias buffers (%v), which transformers and vLLM's main model do not load", m.MTPLayers, b))
	}
	return out
}
