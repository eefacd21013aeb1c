package vram

import "fmt"

// What the serving engines do with a released checkpoint's quantized
// weights on a given GPU, shared by the vLLM and SGLang carves.

// engineMinCapability is the compute capability a serving engine needs
// for a quantization method: each method's get_min_capability in vLLM
// 0.11 (vllm/model_executor/layers/quantization/*.py) and SGLang 0.5.3,
// which both refuse a GPU below it. ModelOpt's differs by engine, release
// and algorithm: the release rows' modeloptCC (vllm_releases.go,
// sglang_releases.go).
var engineMinCapability = map[string]int{"mxfp4": 80, "fp8": 80, "fbgemm_fp8": 80, "compressed-tensors": 70, "gptq": 60, "awq": 75, "bitsandbytes": 70}

// engineRefuses is the engine's refusal to run the release's quantization
// on g, in its words (vllm/config/__init__.py; sglang model_loader
// loader.py: the same ValueError), or "".
// modelopt is the engine release's ModelOpt minimum, FP8 and NVFP4 (0: the
// release has no such method).
func (in Inference) engineRefuses(m Model, g GPU, modelopt [2]int) string {
	r := m.Release
	if !in.asRelease || !r.Quantized() || g.ComputeCapability == 0 {
		return ""
	}
	min := engineMinCapability[r.Method]
	if r.Method == "modelopt" {
		min = modelopt[1]
		if r.Format.DType == FP8E4M3 {
			min = modelopt[0]
		}
		if min == 0 {
			return fmt.Sprintf("ValueError: the engine release has no ModelOpt %s method (its quantization/modelopt_quant.py reads FP8 checkpoints only)", r.Format.DType)
		}
	}
	if g.ComputeCapability < min {
		return fmt.Sprintf("ValueError: The quantization method %s is not supported for the current GPU. Minimum capability: %d. Current capability: %d.", r.Method, min, g.ComputeCapability)
	}
	return ""
}

// engineNotes say how the engine keeps the release's quantized weights.
func (in Inference) engineNotes(m Model, engine string) []string {
	r := m.Release
	if !in.asRelease || !r.Quantized() {
		return nil
	}
	switch {
	case r.Format.DType == MXFP4 && engine == "vLLM":
		pi, ph := vllmMXFP4Pads(in.mxfp4)
		s := fmt.Sprintf("vLLM keeps the MXFP4 experts in 4 bits (its %s backend), their width padded to a multiple of %d", in.mxfp4, pi)
		if ph > 1 {
			s += fmt.Sprintf(" and the hidden size to %d", ph)
		}
		if in.mxfp4 == "marlin" && in.cc >= 90 && in.cc < 100 {
			s += "; on Hopper it takes the Triton backend instead when the triton_kernels package is installed (mxfp4_backend \"triton\"), which pads less"
		}
		return []string{s}
	case r.Format.Block > 0 && engine == "vLLM" && in.cc > 0 && in.cc < 89:
		return []string{"vLLM keeps the fp8 weights through Marlin (weight-only fp8 on a GPU without fp8 units), their block scales expanded to bf16 per 128 input features"}
	case r.Format.DType == MXFP4 && engine == "SGLang":
		return []string{"SGLang keeps the MXFP4 experts with its triton_kernel MoE backend (one expert-parallel rank); other backends upcast them to bf16"}
	}
	return nil
}

// The engines' shares as breakdowns, for charts and reports: the weights
// are parameters, the room kept for activations (the profile or warm-up
// run's peak, or what the fraction leaves) temporaries, the cache or pool
// the KV cache, memory outside PyTorch (the CUDA context, CUDA graphs) other.
// Each totals what nvidia-smi shows once the engine has started.

// Breakdown is vLLM's share of the GPU by what holds it.
func (c VLLMCarve) Breakdown() Breakdown {
	held := addBytes(addBytes(c.Weights, c.Activation), c.KVCache.Available)
	return Breakdown{Parameters: c.Weights, Temporaries: c.Activation, KVCache: c.KVCache.Available, Other: max(0, c.DeviceUsed-held)}
}

// Breakdown is SGLang's share of the GPU by what holds it.
func (p SGLangKVPool) Breakdown(g GPU) Breakdown {
	return Breakdown{Parameters: p.Weights, KVCache: max(0, p.DeviceUsed-p.Weights-g.Context), Other: g.Context}
}

// Breakdown is TGI's share of the GPU by what holds it.
func (c TGICarve) Breakdown(g GPU) Breakdown {
	kv := mulI64(c.Blocks, int64(c.BlockBytes))
	return Breakdown{Parameters: c.Weights, Temporaries: max(0, c.DeviceUsed-c.Weights-Bytes(kv)-g.Context), KVCache: Bytes(kv), Other: g.Context}
}
