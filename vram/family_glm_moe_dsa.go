package vram

import "fmt"

// GLM-5 (transformers 5.23 models/glm_moe_dsa/modeling_glm_moe_dsa.py;
// configuration_glm_moe_dsa.py): DeepSeek-V3.2's architecture (dsa.go:
// latent attention with a lightning indexer, fused experts, a sigmoid
// router, shared experts as one MLP, dense first layers) under GLM's
// defaults; its indexer rotates its keys interleaved, which changes no
// tensor. Its config may let a layer reuse the previous layer's top-k
// instead of running an indexer of its own (indexer_types "shared",
// modeling l.346-348); that is refused, every layer's own indexer
// ("full", what the defaults give) is modelled. The checkpoint's
// multi-token-prediction layer is stored, not built
// (_keys_to_ignore_on_load_unexpected = [r"model\.layers\.78.*"], l.637).
// A key config.json leaves out takes the class's default
// (configuration_glm_moe_dsa.py:92-133).
func init() {
	register(&family{
		name: glmMoeDsaModelType, source: "transformers/models/glm_moe_dsa/modeling_glm_moe_dsa.py (transformers 5.23.0)",
		defaults:        Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "sigmoid_topk_norm"},
		latentAttention: true,
		indexer:         true,
		servingOnly:     "its modeling code is transformers 5's (grouped_mm experts, MLA's compressed cache, the indexer's top-k mask and key cache), which the training rules do not follow yet",
		only5:           true,
		// DeepSeek-V3.2's step (dsaRecipe) with GLM's interleaved indexer
		// rotation (modeling l.221) and the top-k each layer returns to the
		// model's loop (l.615, 710-719).
		recipe: func(m Model, lib libVersion) recipe {
			r := dsaRecipe(m, lib)
			r.indexerInterleaved, r.topKReturned = true, true
			return r
		},
		fromConfig: func(c *hfReader, m *Model) {
			readDSAConfig(c, m, glmMoeDsaDefaults)
			glmDSAIndexers(c, m.Layers)
		},
		toConfig: func(m Model, c map[string]any) {
			writeDSAConfig(m, c)
			full := make([]string, m.Layers)
			for i := range full {
				full[i] = "full"
			}
			c["indexer_types"] = full
		},
		check:      func(m Model) error { return checkDSA("glm_moe_dsa", m) },
		tensors:    standardDecoder{attn: dsaAttention, mlp: dsaMLP}.tensors,
		buffers:    dsaBuffers,
		storedOnly: dsaMTP,
		// GLM-5 (the class's docstring checkpoint): the class's defaults
		// with the checkpoint's one multi-token-prediction layer
		// (layers.78, the ignored key) — 743,911,199,232 parameters as
		// transformers 5.23 builds it on the meta device — released in
		// bf16 (GLM's fp8 release is a repository of its own).
		presets: map[string]Preset{
			"glm-5": {dsaPreset(glmMoeDsaDefaults, "zai-org/GLM-5", 1, nil), hf("zai-org/GLM-5")},
		},
	})
}

// glmMoeDsaDefaults are GlmMoeDsaConfig's defaults
// (configuration_glm_moe_dsa.py:92-133): 78 layers of 64 heads, an indexer
// of 32 heads of 128.
var glmMoeDsaDefaults = Model{Layers: 78, Hidden: 6144, Heads: 64, KVHeads: 64, FFN: 12288, Vocab: 154880, MaxPosition: 202752,
	Experts: 256, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 2048, DenseLayers: 3,
	QLoRARank: 2048, KVLoRARank: 512, QKNopeDim: 192, QKRopeDim: 64, VHeadDim: 256, HeadDim: 256,
	IndexHeads: 32, IndexHeadDim: 128}

// glmDSAIndexers reads which layers run an indexer as __post_init__ does
// (configuration_glm_moe_dsa.py:136-148): indexer_types, else
// index_topk_pattern ("F" full, "S" shared, or a list), else layer i runs
// one iff max(i − index_skip_topk_offset + 1, 0) is a multiple of
// index_topk_freq (default 1: every layer; offset 2). A shared layer is
// refused, naming it.
func glmDSAIndexers(c *hfReader, layers int) {
	var types []string
	switch raw, pattern := c.optList("indexer_types"), c.c["index_topk_pattern"]; {
	case raw != nil:
		types = glmIndexerList(c, "indexer_types", raw)
	case pattern != nil:
		if s, ok := pattern.(string); ok {
			for i, r := range s {
				types = append(types, map[rune]string{'F': "full", 'S': "shared"}[r])
				if types[len(types)-1] == "" {
					c.fail(fmt.Sprintf("index_topk_pattern[%d] = %q: want F (full) or S (shared)", i, r))
					return
				}
			}
		} else {
			types = glmIndexerList(c, "index_topk_pattern", c.optList("index_topk_pattern"))
		}
	default:
		freq, offset := max(c.optInt("index_topk_freq", 1), 1), c.optInt("index_skip_topk_offset", 2)
		for i := range layers {
			types = append(types, map[bool]string{true: "full", false: "shared"}[max(i-offset+1, 0)%freq == 0])
		}
	}
	if c.err != nil {
		return
	}
	if len(types) < layers {
		c.fail(fmt.Sprintf("indexer_types lists %d layers for num_hidden_layers = %d", len(types), layers))
		return
	}
	for i, t := range types[:layers] {
		if t != "full" {
			c.fail(fmt.Sprintf("indexer_types[%d] = %q: a layer that reuses the previous layer's top-k has no indexer of its own, which is not modelled (every layer \"full\" is)", i, t))
			return
		}
	}
}

// glmIndexerList reads a list of "full" and "shared".
func glmIndexerList(c *hfReader, key string, raw []any) []string {
	out := make([]string, len(raw))
	for i, v := range raw {
		s, _ := v.(string)
		if s != "full" && s != "shared" {
			c.fail(fmt.Sprintf("%s[%d]: want \"full\" or \"shared\"", key, i))
			return nil
		}
		out[i] = s
	}
	return out
}

// glmMoeDsaModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const glmMoeDsaModelType = "glm_moe_dsa"
