package vram

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Per-layer patterns read from a config.json: which layers skip the rotary
// embedding (SmolLM3's no_rope_layers), which attend locally (layer_types).
func TestConfigLayerPatterns(t *testing.T) {
	smol := func(extra string) string {
		return `{"model_type": "smollm3", "num_hidden_layers": 8, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
			"intermediate_size": 128, "vocab_size": 100` + extra + `}`
	}
	olmo := func(extra string) string {
		return `{"model_type": "olmo3", "num_hidden_layers": 8, "hidden_size": 64, "num_attention_heads": 4,
			"intermediate_size": 128, "vocab_size": 100` + extra + `}`
	}
	exa := func(extra string) string {
		// num_key_value_heads given: Exaone4Config's default is 32, which
		// 4 heads cannot share.
		return `{"model_type": "exaone4", "num_hidden_layers": 8, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
			"intermediate_size": 128, "vocab_size": 100` + extra + `}`
	}
	for _, tc := range []struct {
		name, json string
		roped      string // per layer: r rotates, - does not
		local      string // per layer: l local, g global
		err        string
	}{
		{"smollm3 interval default", smol(``), "rrr-rrr-", "gggggggg", ""},
		{"smollm3 interval 2", smol(`, "no_rope_layer_interval": 2`), "r-r-r-r-", "gggggggg", ""},
		{"smollm3 list wins", smol(`, "no_rope_layer_interval": 2, "no_rope_layers": [1,1,1,0,1,1,1,0]`), "rrr-rrr-", "gggggggg", ""},
		{"smollm3 all rotary", smol(`, "no_rope_layers": [1,1,1,1,1,1,1,1]`), "rrrrrrrr", "gggggggg", ""},
		{"smollm3 irregular", smol(`, "no_rope_layers": [1,0,0,1,1,1,1,1]`), "", "", "no_rope_layers: the layers without the rotary embedding are not every n-th layer"},
		{"smollm3 short list", smol(`, "no_rope_layers": [1,0]`), "", "", "no_rope_layers lists 2 layers for num_hidden_layers = 8"},
		{"smollm3 bad flag", smol(`, "no_rope_layers": [1,1,2,0,1,1,1,0]`), "", "", "no_rope_layers[2] = the number 2: want 1 (rotary) or 0 (none)"},
		{"smollm3 sliding", smol(`, "use_sliding_window": true, "sliding_window": 64`), "", "", "use_sliding_window"},
		{"exaone4 default", exa(``), "rrr-rrr-", "lllglllg", ""},
		{"exaone4 letters", exa(`, "sliding_window_pattern": "LLLG"`), "rrr-rrr-", "lllglllg", ""},
		{"exaone4 letters 2", exa(`, "sliding_window_pattern": "LG"`), "r-r-r-r-", "lglglglg", ""},
		{"exaone4 no window", exa(`, "sliding_window": null, "layer_types": ["full_attention","full_attention","full_attention","full_attention","full_attention","full_attention","full_attention","full_attention"]`), "rrrrrrrr", "gggggggg", ""},
		{"exaone4 bad letters", exa(`, "sliding_window_pattern": "LGLL"`), "", "", `sliding_window_pattern "LGLL": only groups of local layers (L) ending in one global layer (G) are modelled`},
		{"olmo3 default", olmo(``), "rrrrrrrr", "lllglllg", ""},
		{"olmo3 all full", olmo(`, "layer_types": ["full_attention","full_attention","full_attention","full_attention","full_attention","full_attention","full_attention","full_attention"]`), "rrrrrrrr", "gggggggg", ""},
	} {
		m, err := FromHFConfig([]byte(tc.json))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		m = m.Normalize()
		var roped, local strings.Builder
		for i := 0; i < m.Layers; i++ {
			roped.WriteString(map[bool]string{true: "r", false: "-"}[m.Roped(i)])
			local.WriteString(map[bool]string{true: "l", false: "g"}[m.LocalLayer(i)])
		}
		if roped.String() != tc.roped || local.String() != tc.local {
			t.Errorf("%s: rotary %s local %s, want %s %s", tc.name, roped.String(), local.String(), tc.roped, tc.local)
		}
		// The config the engine writes reads back to the same pattern.
		b, err := json.Marshal(m.HFConfig())
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromHFConfig(b)
		if err != nil || fmt.Sprint(back.NoRopeEvery, back.GlobalEvery, back.SlidingWindow) != fmt.Sprint(m.NoRopeEvery, m.GlobalEvery, m.SlidingWindow) {
			t.Errorf("%s: written config reads back as %+v (%v)", tc.name, back, err)
		}
	}
}

