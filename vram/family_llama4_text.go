package vram

import "fmt"

// Llama 4, the text model (transformers/models/llama4/modeling_llama4.py;
// llama4 configs hold it under text_config, beside the vision tower: family
// llama4 composes the two): chunked local attention (attention_chunk_size)
// on three layers in four, with the rotary embedding applied as a complex
// product in q's dtype and, with use_qk_norm, a weightless L2 norm after
// it; the fourth layers attend globally without the rotary embedding, with
// an fp32 temperature on q. Every interleave_moe_layer_step-th block is a
// mixture of experts in which every expert runs on every token (batched
// matmuls over stacked weights, each token's output scaled by its sigmoid
// router score, zero off its top k) plus a shared expert; the other blocks
// have a dense MLP of intermediate_size_mlp.
func init() {
	register(&family{
		name: llama4TextModelType, source: "transformers/models/llama4/modeling_llama4.py",
		defaults:  Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "topk_sigmoid"},
		attention: []string{"eager", "sdpa"}, // _supports_flash_attn = False
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers = c.optInt("num_hidden_layers", 48)
			m.Hidden = c.optInt("hidden_size", 5120)
			m.Heads = c.optInt("num_attention_heads", 40)
			m.KVHeads = c.optInt("num_key_value_heads", 8)
			m.HeadDim = c.optInt("head_dim", 128)
			m.Vocab = c.optInt("vocab_size", 202048)
			m.MaxPosition = c.optInt("max_position_embeddings", 4096*32)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			m.FFN = c.optInt("intermediate_size_mlp", 16384)
			m.ExpertFFN = c.optInt("intermediate_size", 8192)
			m.Experts = c.optInt("num_local_experts", 16)
			m.ExpertsPerToken = c.optInt("num_experts_per_tok", 1)
			m.SharedExperts = 1
			m.MoEEvery = c.optInt("interleave_moe_layer_step", 1)
			if c.optBool("use_qk_norm", true) {
				m.QKNorm = "l2"
			}
			m.AttentionChunk = c.optInt("attention_chunk_size", 8192)
			m.GlobalEvery = c.optInt("no_rope_layer_interval", 4)
			m.NoRopeGlobal = true
			if l := c.optList("moe_layers"); l != nil && c.err == nil {
				for i, v := range l {
					if f, ok := v.(float64); !ok || int(f) != m.MoEEvery*(i+1)-1 {
						c.fail(fmt.Sprintf("moe_layers[%d] = %v: MoE layers other than every interleave_moe_layer_step-th are not modelled", i, v))
						break
					}
				}
			}
			if l := c.optList("no_rope_layers"); len(l) > 0 && c.err == nil {
				for i, v := range l {
					if f, ok := v.(float64); !ok || (f != 0) != ((i+1)%m.GlobalEvery != 0) {
						c.fail(fmt.Sprintf("no_rope_layers[%d] = %v: layers without the rotary embedding other than every no_rope_layer_interval-th are not modelled", i, v))
						break
					}
				}
			}
			c.layerTypes(m)
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["intermediate_size"], c["intermediate_size_mlp"] = m.ExpertFFN, m.FFN
			c["num_local_experts"], c["num_experts_per_tok"] = m.Experts, m.ExpertsPerToken
			c["interleave_moe_layer_step"] = max(1, m.MoEEvery)
			c["use_qk_norm"] = m.QKNorm == "l2"
			c["attention_chunk_size"], c["no_rope_layer_interval"] = m.AttentionChunk, m.GlobalEvery
		},
		check: func(m Model) error {
			switch {
			case m.Experts == 0 || m.SharedExperts != 1 || m.SharedExpertFFN != m.ExpertFFN:
				return fmt.Errorf("model: llama4_text MoE blocks have routed experts and one shared expert as wide as each (experts ≥ 1, shared_experts = 1, shared_expert_ffn = expert_ffn)")
			case m.AttentionChunk == 0 || m.GlobalEvery == 0 || !m.NoRopeGlobal:
				return fmt.Errorf("model: llama4_text interleaves chunked layers with global ones without the rotary embedding (attention_chunk, global_every and no_rope_global)")
			case m.QKNorm != "" && m.QKNorm != "l2":
				return fmt.Errorf("model.qk_norm %q: llama4_text has the weightless L2 norm (\"l2\") or none", m.QKNorm)
			}
			return nil
		},
		// Llama4TextExperts runs every expert on every token; the rotary
		// embedding's type_as(xq) keeps q and k in their dtype; its eager
		// attention keeps the softmax in the scores' dtype ("llama4 doesn't
		// cast attn weights to fp32"); the decoder layer holds
		// attention_states until it returns.
		recipe: func(Model, libVersion) recipe {
			return recipe{denseExperts: true, ropeKeepsDType: true, noRopeTemperature: true, softmaxInDType: true, holdAttnOutput: true}
		},
		tensors: standardDecoder{attn: attnQKVO, mlp: func(m Model, l *tensorList, p string, layer int) {
			p += "feed_forward."
			if !m.IsMoELayer(layer) {
				mlpGated(m, l, p, int64(m.FFN), -1)
				return
			}
			stackedExperts(m, l, p+"experts.", false)
			l.linear(p+"router", "router", int64(m.Hidden), int64(m.Experts), false)
			mlpGated(m, l, p+"shared_expert.", int64(m.SharedExpertFFN), -1)
		}}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		// The text model of each checkpoint (its config.json's text_config);
		// the released image-text models are family llama4's presets.
		presets: map[string]Preset{
			"llama-4-scout-text":        {llama4ScoutText(), hf("meta-llama/Llama-4-Scout-17B-16E")},
			"llama-4-maverick-text":     {llama4MaverickText(), hf("meta-llama/Llama-4-Maverick-17B-128E")},
			"llama-4-maverick-fp8-text": {llama4MaverickFP8Text(), hf("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8")},
		},
	})
}

