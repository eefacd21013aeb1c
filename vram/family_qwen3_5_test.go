package vram

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// qwen35Small are a small Qwen3.5 text_config and vision_config.
const (
	qwen35SmallText   = `"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16`
	qwen35SmallVision = `"vision_config": {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4, "out_hidden_size": 64, "num_position_embeddings": 16}`
)

// TestQwen35: Qwen3.5 and Qwen3.5-MoE as transformers 5.23 builds them —
// the parameter counts of their meta-device models (small configs; the
// classes' defaults with out_hidden_size the text width, which are the
// presets), the layer kinds, the rotated share and its buffers.
func TestQwen35(t *testing.T) {
	dense := `"intermediate_size": 128, ` + qwen35SmallText
	moe := qwen35SmallText + `, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48`
	for _, c := range []struct {
		name, json string
		params     int64
		attention  []int
		rotated    int64 // the text rotary embedding's inv_freq entries
	}{
		// transformers 5.23.0: AutoConfig.for_model(model_type, **config),
		// AutoModelForImageTextToText.from_config under
		// torch.device("meta"), sum(p.numel() for p in model.parameters()).
		{"small", `{"model_type": "qwen3_5", "text_config": {` + dense + `}, ` + qwen35SmallVision + `}`, 403624, []int{3}, 4},
		{"attention_bias, tied, full_attention_interval 2", `{"model_type": "qwen3_5", "tie_word_embeddings": true, "text_config": {` + dense +
			`, "attention_bias": true, "full_attention_interval": 2}, ` + qwen35SmallVision + `}`, 355920, []int{1, 3}, 4},
		{"layer_types", `{"model_type": "qwen3_5", "text_config": {` + dense +
			`, "layer_types": ["full_attention", "linear_attention", "linear_attention", "full_attention"]}, ` + qwen35SmallVision + `}`, 419024, []int{0, 3}, 4},
		{"rope_parameters' partial_rotary_factor", `{"model_type": "qwen3_5", "text_config": {` + dense +
			`, "partial_rotary_factor": 0.25, "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.5}}, ` + qwen35SmallVision + `}`, 403624, []int{3}, 8},
		{"the class's defaults, out_hidden_size 4096", `{"model_type": "qwen3_5", "vision_config": {"out_hidden_size": 4096}}`, 9409813744, []int{3, 7, 11, 15, 19, 23, 27, 31}, 32},
		{"MoE small", `{"model_type": "qwen3_5_moe", "text_config": {` + moe + `}, ` + qwen35SmallVision + `}`, 541096, []int{3}, 4},
		{"MoE: the class's defaults, out_hidden_size 2048", `{"model_type": "qwen3_5_moe", "vision_config": {"out_hidden_size": 2048}}`, 35107181936, []int{3, 7, 11, 15, 19, 23, 27, 31, 35, 39}, 32},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if m.ParamCount() != c.params || !slices.Equal(m.DeltaNet.Attention, c.attention) {
			t.Errorf("%s: %d parameters, attention layers %v; transformers 5.23 builds %d, %v", c.name, m.ParamCount(), m.DeltaNet.Attention, c.params, c.attention)
		}
		var got []string
		for _, b := range m.Buffers() {
			got = append(got, fmt.Sprint(b.Name, b.Shape))
		}
		if want := fmt.Sprint("model.language_model.rotary_emb.original_inv_freq", []int64{c.rotated}); !slices.Contains(got, want) || len(got) != 4 {
			t.Errorf("%s: buffers %v, want the tower's two and the text model's two, %s among them", c.name, got, want)
		}
	}
	for preset, json := range map[string]string{
		"qwen3.5-9b":      `{"model_type": "qwen3_5", "vision_config": {"out_hidden_size": 4096}}`,
		"qwen3.5-35b-a3b": `{"model_type": "qwen3_5_moe", "vision_config": {"out_hidden_size": 2048}}`,
	} {
		m, _ := FromHFConfig([]byte(json))
		if p := MustPreset(preset); p.ParamCount() != m.ParamCount() || p.Vision.ImageTokens() != 256 {
			t.Errorf("%s: %d parameters, %d tokens an image; the classes' defaults build %d, 512 pixels merge into 256", preset, p.ParamCount(), p.Vision.ImageTokens(), m.ParamCount())
		}
	}
}

