package vram

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// kimiSmall is a small KimiLinearConfig as a config.json fragment: the
// checkpoint's key names (num_experts, num_experts_per_token,
// linear_attn_config), MLA at layers 2 and 4 (1-indexed).
const kimiSmall = `"model_type": "kimi_linear", "vocab_size": 1000, "pad_token_id": 0, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "num_experts": 8, "num_experts_per_token": 2, "kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 24, "v_head_dim": 20, "linear_attn_config": {"num_heads": 2, "head_dim": 16, "short_conv_kernel_size": 3, "full_attn_layers": [2, 4], "kda_layers": [1, 3]}`

// TestKimiLinear: Kimi-Linear as transformers 5.23 builds it — the
// parameter counts of its meta-device models (small configs; the class's
// defaults), the layer kinds, and what is refused.
func TestKimiLinear(t *testing.T) {
	for _, c := range []struct {
		name, json string
		params     int64
		attention  []int
		dense      int
	}{
		// transformers 5.23.0: AutoConfig.for_model("kimi_linear", **json),
		// AutoModelForCausalLM.from_config under torch.device("meta"),
		// sum(p.numel() for p in model.parameters()).
		{"small", `{` + kimiSmall + `}`, 392228, []int{1, 3}, 1},
		{"q_lora, attention_bias, two shared experts, mlp_layer_types", `{` + kimiSmall + `, "q_lora_rank": 48, "attention_bias": true, "num_shared_experts": 2, "mlp_layer_types": ["dense", "dense", "sparse", "sparse"]}`, 374724, []int{1, 3}, 2},
		{"layer_types over linear_attn_config, no dense layer", `{` + kimiSmall + `, "layer_types": ["full_attention", "linear_attention", "linear_attention", "linear_attention"], "first_k_dense_replace": 0}`, 411094, []int{0}, 0},
		{"tie_word_embeddings ties nothing", `{` + kimiSmall + `, "tie_word_embeddings": true}`, 392228, []int{1, 3}, 1},
		{"the class's names, default kinds", `{"model_type": "kimi_linear", "vocab_size": 1000, "pad_token_id": 0, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_hidden_layers": 6, "num_attention_heads": 4, "num_local_experts": 8, "num_experts_per_tok": 2, "kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 24, "v_head_dim": 20, "linear_num_heads": 3, "linear_head_dim": 8, "linear_conv_kernel_dim": 2}`, 496159, []int{4}, 1},
		{"the class's defaults", `{"model_type": "kimi_linear"}`, 49133074464, []int{4, 8, 12, 16, 20, 24}, 1},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
			continue
		}
		if !slices.Equal(m.KDA.Attention, c.attention) || m.DenseLayers != c.dense {
			t.Errorf("%s: MLA at %v, %d dense; transformers: %v, %d", c.name, m.KDA.Attention, m.DenseLayers, c.attention, c.dense)
		}
	}
	// A key config.json leaves out takes KimiLinearConfig's default
	// (configuration_kimi_linear.py:76-113); where attribute_map gives a
	// checkpoint name, it wins over the class's (as transformers 5.23
	// resolves num_experts=8, num_local_experts=16 to 8, and
	// model_max_length=5, max_position_embeddings=7 to 5).
	m, _ := FromHFConfig([]byte(`{"model_type": "kimi_linear"}`))
	want := Model{Layers: 27, Hidden: 2304, Heads: 32, KVHeads: 32, FFN: 9216, Vocab: 163840, MaxPosition: 1048576, Experts: 256, ExpertsPerToken: 8,
		SharedExperts: 1, ExpertFFN: 1024, DenseLayers: 1, KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192}
	got := m
	got.Family, got.Name, got.KDA, got.Origin, got.Release = "", "", nil, nil, nil
	if fmt.Sprint(got) != fmt.Sprint(want) || m.KDA.Heads != 32 || m.KDA.HeadDim != 128 || m.KDA.ConvKernel != 4 {
		t.Errorf("class defaults: %+v %+v", got, *m.KDA)
	}
	m, err := FromHFConfig([]byte(`{` + kimiSmall + `, "num_local_experts": 16, "model_max_length": 5, "max_position_embeddings": 7}`))
	if err != nil || m.Experts != 8 || m.MaxPosition != 5 {
		t.Errorf("attribute_map names: %d experts, %d positions, %v; transformers: 8, 5", m.Experts, m.MaxPosition, err)
	}
	for _, c := range []struct{ json, want string }{
		{`{` + kimiSmall + `, "moe_renormalize": false}`, "moe_renormalize"},
		{`{` + kimiSmall + `, "hidden_act": "gelu"}`, "hidden_act"},
		{`{` + kimiSmall + `, "num_shared_experts": 0}`, "shared_experts"},
		{`{` + kimiSmall + `, "mlp_layer_types": ["sparse", "dense", "sparse", "sparse"]}`, "mlp_layer_types[1]"},
		{`{` + strings.Replace(kimiSmall, `"pad_token_id": 0, `, "", 1) + `}`, "pad_token_id 163839"},
		{`{` + strings.Replace(kimiSmall, `"kda_layers": [1, 3]`, `"kda_layers": [1]`, 1) + `}`, "layer 3 (1-indexed) is in neither"},
		{`{` + strings.Replace(kimiSmall, `"kda_layers": [1, 3]`, `"kda_layers": [1, 5]`, 1) + `}`, "kda_layers[1] = 5"},
	} {
		if _, err := FromHFConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %q", c.json, err, c.want)
		}
	}
	small, _ := FromHFConfig([]byte(`{` + kimiSmall + `}`))
	small.TiedEmbeddings = true
	if err := small.Validate(); err == nil || !strings.Contains(err.Error(), "ties nothing") {
		t.Errorf("tied embeddings: %v", err)
	}
	small.TiedEmbeddings, small.KDA = false, nil
	if err := small.Validate(); err == nil || !strings.Contains(err.Error(), "model.kda") {
		t.Errorf("no kda: %v", err)
	}
}

