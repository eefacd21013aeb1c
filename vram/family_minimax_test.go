package vram

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// miniMaxSmall is a small MiniMaxConfig as a config.json fragment.
const miniMaxSmall = `"model_type": "minimax", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 40, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 4, "num_experts_per_tok": 2, "block_size": 8`

// TestMiniMax: MiniMax-Text-01's family as transformers 5.23 builds it —
// the parameter and buffer counts of its meta-device models (small configs;
// the class's defaults), the layer kinds, and what is refused.
func TestMiniMax(t *testing.T) {
	for _, c := range []struct {
		name, json      string
		params, buffers int64
		attention       []int
	}{
		// transformers 5.23.0: AutoConfig.for_model("minimax", **json),
		// AutoModelForCausalLM.from_config under torch.device("meta"),
		// sum(p.numel() for p in model.parameters()) and the same over
		// model.buffers().
		{"small, the default kinds", `{` + miniMaxSmall + `}`, 318144, 664, []int{0, 2}},
		{"sliding_window changes no tensor", `{` + miniMaxSmall + `, "sliding_window": 16}`, 318144, 664, []int{0, 2}},
		{"layer_types, num_experts, head_dim null, tied", `{"model_type": "minimax", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 40, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": null, "num_experts": 6, "num_experts_per_tok": 2, "block_size": 4, "tie_word_embeddings": true, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]}`, 328448, 316, []int{3}},
		{"the class's defaults", `{"model_type": "minimax"}`, 47373946880, 33817216, []int{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
			continue
		}
		var buf int64
		for _, b := range m.Buffers() {
			n := int64(1)
			for _, d := range b.Shape {
				n *= d
			}
			buf += n
		}
		if buf != c.buffers || !slices.Equal(m.Lightning.Attention, c.attention) {
			t.Errorf("%s: %d buffer elements, softmax attention at %v; transformers: %d, %v", c.name, buf, m.Lightning.Attention, c.buffers, c.attention)
		}
	}
	// A key config.json leaves out takes MiniMaxConfig's default
	// (configuration_minimax.py:86-117).
	m, _ := FromHFConfig([]byte(`{"model_type": "minimax"}`))
	want := Model{Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 131072, Experts: 8, ExpertsPerToken: 2, ExpertFFN: 14336, RotaryPct: 1}
	got := m
	got.Family, got.Name, got.Lightning, got.Origin, got.Release = "", "", nil, nil, nil
	if fmt.Sprint(got) != fmt.Sprint(want) || m.Lightning.BlockSize != 256 {
		t.Errorf("class defaults: %+v %+v", got, *m.Lightning)
	}
	// The remote code's attn_type_list is not read by transformers: the
	// default kinds, with a note.
	m, err := FromHFConfig([]byte(`{` + miniMaxSmall + `, "attn_type_list": [0, 0, 0, 1]}`))
	if err != nil || !slices.Equal(m.Lightning.Attention, []int{0, 2}) || m.Origin == nil || !strings.Contains(strings.Join(m.Origin.Notes, " "), "attn_type_list") {
		t.Errorf("attn_type_list: %v, %v, %+v", err, m.Lightning, m.Origin)
	}
	for _, c := range []struct{ json, want string }{
		{`{` + miniMaxSmall + `, "hidden_act": "gelu"}`, "hidden_act"},
		{`{` + miniMaxSmall + `, "num_key_value_heads": null}`, "num_key_value_heads null"},
		{`{` + miniMaxSmall + `, "layer_types": ["full_attention", "linear_attention"]}`, "layer_types lists 2 layers"},
		{`{` + miniMaxSmall + `, "layer_types": ["full_attention", "mamba", "full_attention", "linear_attention"]}`, "layer_types[1]"},
		{`{` + miniMaxSmall + `, "block_size": 0}`, "model.lightning.block_size = 0"},
	} {
		if _, err := FromHFConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %q", c.json, err, c.want)
		}
	}
	small, _ := FromHFConfig([]byte(`{` + miniMaxSmall + `}`))
	small.Lightning = nil
	if err := small.Validate(); err == nil || !strings.Contains(err.Error(), "model.lightning") {
		t.Errorf("no lightning: %v", err)
	}
	other := MustPreset("minimax-m2")
	other.Lightning = &Lightning{BlockSize: 8}
	if err := other.Validate(); err == nil || !strings.Contains(err.Error(), "lightning-attention layers (families minimax)") {
		t.Errorf("lightning on minimax_m2: %v", err)
	}
}

