package vram

import (
	"encoding/json"
	"strings"
	"testing"
)

// gemma3nSmall is a small Gemma 3n text config: ten layers (5 and 10
// global by the class's pattern), the last five sharing keys and values.
const gemma3nSmall = `"num_hidden_layers": 10, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 1000, "vocab_size_per_layer_input": 500, "hidden_size_per_layer_input": 16, "altup_num_inputs": 3, "laurel_rank": 8`

// TestGemma3nText: Gemma 3n's language model as transformers 5.23 builds
// it — the parameter and buffer counts of its meta-device models.
func TestGemma3nText(t *testing.T) {
	for _, c := range []struct {
		name, json      string
		params          int64
		buffers, shared int
	}{
		// transformers 5.23.0: Gemma3nTextConfig(**config),
		// AutoModelForCausalLM.from_config under torch.device("meta"),
		// sum(p.numel() for p in model.parameters()); the buffers are
		// 1 + layers + 4 rotary + 3 (the inventory's 43 for the defaults).
		{"the class's defaults", `{"model_type": "gemma3n_text"}`, 6835235568, 43, 15},
		{"small, five layers sharing keys and values", `{"model_type": "gemma3n_text", ` + gemma3nSmall + `, "num_kv_shared_layers": 5}`, 557464, 18, 5},
		{"small, untied, biased, intermediate_size per layer, no sharing", `{"model_type": "gemma3n_text", ` +
			strings.Replace(gemma3nSmall, `"intermediate_size": 128`, `"intermediate_size": [128, 128, 128, 128, 128, 128, 128, 128, 128, 128]`, 1) +
			`, "num_kv_shared_layers": 0, "tie_word_embeddings": false, "attention_bias": true}`, 644024, 18, 0},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if m.ParamCount() != c.params || len(m.Buffers()) != c.buffers || m.KVSharedLayers != c.shared {
			t.Errorf("%s: %d parameters, %d buffers, %d shared layers; transformers 5.23 builds %d, %d, %d", c.name, m.ParamCount(), len(m.Buffers()), m.KVSharedLayers, c.params, c.buffers, c.shared)
		}
		// The shared layers' k/v projections and k_norm are stored only.
		if got, want := int64(0), int64(c.shared)*(2*int64(m.Hidden)*int64(m.KVHeads*m.HeadDim)+int64(m.HeadDim)); true {
			for _, x := range m.storedOnly() {
				got += x.Numel()
			}
			if got != want {
				t.Errorf("%s: %d stored-only elements, want %d", c.name, got, want)
			}
		}
		raw, _ := json.Marshal(m.HFConfig())
		back, err := FromHFConfig(raw)
		if err != nil || back.ParamCount() != m.ParamCount() || len(back.Buffers()) != len(m.Buffers()) {
			t.Errorf("%s: the engine's config read back: %v", c.name, err)
		}
	}
	if m := MustPreset("gemma-3n-e4b-text"); m.ParamCount() != 6835235568 {
		t.Errorf("gemma-3n-e4b-text: %d parameters, the inventory's total is 6835235568", m.ParamCount())
	}
}

// TestGemma3nTextDefaults: a key left out takes Gemma3nTextConfig's
// default (configuration_gemma3n.py l.96-127).
func TestGemma3nTextDefaults(t *testing.T) {
	m, err := FromHFConfig([]byte(`{"model_type": "gemma3n_text"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Model{Layers: 35, Hidden: 2048, FFN: 16384, Heads: 8, KVHeads: 2, HeadDim: 256, Vocab: 262400, MaxPosition: 32768,
		SlidingWindow: 512, GlobalEvery: 5, FinalSoftcap: 30, PerLayerInput: 256, PerLayerVocab: 262144, AltUpInputs: 4, LaurelRank: 64, KVSharedLayers: 15, SparseLayers: 10}
	got := Model{Layers: m.Layers, Hidden: m.Hidden, FFN: m.FFN, Heads: m.Heads, KVHeads: m.KVHeads, HeadDim: m.HeadDim, Vocab: m.Vocab, MaxPosition: m.MaxPosition,
		SlidingWindow: m.SlidingWindow, GlobalEvery: m.GlobalEvery, FinalSoftcap: m.FinalSoftcap, PerLayerInput: m.PerLayerInput, PerLayerVocab: m.PerLayerVocab,
		AltUpInputs: m.AltUpInputs, LaurelRank: m.LaurelRank, KVSharedLayers: m.KVSharedLayers, SparseLayers: m.SparseLayers}
	if got != want || !m.TiedEmbeddings || m.Bias == BiasAttn {
		t.Errorf("the class's defaults read as %+v (tied %v, bias %q); want %+v, tied, no bias", got, m.TiedEmbeddings, m.Bias, want)
	}
}

// TestGemma3nTextErrors: what the engine refuses, each naming the key.
func TestGemma3nTextErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`"intermediate_size": [128, 256]`, "intermediate_size"},
		{`"hidden_activation": "silu"`, "hidden_activation"},
		{`"rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 2.0}}`, "rope_type"},
		{`"altup_active_idx": 4`, "altup_active_idx"},
		{`"num_kv_shared_layers": 31`, "kv_shared_layers"},
		{`"num_kv_shared_layers": 35`, "kv_shared_layers"},
		{`"final_logit_softcapping": 0.0`, "final_softcap"},
		{`"laurel_rank": 0`, "laurel_rank"},
		{`"layer_types": ["full_attention"]`, "layer_types"},
		{`"activation_sparsity_pattern": [0.95]`, "activation_sparsity_pattern"},
		{`"num_hidden_layers": 3, "num_kv_shared_layers": 0, "activation_sparsity_pattern": [0.95, 0.0, 0.95]`, "activation_sparsity_pattern[2]"},
		{`"num_hidden_layers": 2, "num_kv_shared_layers": 0, "activation_sparsity_pattern": [1.0, 0.0]`, "activation_sparsity_pattern[0]"},
		{`"num_hidden_layers": 65, "num_kv_shared_layers": 0`, "at most 64"},
	} {
		_, err := FromHFConfig([]byte(`{"model_type": "gemma3n_text", ` + c.json + `}`))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.json, err, c.want)
		}
	}
	if _, err := FromHFConfig([]byte(`{"model_type": "gemma3_text", "hidden_size": 64}`)); err != nil {
		t.Fatal(err)
	}
	m := MustPreset("gemma-3-4b-text")
	m.AltUpInputs = 4
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "altup_inputs") {
		t.Errorf("altup_inputs on gemma3_text: %v, want an error naming it", err)
	}
}