// llama4ScoutText is Llama 4 Scout's text model (meta-llama/
// Llama-4-Scout-17B-16E config.json text_config).
func llama4ScoutText() Model {
	return Model{Name: "meta-llama/Llama-4-Scout-17B-16E (text)", Family: "llama4_text", Layers: 48, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, FFN: 16384, Vocab: 202048, MaxPosition: 10485760,
		Experts: 16, ExpertsPerToken: 1, ExpertFFN: 8192, SharedExperts: 1, QKNorm: "l2", AttentionChunk: 8192, GlobalEvery: 4, NoRopeGlobal: true}
}

// llama4MaverickText is Llama 4 Maverick's text model (meta-llama/
// Llama-4-Maverick-17B-128E config.json text_config).
func llama4MaverickText() Model {
	return Model{Name: "meta-llama/Llama-4-Maverick-17B-128E (text)", Family: "llama4_text", Layers: 48, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, FFN: 16384, Vocab: 202048, MaxPosition: 1048576,
		Experts: 128, ExpertsPerToken: 1, ExpertFFN: 8192, SharedExperts: 1, MoEEvery: 2, AttentionChunk: 8192, GlobalEvery: 4, NoRopeGlobal: true}
}

// llama4MaverickFP8Text is the FP8 release's text model as Meta's recipe
// makes it: the routed experts in fp8 with one fp32 scale per output row,
// everything else in bf16 (meta-llama/llama-models models/llama4/
// quantization/loader.py: "Quantize only routed experts, not shared"; read
// by transformers' fbgemm_fp8 as Llama4TextExperts with gate_up_proj_scale
// [E, 1, 2F]). Its own config.json was not at hand: a config that says
// otherwise is read as it says.
func llama4MaverickFP8Text() Model {
	m := llama4MaverickText()
	m.Name = "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8 (text)"
	m.Release = &Release{Method: "fbgemm_fp8", Format: Quant{DType: FP8E4M3, PerChannel: true}, Scope: "experts", DType: BF16,
		Source: "Meta's FP8 recipe for Llama 4 (routed experts, row-wise scales)"}
	return m
}

// llama4TextModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const llama4TextModelType = "llama4_text"
