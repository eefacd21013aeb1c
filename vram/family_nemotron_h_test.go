package vram

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// nemotronHSmall is a small NemotronHConfig with one layer of each kind.
const nemotronHSmall = `"vocab_size": 1000, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
	"moe_intermediate_size": 48, "moe_shared_expert_intermediate_size": 80, "ssm_state_size": 16, "mamba_num_heads": 8, "mamba_head_dim": 16,
	"n_routed_experts": 8, "num_experts_per_tok": 2`

// TestNemotronH: Nemotron-H as transformers 5.23 builds it. Each count is
// sum(p.numel() for p in model.parameters()) of
// AutoModelForCausalLM.from_config(AutoConfig.for_model("nemotron_h",
// **keys)) built under torch.device("meta") with torch 2.15.0 and
// transformers 5.23.0.
func TestNemotronH(t *testing.T) {
	for _, c := range []struct {
		name, keys string
		params     int64
	}{
		{"one layer of each kind", `"layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"], "n_groups": 2, ` + nemotronHSmall, 243096},
		{"latent MoE", `"layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"], "n_groups": 2, "moe_latent_size": 32, ` + nemotronHSmall, 222616},
		{"biases", `"layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"], "n_groups": 2, "moe_latent_size": 32, "mlp_bias": true, "use_bias": true, "use_conv_bias": false, ` + nemotronHSmall, 223216},
		// The older names: hybrid_override_pattern, mamba_n_groups,
		// mamba_d_conv, mamba_conv_bias; num_hidden_layers is ignored.
		{"legacy keys", `"hybrid_override_pattern": "ME*E-M", "mamba_n_groups": 4, "mamba_d_conv": 3, "mamba_conv_bias": false, "num_hidden_layers": 6, ` + nemotronHSmall, 341232},
		{"legacy kinds, no experts", `"layers_block_type": ["mamba", "mlp", "attention", "mlp"], "n_groups": 2, ` + nemotronHSmall, 195480},
		{"the class's defaults", ``, 1968355712},
	} {
		js := `{"model_type": "nemotron_h"}`
		if c.keys != "" {
			js = `{"model_type": "nemotron_h", ` + c.keys + `}`
		}
		m, err := FromHFConfig([]byte(js))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
		}
	}
	// A key left out takes NemotronHConfig's default (l.98-152); the
	// default layers are __post_init__'s four (l.177).
	m, err := FromHFConfig([]byte(`{"model_type": "nemotron_h"}`))
	s := m.SSM
	if err != nil || m.Layers != 4 || m.Hidden != 4096 || m.Heads != 32 || m.KVHeads != 8 || m.HeadDim != 128 || m.FFN != 21504 || m.Vocab != 131072 || m.MaxPosition != 4096 ||
		m.Experts != 8 || m.ExpertsPerToken != 2 || m.ExpertFFN != 7688 || m.SharedExpertFFN != 7688 || m.MoELatent != 0 || m.TiedEmbeddings ||
		s.Heads != 128 || s.HeadDim != 64 || s.State != 128 || s.Groups != 8 || s.ConvKernel != 4 || s.Chunk != 128 || s.NoConvBias || s.ProjBias ||
		!slices.Equal(s.Attention, []int{2}) || !slices.Equal(s.MLP, []int{3}) || !slices.Equal(s.MoE, []int{1}) {
		t.Errorf("defaults: %+v %+v, %v", m, s, err)
	}
	if p := MustPreset("nemotron-h-config-defaults"); p.ParamCount() != m.ParamCount() {
		t.Errorf("the preset has %d parameters, the class's defaults %d", p.ParamCount(), m.ParamCount())
	}
	// tie_word_embeddings changes nothing (_tied_weights_keys = {}):
	// transformers 5.23 builds 243,096 parameters with it too.
	tied, err := FromHFConfig([]byte(`{"model_type": "nemotron_h", "tie_word_embeddings": true, "layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"], "n_groups": 2, ` + nemotronHSmall + `}`))
	if err != nil || tied.ParamCount() != 243096 || tied.Origin == nil || !strings.Contains(fmt.Sprint(tied.Origin.Notes), "ties nothing") {
		t.Errorf("tied: %d, %v, %+v", tied.ParamCount(), err, tied.Origin)
	}
	for _, c := range []struct{ keys, want string }{
		{`"layers_block_type": ["linear_attention", "conv"]`, `layers_block_type[1] = the string "conv": want linear_attention, full_attention, mlp or moe`},
		{`"hybrid_override_pattern": "M*X"`, `hybrid_override_pattern[2] = 'X': want M, E, * or -`},
		{`"mlp_hidden_act": "silu"`, `mlp_hidden_act = "silu": only the class's "relu2" is modelled`},
		{`"norm_topk_prob": false`, `norm_topk_prob false`},
		{`"mamba_num_heads": 12`, `model.ssm.groups = 8 must divide ssm.heads = 12`},
	} {
		if _, err := FromHFConfig([]byte(`{"model_type": "nemotron_h", ` + c.keys + `}`)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.keys, err, c.want)
		}
	}
	bad := MustPreset("nemotron-h-config-defaults")
	bad.SSM.MoE = nil
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "set experts exactly when model.ssm.moe_layers lists layers") {
		t.Errorf("experts without MoE layers: %v", err)
	}
	bamba := MustPreset("bamba-9b")
	bamba.SSM.MLP = []int{1}
	if err := bamba.Validate(); err == nil || !strings.Contains(err.Error(), "describe hybrids of one sublayer a layer (families nemotron_h)") {
		t.Errorf("mlp_layers on bamba: %v", err)
	}
}

// TestNemotronHServing: the layers that are an MLP or MoE alone keep
// nothing: the defaults' one attention layer caches K and V (8 heads of
// 128, bf16), its one mixer a Mamba-2 state, and vLLM groups the two;
// training as traced at 5.23, generate refused in words.
func TestNemotronHServing(t *testing.T) {
	m := MustPreset("nemotron-h-config-defaults")
	// Training follows transformers 5.23 (its traces, testdata/trace5);
	// transformers' generate is not modelled.
	if est, err := (Training{Model: m, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v, notes %q", err, est.Notes)
	}
	if _, err := (Inference{Model: m, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
	est, err := Inference{Model: m, Batch: 1}.Estimate()
	// conv_dim = 8192 + 2·8·128 = 10240 channels × 4 taps, and 128 heads
	// × 64 × a 128-number state.
	if err != nil || est.KVPerToken != BF16.Size(2*8*128) || est.State != BF16.Size(10240*4+8192*128) {
		t.Errorf("KV %v a token, state %v, %v", est.KVPerToken, est.State, err)
	}
	c, err := VLLM{MaxModelLen: 4096}.Carve(Inference{Model: m}, mustGPU("H100-80GB"))
	if err != nil || !c.Starts || !slices.Equal(c.KVCache.Groups, []VLLMGroup{{Kind: "full", Layers: 1}, {Kind: "mamba", Layers: 1}}) {
		t.Errorf("vLLM: starts %v (%s), groups %+v, %v", c.Starts, c.Err, c.KVCache.Groups, err)
	}
}