// TestKimiLinearPreset: Kimi-Linear-48B-A3B with its checkpoint's layer
// kinds (linear_attn_config.full_attn_layers [4, 8, 12, 16, 20, 24, 27]):
// the state a KDA layer keeps per sequence as transformers' cache holds it
// (a 5.23 forward with use_cache on a small bf16 model: conv_states
// (batch, 3 · heads · head_dim, kernel) bf16, recurrent_states (batch,
// heads, head_dim, head_dim) fp32), the MLA layers' compressed cache, and
// that training plans as traced at 5.23 and generate is refused in words.
func TestKimiLinearPreset(t *testing.T) {
	m := MustPreset("kimi-linear-48b-a3b")
	if m.ParamCount() != 49122675072 || m.attentionLayers(0, m.Layers) != 7 {
		t.Errorf("%d parameters, %d MLA layers; transformers 5.23: 49,122,675,072 and 7", m.ParamCount(), m.attentionLayers(0, m.Layers))
	}
	// toConfig writes what transformers builds the same model from, and
	// the reader reads it back.
	b, _ := json.Marshal(m.HFConfig())
	back, err := FromHFConfig(b)
	if err != nil || back.ParamCount() != m.ParamCount() || !slices.Equal(back.KDA.Attention, m.KDA.Attention) || back.DenseLayers != 1 {
		t.Errorf("HFConfig round trip: %v, %d parameters, MLA at %v", err, back.ParamCount(), back.KDA)
	}
	if got := m.KDA.StateBytes(BF16); got != BF16.Size(3*32*128*4)+FP32.Size(32*128*128) {
		t.Errorf("KDA state per sequence per layer: %v", got)
	}
	// Training runs as traced at 5.23 (testdata/trace5: KDA's torch
	// fallbacks, kda5.go); transformers' generate is not modelled.
	if est, err := (Training{Model: m, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v, notes %q", err, est.Notes)
	}
	if _, err := (Inference{Model: m, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
	kimiLinearServing(t, m)
}

// kimiLinearServing: the serving engines' state for Kimi-Linear-48B's 20
// KDA layers, per rank, and the hybrid block vLLM aligns its MLA pages
// to. The state page is (kernel − 1) · 3 · 32 · 128 bf16 conv channels and
// 32 × 128 × 128 fp32 per head, 2,170,880 bytes at TP 1
// (mamba_utils.py:296-321 and 133-149 in vLLM 0.33; configs/mamba_utils.py
// in SGLang 0.5.23), divided by TP; vLLM's attention block is a · cdiv(state,
// a · 1,152), a 128 in 0.33 (platforms/interface.py:1083-1088) and 64 in
// 0.14.1 (models/config.py:389-393): 1920, 1024, 512, 256 tokens at TP 1,
// 2, 4, 8 in 0.33 and 1920, 960, 512, 256 in 0.14.1. vLLM 0.11.0 has no
// Kimi-Linear.
func kimiLinearServing(t *testing.T, m Model) {
	t.Helper()
	g := mustGPU("H200")
	for _, c := range []struct {
		release string
		tp      int
		block   int
		pages   int
	}{
		{"0.33.0", 1, 1920, 2}, {"0.33.0", 2, 1024, 2}, {"0.33.0", 4, 512, 2}, {"0.33.0", 8, 256, 2},
		{"0.14.1", 1, 1920, 1}, {"0.14.1", 2, 960, 1}, {"0.14.1", 4, 512, 1}, {"0.14.1", 8, 256, 1},
	} {
		v := VLLM{Version: c.release, TP: c.tp, MaxModelLen: 32768}
		car, err := v.Carve(Inference{Model: m}, g)
		if err != nil {
			t.Fatalf("vLLM %s TP %d: %v", c.release, c.tp, err)
		}
		kv := car.KVCache
		want := Bytes(2170880 / c.tp)
		if kv.StatePageBytes != want || kv.StateLayers != 20 || kv.StateKind != "KDA" || kv.BlockSize != c.block || kv.PageBytes != Bytes(c.block*1152) {
			t.Errorf("vLLM %s TP %d: state %v × %d (%s), block %d, page %v; want %v × 20 (KDA), block %d, page %d", c.release, c.tp, kv.StatePageBytes, kv.StateLayers, kv.StateKind, kv.BlockSize, kv.PageBytes, want, c.block, c.block*1152)
		}
		// One request of max_model_len: 7 MLA layers' blocks of the
		// context, and the state pages of 20 KDA layers (align mode keeps
		// two in 0.33; one in 0.14.1).
		attn, state := kv.PerRequestFor(32768)
		if wantAttn := Bytes(7 * ((32768 + c.block - 1) / c.block) * c.block * 1152); attn != wantAttn || state != Bytes(20*c.pages)*kv.PageBytes {
			t.Errorf("vLLM %s TP %d: one request attention %v, state %v; want %v and 20 × %d pages", c.release, c.tp, attn, state, wantAttn, c.pages)
		}
	}
	if _, err := (VLLM{Version: "0.11.0", TP: 2, MaxModelLen: 32768}).Carve(Inference{Model: m}, g); err == nil || !strings.Contains(err.Error(), "no KimiLinearForCausalLM") {
		t.Errorf("vLLM 0.11.0: %v", err)
	}
	for _, tp := range []int{1, 2, 8} {
		p, err := (SGLang{TP: tp}).Carve(Inference{Model: m}, g)
		if err != nil {
			t.Fatalf("SGLang TP %d: %v", tp, err)
		}
		// bf16 conv state and fp32 temporal (--mamba-ssm-dtype float32).
		if want := Bytes(20 * 2170880 / tp); p.StatePerRequest != want || p.StateLayers != 20 {
			t.Errorf("SGLang TP %d: %v per request over %d layers, want %v over 20", tp, p.StatePerRequest, p.StateLayers, want)
		}
	}
	if _, err := (SGLang{Version: "0.5.3"}).Carve(Inference{Model: m}, g); err == nil {
		t.Error("SGLang 0.5.3 pools Kimi-Linear's KDA state")
	}
}

// TestKimiLinearKDAPadding: chunk_kimi_delta_attention pads the sequence
// to whole chunks of 64 (modeling_kimi_linear.py:494-502 at 5.23.0), so a
// KDA layer's decay map (l.517: batch × heads × chunks × 64 × 64 ×
// head_dim, fp32, saved by exp) is the padded length's, while the layer's
// input is the sequence's own.
func TestKimiLinearKDAPadding(t *testing.T) {
	m := MustPreset("kimi-linear-48b-a3b")
	for _, c := range []struct{ seq, chunks int }{{64, 1}, {100, 2}, {128, 2}, {200, 4}, {256, 4}} {
		r, err := (Training{Model: m, SeqLen: c.seq, MicroBatch: 2}).resolve()
		if err != nil {
			t.Fatalf("seq %d: %v", c.seq, err)
		}
		blk := buildBlock(&r, 0)
		var decay, input Bytes
		for _, x := range blk.Tensors {
			switch x.Name {
			case "decay_mask":
				decay = x.Bytes
			case "input":
				input = x.Bytes
			}
		}
		d := *m.KDA
		if want := FP32.Size(int64(2 * d.Heads * c.chunks * 64 * 64 * d.HeadDim)); decay != want || input != r.ComputeDType.Size(int64(2*c.seq*m.Hidden)) {
			t.Errorf("seq %d: decay map %v (want %v), input %v", c.seq, decay, want, input)
		}
	}
}
