package vram

import (
	"encoding/json"
	"fmt"
	"strings"
)

// FromHFConfig reads a Hugging Face config.json (the keys that
// transformers' configuration_<family>.py defines) into a Model. An
// unsupported model_type, or a missing shape key, is an error that names it.
func FromHFConfig(data []byte) (Model, error) {
	var c map[string]any
	if err := json.Unmarshal(data, &c); err != nil {
		return Model{}, fmt.Errorf("config.json: %v", err)
	}
	mt, _ := c["model_type"].(string)
	if mt == "" {
		return Model{}, fmt.Errorf("config.json: no \"model_type\"; supported: %s", strings.Join(Families(), ", "))
	}
	r := hfReader{c: c}
	m := Model{Family: mt}
	if n, ok := c["_name_or_path"].(string); ok {
		m.Name = n
	}
	switch mt {
	case "gpt2", "gpt_bigcode":
		m.Layers, m.Hidden, m.Heads = r.int("n_layer"), r.int("n_embd"), r.int("n_head")
		m.FFN = r.optInt("n_inner", 4*m.Hidden)
		m.Vocab, m.MaxPosition = r.int("vocab_size"), r.int("n_positions")
		m.TiedEmbeddings = r.optBool("tie_word_embeddings", true)
		if mt == "gpt_bigcode" && r.optBool("multi_query", true) {
			m.KVHeads = 1
		}
	case "gpt_neox":
		r.common(&m)
		m.RotaryPct = r.optFloat("rotary_pct", 0.25)
		m.ParallelBlock = r.optBool("use_parallel_residual", true)
		m.TiedEmbeddings = r.optBool("tie_word_embeddings", false)
		if !r.optBool("attention_bias", true) {
			m.Bias = BiasNone
		}
	case "gptj":
		m.Layers, m.Hidden, m.Heads = r.int("n_layer"), r.int("n_embd"), r.int("n_head")
		m.FFN = r.optInt("n_inner", 4*m.Hidden)
		m.Vocab, m.MaxPosition = r.int("vocab_size"), r.optInt("n_positions", 2048)
		if m.Heads > 0 && m.Hidden > 0 {
			m.RotaryPct = float64(r.optInt("rotary_dim", m.Hidden/m.Heads)) / float64(m.Hidden/m.Heads)
		}
		m.TiedEmbeddings = r.optBool("tie_word_embeddings", false)
	case "opt":
		m.Layers, m.Hidden, m.Heads = r.int("num_hidden_layers"), r.int("hidden_size"), r.int("num_attention_heads")
		m.FFN, m.Vocab, m.MaxPosition = r.int("ffn_dim"), r.int("vocab_size"), r.int("max_position_embeddings")
		m.WordEmbedProjDim = r.optInt("word_embed_proj_dim", m.Hidden)
		if !r.optBool("do_layer_norm_before", true) {
			m.NormPosition = "post"
		}
		m.TiedEmbeddings = r.optBool("tie_word_embeddings", true)
		if !r.optBool("enable_bias", true) {
			m.Bias = BiasNone
		}
	case "bert", "vit":
		r.common(&m)
		if mt == "bert" {
			m.TypeVocab = r.optInt("type_vocab_size", 2)
			m.Pooler = true // BertModel default add_pooling_layer=True
		} else {
			m.Image = &Image{Size: r.int("image_size"), Patch: r.int("patch_size"), Channels: r.optInt("num_channels", 3), ClassToken: true}
			m.Pooler = true
			m.Vocab = 0
		}
	case "phi":
		r.common(&m)
		m.RotaryPct = r.optFloat("partial_rotary_factor", 0.5)
		m.TiedEmbeddings = r.optBool("tie_word_embeddings", false)
	case "llama", "mistral", "mixtral", "qwen2", "gemma", "phi3", "deepseek_v3":
		r.common(&m)
		m.TiedEmbeddings = r.optBool("tie_word_embeddings", mt == "gemma")
		if r.optBool("attention_bias", false) {
			m.Bias = BiasQKVOnly
			if mt == "llama" {
				m.Bias = BiasAll
			}
		}
		if r.optBool("mlp_bias", false) {
			m.Bias = BiasAll
		}
		if w := r.optInt("sliding_window", 0); w > 0 && (mt == "mistral" || mt == "mixtral" || (mt == "qwen2" && r.optBool("use_sliding_window", false))) {
			m.SlidingWindow = w
		}
		switch mt {
		case "mixtral":
			m.Experts, m.ExpertsPerToken = r.int("num_local_experts"), r.int("num_experts_per_tok")
		case "deepseek_v3":
			m.Experts, m.ExpertsPerToken = r.int("n_routed_experts"), r.int("num_experts_per_tok")
			m.SharedExperts, m.ExpertFFN = r.optInt("n_shared_experts", 0), r.int("moe_intermediate_size")
			m.DenseLayers = r.optInt("first_k_dense_replace", 0)
			m.QLoRARank, m.KVLoRARank = r.optInt("q_lora_rank", 0), r.int("kv_lora_rank")
			m.QKNopeDim, m.QKRopeDim, m.VHeadDim = r.int("qk_nope_head_dim"), r.int("qk_rope_head_dim"), r.int("v_head_dim")
			m.HeadDim = m.QKNopeDim + m.QKRopeDim
		}
	default:
		return Model{}, fmt.Errorf("config.json: model_type %q is not supported; supported: %s", mt, strings.Join(Families(), ", "))
	}
	if r.err != nil {
		return Model{}, fmt.Errorf("config.json (model_type %q): %v", mt, r.err)
	}
	if err := m.Validate(); err != nil {
		return Model{}, fmt.Errorf("config.json: %v", err)
	}
	return m, nil
}

