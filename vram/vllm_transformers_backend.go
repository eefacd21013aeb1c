package vram

import "fmt"

// vLLM's Transformers backend. From the release each row names, vLLM's
// registry maps these architectures to its Transformers backend
// (_TRANSFORMERS_SUPPORTED_MODELS in model_executor/models/registry.py:
// TransformersForCausalLM, or TransformersMoEForCausalLM for a MoE), having
// dropped (or never had) a native implementation: transformers' own
// modeling code runs with vLLM's attention, KV cache and parallel linear
// layers (model_executor/models/transformers/base.py). The weights and the
// KV cache are the same tensors; the profile run's activations are those
// of transformers' modules, which the carve models as vLLM's native layers
// — each carve of such a family says so. Bisected in each release's
// registry, 0.9.2 to 0.33.0 (0.27.1 not read: 0.27.0 and 0.28.0 agree).
var vllmTransformersBackend = map[string]servedArchitecture{
	smollm3ModelType:      {since: "0.10.1", names: "SmolLM3ForCausalLM", source: "0.10.1 l.276; 0.33.0 l.766 (never native)"},
	gptBigcodeModelType:   {since: "0.25.0", names: "GPTBigCodeForCausalLM", source: "0.25.0 l.643, 0.33.0 l.753; native in 0.24.0"},
	starcoder2ModelType:   {since: "0.25.0", names: "Starcoder2ForCausalLM", source: "0.25.0 l.645, 0.33.0 l.767; native in 0.24.0"},
	olmo2ModelType:        {since: "0.26.0", names: "Olmo2ForCausalLM", source: "0.26.0 l.660, 0.33.0 l.762; native in 0.25.1"},
	hunyuanV1MoeModelType: {since: "0.29.0", names: "HunYuanMoEV1ForCausalLM", source: "0.29.0 l.688 (TransformersMoEForCausalLM), 0.33.0 l.756; native in 0.28.0"},
	olmo3ModelType:        {since: "0.29.0", names: "Olmo3ForCausalLM", source: "0.29.0 l.691, 0.33.0 l.763; native in 0.28.0"},
	gptNeoxModelType:      {since: "0.32.0", names: "GPTNeoXForCausalLM", source: "0.32.0 l.716, 0.33.0 l.754; native in 0.31.0"},
	phiModelType:          {since: "0.32.0", names: "PhiForCausalLM", source: "0.32.0 l.725, 0.33.0 l.764; native in 0.31.0"},
	seedOssModelType:      {since: "0.32.0", names: "SeedOssForCausalLM", source: "0.32.0 l.726, 0.33.0 l.765; native in 0.31.0"},
}

// transformersBackendNote says when the release (asked; empty: the row's)
// serves m through its Transformers backend, and what that leaves
// unmodelled; "" otherwise.
func (v VLLM) transformersBackendNote(m Model, rel vllmRelease) string {
	a, ok := vllmTransformersBackend[servedFamily(m)]
	if !ok {
		return ""
	}
	asked := orDefault(v.Version, rel.Version)
	if s, err := a.support("vllm", asked); err != nil || s != archRuns {
		return ""
	}
	return fmt.Sprintf("vLLM %s serves %s through its Transformers backend (model_executor/models/registry.py _TRANSFORMERS_SUPPORTED_MODELS, %s): transformers' modeling code with vLLM's attention and linear layers; the weights and the KV cache are the same tensors, and the profile run's activations are modelled as vLLM's native layers, which that backend does not run", asked, a.names, a.source)
}