// TestQwen35TextAlone: a text config alone is the language model as
// AutoModelForCausalLM builds it in transformers 5.23 (Qwen3_5ForCausalLM,
// Qwen3_5MoeForCausalLM): its parameters under model.… and lm_head, tied
// where the text config says so, and the text model's two rotary buffers.
func TestQwen35TextAlone(t *testing.T) {
	for _, c := range []struct {
		name, json string
		params     int64
	}{
		// transformers 5.23.0: AutoConfig.for_model(model_type, **config),
		// AutoModelForCausalLM.from_config under torch.device("meta"),
		// sum(p.numel() for p in model.parameters()).
		{"dense", `{"model_type": "qwen3_5_text", "intermediate_size": 128, ` + qwen35SmallText + `}`, 312008},
		{"dense, tied", `{"model_type": "qwen3_5_text", "intermediate_size": 128, "tie_word_embeddings": true, ` + qwen35SmallText + `}`, 248008},
		{"MoE", `{"model_type": "qwen3_5_moe_text", ` + qwen35SmallText + `, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48}`, 449480},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters; transformers 5.23 builds %d", c.name, m.ParamCount(), c.params)
		}
		var got []string
		for _, b := range m.Buffers() {
			got = append(got, b.Name)
		}
		if want := []string{"model.rotary_emb.inv_freq", "model.rotary_emb.original_inv_freq"}; !slices.Equal(got, want) {
			t.Errorf("%s: buffers %v, want %v", c.name, got, want)
		}
		ts := m.Tensors()
		if first, last := ts[0].Name, ts[len(ts)-1].Name; first != "model.embed_tokens.weight" || last != map[bool]string{false: "lm_head.weight", true: "model.norm.weight"}[m.TiedEmbeddings] {
			t.Errorf("%s: tensors from %s to %s", c.name, first, last)
		}
	}
}