// TestGemma3nTextSparseLayers: activation_sparsity_pattern read as the
// run of first layers whose MLP takes the Gaussian top-k, the class's
// default (ten sparse layers where there are more than ten,
// configuration_gemma3n.py l.152-156) where the key is missing or null;
// the HF config written back sparsifies the same layers.
func TestGemma3nTextSparseLayers(t *testing.T) {
	for _, c := range []struct {
		json   string
		sparse int
	}{
		{`"num_hidden_layers": 35`, 10},
		{`"num_hidden_layers": 10, "num_kv_shared_layers": 5`, 0},
		{`"num_hidden_layers": 12, "num_kv_shared_layers": 5, "activation_sparsity_pattern": null`, 10},
		{`"num_hidden_layers": 4, "num_kv_shared_layers": 0, "activation_sparsity_pattern": [0.95, 0.9, 0.0, 0.0]`, 2},
		{`"num_hidden_layers": 3, "num_kv_shared_layers": 0, "activation_sparsity_pattern": [0.0, 0.0, 0.0]`, 0},
	} {
		m, err := FromHFConfig([]byte(`{"model_type": "gemma3n_text", ` + c.json + `}`))
		if err != nil {
			t.Errorf("%s: %v", c.json, err)
			continue
		}
		raw, err := json.Marshal(m.HFConfig())
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromHFConfig(raw)
		if err != nil || m.SparseLayers != c.sparse || back.SparseLayers != c.sparse {
			t.Errorf("%s: %d sparse layers, %d read back (%v); want %d", c.json, m.SparseLayers, back.SparseLayers, err, c.sparse)
		}
	}
}

// TestGemma3nTextReleases: training is modelled at transformers 5.23
// only, a plan naming no release taking it with a note; 4.x's training
// (its KV-shared layers projecting their own keys and values) is refused.
func TestGemma3nTextReleases(t *testing.T) {
	for _, c := range []struct {
		release, want string
	}{
		{"", "modelled at 5.23.0"},
		{"4.57.6", "not as 4.x does"},
	} {
		est, err := Training{Model: MustPreset("gemma-3n-e4b-text"), SeqLen: 256, MicroBatch: 1, Transformers: c.release}.Estimate()
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = strings.Join(est.Notes, "; ")
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("transformers %q: %q, want it to say %q", c.release, got, c.want)
		}
	}
}

// TestGemma3nTextServing: vLLM serves the E4B's language model on an
// H100; a page is 16 tokens × K and V × 2 key/value heads × 256 × 2
// bytes. The last 15 layers read earlier layers' keys and values and vLLM
// gives them no cache: 20 of E4B's 35 layers are pooled, 16 sliding and 4
// global (every fifth).
func TestGemma3nTextServing(t *testing.T) {
	v, err := VLLM{Version: "0.33.0", MaxModelLen: 32768}.Carve(Inference{Model: MustPreset("gemma-3n-e4b-text")}, mustGPU("H100-80GB"))
	if err != nil {
		t.Fatal(err)
	}
	if k := v.KVCache; k.PageBytes != 16*2*2*256*2 || k.BlockSize != 16 || !v.Starts {
		t.Errorf("page %v, block %d, starts %v; want %d, 16, true", k.PageBytes, k.BlockSize, v.Starts, 16*2*2*256*2)
	}
	kinds := map[string]int{}
	for _, g := range v.KVCache.kinds {
		kinds[g.Kind] += g.Layers
	}
	if kinds["sliding_window"] != 16 || kinds["full"] != 4 {
		t.Errorf("cache layers by kind %v; want 16 sliding, 4 full", kinds)
	}
}