// GLM-4.5's config keys: biases on q, k and v only, the per-head q/k norm,
// half-rotary heads, the dense first layers and the MTP layer.
func TestGLM4MoEConfig(t *testing.T) {
	base := `{"model_type": "glm4_moe", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
		"head_dim": 16, "intermediate_size": 128, "vocab_size": 100, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
		"moe_intermediate_size": 32, "first_k_dense_replace": 1, "num_nextn_predict_layers": 1`
	m, err := FromHFConfig([]byte(base + `, "attention_bias": true, "use_qk_norm": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Bias != BiasQKVOnly || m.QKNorm != "head" || m.RotaryPct != 0.5 || m.DenseLayers != 1 || m.MTPLayers != 1 || !m.IsMoELayer(1) || m.IsMoELayer(0) {
		t.Errorf("read %+v", m)
	}
	for _, tt := range m.Tensors() {
		if strings.HasSuffix(tt.Name, "o_proj.bias") {
			t.Errorf("%s: glm4_moe's o_proj has no bias", tt.Name)
		}
	}
	if len(m.storedOnly()) == 0 || !strings.Contains(fmt.Sprint(m.storedOnly()), "model.layers.4.eh_proj.weight") {
		t.Errorf("the MTP layer is not among the stored tensors")
	}
	if _, err := FromHFConfig([]byte(base + `, "norm_topk_prob": false}`)); err == nil || !strings.Contains(err.Error(), "norm_topk_prob false") {
		t.Errorf("norm_topk_prob false: %v", err)
	}
}

// Hunyuan's per-layer lists (num_experts, moe_topk) read when they hold one
// value; cross-layer attention and differing lists are refused by name.
func TestHunyuanConfig(t *testing.T) {
	base := `{"model_type": "hunyuan_v1_moe", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
		"head_dim": 16, "intermediate_size": 32, "vocab_size": 100`
	m, err := FromHFConfig([]byte(base + `, "num_experts": 8, "moe_topk": [2, 2], "num_shared_expert": [1, 1], "moe_intermediate_size": [32, 32]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Experts != 8 || m.ExpertsPerToken != 2 || m.SharedExperts != 1 || m.ExpertFFN != 32 || m.SharedExpertFFN != 32 {
		t.Errorf("read %+v", m)
	}
	for _, tc := range []struct{ extra, want string }{
		{`, "num_experts": 8, "moe_topk": [2, 4]}`, "moe_topk[1] = the number 4: only one value for every layer is modelled"},
		{`, "num_experts": [8], "moe_topk": 2}`, "num_experts lists 1 layers for num_hidden_layers = 2"},
		{`, "num_experts": 8, "moe_topk": 2, "use_cla": true}`, "use_cla: cross-layer attention"},
	} {
		if _, err := FromHFConfig([]byte(base + tc.extra)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.extra, err, tc.want)
		}
	}
}

// ERNIE 4.5's MoE layer range, its biases and its frozen correction bias.
func TestErnieMoEConfig(t *testing.T) {
	base := `{"model_type": "ernie4_5_moe", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
		"intermediate_size": 128, "vocab_size": 100, "moe_num_experts": 8, "moe_k": 2, "moe_num_shared_experts": 1, "moe_intermediate_size": 32`
	m, err := FromHFConfig([]byte(base + `, "moe_layer_start_index": 2, "use_bias": true}`))
	if err != nil {
		t.Fatal(err)
	}
	m = m.Normalize()
	if m.DenseLayers != 2 || m.IsMoELayer(1) || !m.IsMoELayer(2) || m.Bias != BiasAll || !m.LMHeadBias || m.Router != "softmax_gather_norm" {
		t.Errorf("read %+v", m)
	}
	r := &resolved{m: m}
	frozen := 0
	for _, tt := range m.Tensors() {
		if strings.HasSuffix(tt.Name, "moe_statics.e_score_correction_bias") {
			frozen++
			if r.trains(tt) {
				t.Errorf("%s trains; it is a parameter without gradient", tt.Name)
			}
		}
	}
	if frozen != 2 {
		t.Errorf("%d correction biases, want one per MoE layer (2)", frozen)
	}
	if _, err := FromHFConfig([]byte(base + `, "moe_layer_end_index": 2}`)); err == nil || !strings.Contains(err.Error(), "moe_layer_end_index = 2") {
		t.Errorf("moe_layer_end_index 2: %v", err)
	}
}

// DeepSeek-V2's routing (group-limited or greedy) and its optional q
// low-rank pair.
func TestDeepSeekV2Config(t *testing.T) {
	base := `{"model_type": "deepseek_v2", "num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128,
		"vocab_size": 100, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 2, "moe_intermediate_size": 32,
		"first_k_dense_replace": 1, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8`
	for _, tc := range []struct {
		extra         string
		groups, qRank int
	}{
		{`, "q_lora_rank": null, "topk_method": "greedy", "n_group": 4}`, 0, 0},
		{`, "q_lora_rank": 32, "topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2}`, 4, 32},
	} {
		m, err := FromHFConfig([]byte(base + tc.extra))
		if err != nil {
			t.Fatalf("%s: %v", tc.extra, err)
		}
		if m.ExpertGroups != tc.groups || m.QLoRARank != tc.qRank || m.HeadDim != 12 || m.Normalize().Router != "softmax_topk_scaled" {
			t.Errorf("%s: read %+v", tc.extra, m)
		}
	}
	if _, err := FromHFConfig([]byte(base + `, "n_group": 3, "topk_method": "group_limited_greedy"}`)); err == nil || !strings.Contains(err.Error(), "expert_groups = 3 must divide experts = 8") {
		t.Errorf("3 groups of 8 experts: %v", err)
	}
}