// TestQwen35ConfigDefaults: a key config.json leaves out takes
// Qwen3_5TextConfig's or Qwen3_5VisionConfig's default, and the top level's
// tie_word_embeddings decides (as Qwen3_5ForConditionalGeneration ties).
func TestQwen35ConfigDefaults(t *testing.T) {
	m, err := FromHFConfig([]byte(`{"model_type": "qwen3_5", "text_config": {"tie_word_embeddings": true}, "vision_config": {"out_hidden_size": 4096}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, tw := m.DeltaNet, m.Vision.Tower
	if m.Layers != 32 || m.Hidden != 4096 || m.FFN != 12288 || m.Heads != 16 || m.KVHeads != 4 || m.HeadDim != 256 || m.Vocab != 248320 ||
		m.MaxPosition != 32768 || m.RotaryPct != 0.25 || m.TiedEmbeddings || m.MTPLayers != 0 || m.Normalize().Bias != BiasNone {
		t.Errorf("text defaults: %+v", m)
	}
	if d.KeyHeads != 16 || d.ValueHeads != 32 || d.KeyDim != 128 || d.ValueDim != 128 || d.ConvKernel != 4 {
		t.Errorf("DeltaNet defaults: %+v", *d)
	}
	if im := tw.Image; tw.Layers != 27 || tw.Hidden != 1152 || tw.FFN != 4304 || tw.Heads != 16 || im.Patch != 16 || im.Merge != 2 || im.TemporalPatch != 2 || im.PositionTable != 2304 {
		t.Errorf("tower defaults: %+v %+v", tw, *im)
	}
	moe, err := FromHFConfig([]byte(`{"model_type": "qwen3_5_moe", "vision_config": {"out_hidden_size": 2048}}`))
	if err != nil || moe.Layers != 40 || moe.Hidden != 2048 || moe.KVHeads != 2 || moe.Experts != 256 || moe.ExpertsPerToken != 8 ||
		moe.ExpertFFN != 512 || moe.SharedExperts != 1 || moe.SharedExpertFFN != 512 || moe.Router != "softmax_topk_norm" {
		t.Errorf("MoE defaults: %+v, %v", moe, err)
	}
}

// TestQwen35ConfigErrors: each config transformers would refuse, or the
// engine does not model, is an error naming the key.
func TestQwen35ConfigErrors(t *testing.T) {
	dense := `"intermediate_size": 128, ` + qwen35SmallText
	for _, c := range []struct{ name, json, want string }{
		// The classes' own defaults do not fit together: the merger's
		// 3,584 into a 4,096-wide text model (transformers builds it,
		// 9,407,453,936 parameters on the meta device, and fails on the
		// first image).
		{"the class's defaults", `{"model_type": "qwen3_5"}`, "out_hidden_size = 3584 must equal text_config.hidden_size = 4096"},
		{"text_config not an object", `{"model_type": "qwen3_5", "text_config": 3}`, "text_config"},
		{"hidden_act", `{"model_type": "qwen3_5", "text_config": {` + dense + `, "hidden_act": "gelu"}, ` + qwen35SmallVision + `}`, "hidden_act"},
		{"layer_types", `{"model_type": "qwen3_5", "text_config": {` + dense + `, "layer_types": ["full_attention"]}, ` + qwen35SmallVision + `}`, "layer_types lists 1 layers"},
		{"a layer kind", `{"model_type": "qwen3_5", "text_config": {` + dense + `, "layer_types": ["full_attention", "sliding_attention", "full_attention", "full_attention"]}, ` + qwen35SmallVision + `}`, "layer_types[1]"},
		{"value heads", `{"model_type": "qwen3_5", "text_config": {` + dense + `, "linear_num_value_heads": 3}, ` + qwen35SmallVision + `}`, "value_heads = 3"},
		{"position table", `{"model_type": "qwen3_5", "text_config": {` + dense + `}, "vision_config": {"out_hidden_size": 64, "num_position_embeddings": 2000}}`, "num_position_embeddings"},
		{"tower activation", `{"model_type": "qwen3_5", "text_config": {` + dense + `}, "vision_config": {"out_hidden_size": 64, "hidden_act": "silu"}}`, "hidden_act"},
		{"tower heads", `{"model_type": "qwen3_5", "text_config": {` + dense + `}, "vision_config": {"out_hidden_size": 64, "num_heads": 5}}`, "num_heads"},
		{"no shared expert", `{"model_type": "qwen3_5_moe", "text_config": {` + qwen35SmallText + `, "num_experts": 8, "num_experts_per_tok": 2, "shared_expert_intermediate_size": 0}, ` + qwen35SmallVision + `}`, "shared_expert_intermediate_size"},
		{"top-k past the experts", `{"model_type": "qwen3_5_moe", "text_config": {` + qwen35SmallText + `, "num_experts": 2, "num_experts_per_tok": 4}, ` + qwen35SmallVision + `}`, "experts_per_token = 4"},
	} {
		if _, err := FromHFConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.want)
		}
	}
}

// TestQwen35Serving: the checkpoint's MTP layer is stored and not a
// parameter; the image-text model's training and the text model's are
// traced at 5.23 (the text model's generate refused); vLLM's hybrid
// pages on an H100.
func TestQwen35Serving(t *testing.T) {
	m := MustPreset("qwen3.5-9b")
	bare := m
	bare.MTPLayers = 0
	// fc 4096 × 8192; one full-attention layer: q_proj 8192 × 4096, k and
	// v 1024 × 4096, o 4096 × 4096, q/k norms 2 × 256, the MLP 3 × 4096 ×
	// 12288, its two norms; then norm, pre_fc_norm_hidden and
	// pre_fc_norm_embedding, 4096 each. All bf16.
	mtp := int64(4096*8192 + 8192*4096 + 2*1024*4096 + 4096*4096 + 2*256 + 3*4096*12288 + 2*4096 + 3*4096)
	if m.ParamCount() != bare.ParamCount() || m.StoredBytes()-bare.StoredBytes() != BF16.Size(mtp) {
		t.Errorf("MTP: %d vs %d parameters, stored %v vs %v; want the same parameters and %v more stored", m.ParamCount(), bare.ParamCount(), m.StoredBytes(), bare.StoredBytes(), BF16.Size(mtp))
	}
	raw, _ := json.Marshal(m.HFConfig())
	back, err := FromHFConfig(raw)
	if err != nil || back.MTPLayers != 1 || back.StoredBytes() != m.StoredBytes() {
		t.Errorf("the engine's config read back: %d MTP layers, stored %v, %v", back.MTPLayers, back.StoredBytes(), err)
	}
	// The image-text models (Qwen3_5ForConditionalGeneration,
	// Qwen3_5MoeForConditionalGeneration) and the language models alone
	// (Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM) train as traced at 5.23
	// (testdata/trace5); transformers' generate is not modelled.
	for _, preset := range []string{"qwen3.5-9b", "qwen3.5-35b-a3b"} {
		whole := MustPreset(preset)
		if est, err := (Training{Model: whole, SeqLen: 1024, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
			t.Errorf("%s's image-text model's training: %v, notes %q", preset, err, est.Notes)
		}
		text := whole
		text.Vision, text.MTPLayers = nil, 0
		if est, err := (Training{Model: text, SeqLen: 1024, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
			t.Errorf("%s's text model's training: %v, notes %q", preset, err, est.Notes)
		}
		if _, err := (Inference{Model: text, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
			t.Errorf("%s's text model's generate: %v", preset, err)
		}
	}
	for _, c := range []struct {
		preset      string
		block       int
		state, page Bytes
		states      int
	}{
		// 24 DeltaNet layers' state: conv 3 × (2·16·128 + 32·128) and
		// temporal 32 × 128 × 128, bf16; one token of the 8 attention
		// layers' cache 2 · 4 · 256 · 2 bytes = 4 KiB, so the block is 16 ·
		// cdiv(state, 16 · 4 KiB) tokens.
		{"qwen3.5-9b", 272, 3*8192*2 + 32*128*128*2, 272 * 4096, 24},
		// 30 DeltaNet layers, the same state; 2 KV heads: 2 KiB a token.
		{"qwen3.5-35b-a3b", 544, 3*8192*2 + 32*128*128*2, 544 * 2048, 30},
	} {
		v, err := VLLM{Version: "0.33.0", MaxModelLen: 32768}.Carve(Inference{Model: MustPreset(c.preset)}, mustGPU("H100-80GB"))
		if err != nil || !v.Starts {
			t.Errorf("%s: starts %v (%s), %v", c.preset, v.Starts, v.Err, err)
			continue
		}
		k := v.KVCache
		if k.BlockSize != c.block || k.StatePageBytes != c.state || k.PageBytes != c.page || k.StateLayers != c.states {
			t.Errorf("%s: block %d, state page %d, page %d, %d state layers; want %d, %d, %d, %d", c.preset, k.BlockSize, k.StatePageBytes, k.PageBytes, k.StateLayers, c.block, c.state, c.page, c.states)
		}
	}
}