// hfReader reads keys from a decoded config, keeping the first error.
type hfReader struct {
	c   map[string]any
	err error
}

// common reads the keys most configurations share (LlamaConfig names).
func (r *hfReader) common(m *Model) {
	m.Layers = r.int("num_hidden_layers")
	m.Hidden = r.int("hidden_size")
	m.Heads = r.int("num_attention_heads")
	m.KVHeads = r.optInt("num_key_value_heads", m.Heads)
	m.FFN = r.int("intermediate_size")
	if m.Family != "vit" {
		m.Vocab = r.int("vocab_size")
	}
	m.MaxPosition = r.optInt("max_position_embeddings", 0)
	m.HeadDim = r.optInt("head_dim", 0)
}

func (r *hfReader) int(key string) int {
	v, ok := r.c[key]
	if !ok || v == nil {
		if r.err == nil {
			r.err = fmt.Errorf("missing %q", key)
		}
		return 0
	}
	f, ok := v.(float64)
	if !ok || f != float64(int(f)) || f < 0 || f > 1<<31 {
		if r.err == nil {
			r.err = fmt.Errorf("%q must be a non-negative integer, got %v", key, v)
		}
		return 0
	}
	return int(f)
}

func (r *hfReader) optInt(key string, def int) int {
	if v, ok := r.c[key]; !ok || v == nil {
		return def
	}
	return r.int(key)
}

func (r *hfReader) optFloat(key string, def float64) float64 {
	v, ok := r.c[key].(float64)
	if !ok {
		return def
	}
	return v
}

func (r *hfReader) optBool(key string, def bool) bool {
	v, ok := r.c[key].(bool)
	if !ok {
		return def
	}
	return v
}

// HFConfig is the inverse of FromHFConfig: the config.json keys that make
// transformers build this architecture (used by the PyTorch companion tool,
// examples/measure, to build the same model on the meta device).
func (m Model) HFConfig() map[string]any {
	m = m.Normalize()
	c := map[string]any{"model_type": m.Family}
	if m.Name != "" {
		c["_name_or_path"] = m.Name
	}
	llama := func() {
		c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"] = m.Layers, m.Hidden, m.Heads
		c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"] = m.KVHeads, m.FFN, m.Vocab
		c["tie_word_embeddings"] = m.TiedEmbeddings
		if m.MaxPosition > 0 {
			c["max_position_embeddings"] = m.MaxPosition
		}
		if m.HeadDim != m.Hidden/m.Heads {
			c["head_dim"] = m.HeadDim
		}
	}
	switch m.Family {
	case "gpt2", "gpt_bigcode":
		c["n_layer"], c["n_embd"], c["n_head"], c["n_inner"] = m.Layers, m.Hidden, m.Heads, m.FFN
		c["vocab_size"], c["n_positions"], c["tie_word_embeddings"] = m.Vocab, m.MaxPosition, m.TiedEmbeddings
		if m.Family == "gpt_bigcode" {
			c["multi_query"] = m.KVHeads == 1
		}
	case "gptj":
		c["n_layer"], c["n_embd"], c["n_head"], c["n_inner"] = m.Layers, m.Hidden, m.Heads, m.FFN
		c["vocab_size"], c["n_positions"] = m.Vocab, m.MaxPosition
		c["rotary_dim"] = int(m.RotaryPct * float64(m.HeadDim))
		c["tie_word_embeddings"] = m.TiedEmbeddings
	case "gpt_neox":
		llama()
		delete(c, "num_key_value_heads")
		c["rotary_pct"], c["use_parallel_residual"] = m.RotaryPct, m.ParallelBlock
	case "opt":
		c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["ffn_dim"] = m.Layers, m.Hidden, m.Heads, m.FFN
		c["vocab_size"], c["max_position_embeddings"], c["tie_word_embeddings"] = m.Vocab, m.MaxPosition, m.TiedEmbeddings
		c["word_embed_proj_dim"] = m.Hidden
		if m.WordEmbedProjDim > 0 {
			c["word_embed_proj_dim"] = m.WordEmbedProjDim
		}
		c["do_layer_norm_before"] = m.NormPosition != "post"
	case "bert":
		llama()
		delete(c, "num_key_value_heads")
		delete(c, "tie_word_embeddings")
		c["type_vocab_size"] = m.TypeVocab
	case "vit":
		c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
		c["image_size"], c["patch_size"], c["num_channels"] = m.Image.Size, m.Image.Patch, m.Image.Channels
	case "phi":
		llama()
		c["partial_rotary_factor"] = m.RotaryPct
	case "mixtral":
		llama()
		c["num_local_experts"], c["num_experts_per_tok"] = m.Experts, m.ExpertsPerToken
	case "deepseek_v3":
		llama()
		delete(c, "head_dim")
		c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
		c["moe_intermediate_size"], c["first_k_dense_replace"] = m.ExpertFFN, m.DenseLayers
		c["q_lora_rank"], c["kv_lora_rank"] = m.QLoRARank, m.KVLoRARank
		c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"] = m.QKNopeDim, m.QKRopeDim, m.VHeadDim
		c["n_group"], c["topk_group"] = 1, 1
	default: // llama, mistral, qwen2, gemma, phi3
		llama()
		if m.SlidingWindow > 0 {
			c["sliding_window"] = m.SlidingWindow
		} else if m.Family == "mistral" || m.Family == "qwen2" {
			c["sliding_window"] = nil
		}
	}
	return c
}