// TestMiniMaxText01: the flagship with its card's shape (a softmax
// attention after every 7 lightning layers): its parameters as
// transformers 5.23 builds them, the HFConfig round trip, the state a
// lightning layer keeps per sequence as transformers' cache holds it (a
// 5.23 forward with use_cache on a small bf16 model: linear_cache[i] is
// (batch, heads, head_dim, head_dim) bf16 after the prefill and after a
// decode step), its training at 5.23, and what is refused in words.
func TestMiniMaxText01(t *testing.T) {
	m := MustPreset("minimax-text-01")
	if m.ParamCount() != 456089655296 || m.attentionLayers(0, m.Layers) != 10 {
		t.Errorf("%d parameters, %d softmax layers; transformers 5.23: 456,089,655,296 and 10", m.ParamCount(), m.attentionLayers(0, m.Layers))
	}
	b, _ := json.Marshal(m.HFConfig())
	back, err := FromHFConfig(b)
	if err != nil || back.ParamCount() != m.ParamCount() || !slices.Equal(back.Lightning.Attention, m.Lightning.Attention) || back.KVHeads != 8 {
		t.Errorf("HFConfig round trip: %v, %d parameters, %+v", err, back.ParamCount(), back.Lightning)
	}
	if got := m.LightningStateBytes(BF16); got != BF16.Size(64*128*128) {
		t.Errorf("lightning state per sequence per layer: %v", got)
	}
	// Training is modelled as transformers 5.23 runs it, where its traces
	// hold (testdata/trace5); 4.57's MiniMax (a ModuleList of experts) is
	// not, nor transformers' generate.
	est, err := (Training{Model: m, SeqLen: 512, MicroBatch: 1}).Estimate()
	if err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "modelled as transformers 5 builds and trains it") {
		t.Errorf("training: %v", err)
	}
	for _, c := range []struct {
		name string
		run  func() error
		want string
	}{
		{"training at 4.57.6", func() error {
			_, err := (Training{Model: m, SeqLen: 512, MicroBatch: 1, Transformers: "4.57.6"}).Estimate()
			return err
		}, "ModuleList of experts"},
		{"generate", func() error {
			_, err := (Inference{Model: m, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate()
			return err
		}, "not modelled yet"},
		{"selective checkpointing", func() error {
			_, err := (Training{Model: m, SeqLen: 512, MicroBatch: 1, Checkpointing: "selective"}).Estimate()
			return err
		}, "only none and full are modelled for lightning attention"},
	} {
		if err := c.run(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want refused with %q", c.name, err, c.want)
		}
	}
	// vLLM ran MiniMax-Text-01 until 0.23.0 (0.33's registry.py:861-864)
	// and refuses it since, in its words; 0.23.0 is modelled with the rules
	// of 0.14.1, the newest modelled release before it, lightning state
	// and all (TestMiniMaxServedByVLLM).
	if _, err := (VLLM{MaxModelLen: 32768, TP: 8}).Carve(Inference{Model: m, TP: 8}, mustGPU("H200")); err == nil || !strings.Contains(err.Error(), "was supported in vLLM until v0.23.0") {
		t.Errorf("vLLM 0.33: %v", err)
	}
	if c, err := (VLLM{Version: "0.23.0", MaxModelLen: 32768, TP: 8}).Carve(Inference{Model: m, TP: 8}, mustGPU("H200")); err != nil || c.Release.Release != "0.14.1" || c.KVCache.StateLayers != 70 {
		t.Errorf("vLLM 0.23.0: %v, modelled as %s with %d state layers", err, c.Release.Release, c.KVCache.StateLayers)
	}
	if _, err := (SGLang{TP: 8}).Carve(Inference{Model: m, TP: 8}, mustGPU("H200")); err == nil || !strings.Contains(err.Error(), "SGLang 0.5.23 has no class for minimax") {
		t.Errorf("SGLang: %v", err)
	}
}
