package vram

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// dsv4Small is a small DeepseekV4Config as a config.json fragment, in the
// checkpoint's legacy keys (compress_ratios, num_hash_layers,
// qk_rope_head_dim): layer 0 sliding, 1 and 3 CSA, 2 HCA; 2 hash layers.
const dsv4Small = `"vocab_size": 1000, "hidden_size": 64, "moe_intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 32, "q_lora_rank": 48, "o_groups": 2, "o_lora_rank": 16, "n_routed_experts": 8, "num_experts_per_tok": 2, "index_n_heads": 4, "index_head_dim": 16, "sliding_window": 8, "hc_mult": 2, "compress_ratios": [0, 4, 128, 4], "num_hash_layers": 2, "qk_rope_head_dim": 8`

// TestDeepseekV4: DeepSeek-V4 as transformers 5.23 builds it — the
// parameter counts and buffer sizes of its meta-device models (small
// configs, the keys it reads and those it ignores, the class's defaults),
// and what is refused.
func TestDeepseekV4(t *testing.T) {
	fallback := strings.Replace(strings.Replace(dsv4Small, `"compress_ratios": [0, 4, 128, 4], "num_hash_layers": 2, `, "", 1), `"num_hidden_layers": 4`, `"num_hidden_layers": 5`, 1)
	nested := strings.Replace(dsv4Small, `, "qk_rope_head_dim": 8`, `, "rope_parameters": {"main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}, "compress": {"rope_type": "default", "rope_theta": 160000.0, "partial_rotary_factor": 0.5}}`, 1)
	for _, c := range []struct {
		name, json      string
		params, buffers int64
	}{
		// transformers 5.23.0: AutoConfig.for_model("deepseek_v4", **json),
		// AutoModelForCausalLM.from_config under torch.device("meta"),
		// sum(p.numel() for p in model.parameters()) and the same over
		// model.buffers().
		{"small", `{` + dsv4Small + `}`, 462443, 4112},
		{"tied, mlp_bias", `{` + dsv4Small + `, "tie_word_embeddings": true, "mlp_bias": true}`, 398955, 4112},
		{"keys that build nothing", `{` + dsv4Small + `, "num_key_value_heads": 4, "n_shared_experts": 3, "attention_bias": true}`, 462443, 4112},
		{"attribute_map names win", `{` + dsv4Small + `, "intermediate_size": 48, "num_local_experts": 6}`, 498795, 4108},
		{"layer_types over compress_ratios", `{` + dsv4Small + `, "layer_types": ["heavily_compressed_attention", "sliding_attention", "compressed_sparse_attention", "compressed_sparse_attention"], "mlp_layer_types": ["moe", "hash_moe", "moe", "hash_moe"], "compress_rates": {"compressed_sparse_attention": 2, "heavily_compressed_attention": 16}, "hc_mult": 3}`, 473700, 4112},
		{"legacy rates", `{` + dsv4Small + `, "compress_rate_csa": 8, "compress_rate_hca": 32}`, 460139, 4112},
		{"longer lists are cut", `{` + dsv4Small + `, "compress_ratios": [0, 4, 128, 4, 0], "mlp_layer_types": ["hash_moe", "moe", "moe", "moe", "moe"]}`, 462443, 2120},
		{"the class's fallback kinds", `{` + fallback + `}`, 544517, 6128},
		{"rope_parameters nested as transformers saves them", `{` + nested + `}`, 462443, 4208},
		{"the class's defaults", `{"model_type": "deepseek_v4"}`, 284325869015, 2345472},
	} {
		js := strings.Replace(c.json, `{`, `{"model_type": "deepseek_v4", `, 1)
		m, err := FromHFConfig([]byte(js))
		var bufs int64
		for _, b := range m.Buffers() {
			bufs += b.Shape[0] * max(1, prod(b.Shape[1:]))
		}
		if err != nil || m.ParamCount() != c.params || bufs != c.buffers {
			t.Errorf("%s: %d parameters, %d buffer elements, %v; transformers 5.23 builds %d and %d", c.name, m.ParamCount(), bufs, err, c.params, c.buffers)
		}
	}
	testDeepseekV4Defaults(t)
	testDeepseekV4Rules(t)
}

// prod multiplies a shape's dimensions (1 for none).
func prod(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

// testDeepseekV4Defaults: a key config.json leaves out takes
// DeepseekV4Config's default (configuration_deepseek_v4.py:128-180), and
// the layer kinds its __post_init__ falls back to (HCA at 0, 1, 2 and the
// even layers, CSA at the odd ones from 3; hash routing in the first 3).
func testDeepseekV4Defaults(t *testing.T) {
	t.Helper()
	m, _ := FromHFConfig([]byte(`{"model_type": "deepseek_v4"}`))
	c := *m.Compressed
	got := m
	got.Family, got.Name, got.Compressed, got.Origin, got.Release = "", "", nil, nil, nil
	want := Model{Layers: 43, Hidden: 4096, Heads: 64, KVHeads: 1, HeadDim: 512, FFN: 2048, Vocab: 129280, MaxPosition: 1048576,
		Experts: 256, ExpertsPerToken: 6, SharedExperts: 1, ExpertFFN: 2048, SharedExpertFFN: 2048,
		QLoRARank: 1024, IndexHeads: 64, IndexHeadDim: 128, SlidingWindow: 128, RotaryPct: 0.125, MTPLayers: 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("class defaults: %+v", got)
	}
	if c.CSARate != 4 || c.HCARate != 128 || c.Streams != 4 || c.OGroups != 8 || c.OLoRARank != 1024 ||
		!slices.Equal(c.Hash, []int{0, 1, 2}) || len(c.CSA) != 20 || c.CSA[0] != 3 || len(c.HCA) != 23 || c.HCA[2] != 2 || c.HCA[3] != 4 {
		t.Errorf("class defaults: %+v", c)
	}
}

// testDeepseekV4Rules: what transformers refuses or cannot build, and what
// the engine does not model, is refused naming the key or field.
func testDeepseekV4Rules(t *testing.T) {
	t.Helper()
	for _, c := range []struct{ name, keys, want string }{
		{"hidden_act", `, "hidden_act": "gelu"`, "hidden_act"},
		{"scoring_func softmax (no ACT2FN entry)", `, "scoring_func": "softmax"`, "scoring_func"},
		{"a compress ratio transformers has no kind for", `, "compress_ratios": [0, 4, 2, 4]`, "compress_ratios[2]"},
		{"layer_types shorter than the layers", `, "layer_types": ["sliding_attention"]`, "layer_types lists 1"},
		{"a layer kind", `, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]`, "layer_types[1]"},
		{"an MLP kind", `, "mlp_layer_types": ["moe", "dense", "moe", "moe"]`, "mlp_layer_types[1]"},
		{"compress_rates without the HCA rate", `, "compress_rates": {"compressed_sparse_attention": 4}`, "heavily_compressed_attention"},
		{"o_groups that do not split the heads", `, "o_groups": 3`, "o_groups = 3"},
		{"an indexer narrower than the rotary part", `, "index_head_dim": 4`, "index_head_dim = 4"},
		{"two rotary widths", `, "rope_parameters": {"main": {"partial_rotary_factor": 0.5}, "compress": {"partial_rotary_factor": 0.25}}`, "partial_rotary_factor"},
	} {
		if _, err := FromHFConfig([]byte(`{"model_type": "deepseek_v4", ` + dsv4Small + c.keys + `}`)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	small, _ := FromHFConfig([]byte(`{"model_type": "deepseek_v4", ` + dsv4Small + `}`))
	for _, c := range []struct {
		name   string
		change func(m *Model)
		want   string
	}{
		{"two kv heads", func(m *Model) { m.KVHeads = 2 }, "kv_heads = 2"},
		{"no compressed block", func(m *Model) { m.Compressed = nil }, "needs model.compressed"},
		{"a layer both CSA and HCA", func(m *Model) { m.Compressed.HCA = []int{1, 2} }, "both csa_layers and hca_layers"},
		{"a layer out of range", func(m *Model) { m.Compressed.Hash = []int{0, 4} }, "hash_layers[1] = 4"},
		{"no streams", func(m *Model) { m.Compressed.Streams = 0 }, "hc_mult = 0"},
		{"two shared experts", func(m *Model) { m.SharedExperts = 2 }, "n_shared_experts builds nothing"},
		{"a latent kv", func(m *Model) { m.KVLoRARank = 32 }, "kv_lora_rank"},
	} {
		m := small.clone()
		c.change(&m)
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	llama := MustPreset("llama-3-8b")
	llama.Compressed = small.clone().Compressed
	if err := llama.Validate(); err == nil || !strings.Contains(err.Error(), "model.compressed") {
		t.Errorf("compressed on a llama: %v", err)
	}
}

// TestDeepseekV4Flash: the catalog's DeepSeek-V4-Flash — its parameters
// (transformers 5.23 on the meta device: 284,332,230,231), the
// checkpoint's layer kinds, the config it writes and reads back, what
// the checkpoint stores besides, and the plans refused in words: its
// transformers forward is not modelled, so training is refused; the
// serving engines' caches are vllm_compressed_test.go's.
func TestDeepseekV4Flash(t *testing.T) {
	m := MustPreset("deepseek-v4-flash")
	c := m.Compressed
	if m.ParamCount() != 284332230231 || len(c.CSA) != 21 || len(c.HCA) != 20 || c.CSA[0] != 2 || c.HCA[0] != 3 || c.kind(0) != "sliding_attention" || c.kind(1) != "sliding_attention" {
		t.Errorf("%d parameters, CSA %v, HCA %v", m.ParamCount(), c.CSA, c.HCA)
	}
	b, _ := json.Marshal(m.HFConfig())
	back, err := FromHFConfig(b)
	if err != nil || back.ParamCount() != m.ParamCount() || !slices.Equal(back.Compressed.CSA, c.CSA) || !slices.Equal(back.Compressed.HCA, c.HCA) || !slices.Equal(back.Compressed.Hash, c.Hash) {
		t.Errorf("HFConfig round trip: %v, %d parameters, %+v", err, back.ParamCount(), back.Compressed)
	}
	// The checkpoint's compress_ratios (44 entries, the last the MTP
	// layer's) read as transformers reads them: cut to 43 layers.
	ratios := []int{0, 0}
	for range 20 {
		ratios = append(ratios, 4, 128)
	}
	ratios = append(ratios, 4, 0)
	js, _ := json.Marshal(map[string]any{"model_type": "deepseek_v4", "compress_ratios": ratios, "num_hash_layers": 3})
	if hub, err := FromHFConfig(js); err != nil || hub.ParamCount() != m.ParamCount() {
		t.Errorf("the checkpoint's compress_ratios: %d parameters, %v", hub.ParamCount(), err)
	}
	// Stored besides: 40 routers' fp32 biases, 3 hash tables (int64 as
	// transformers keeps them) and the MTP layer, 6,610,048,891 numbers as
	// the engine lists it (a third-party diagram of the release gives
	// 6.61B), sliding-window attention without a compressor.
	var mtp int64
	var tables, biases, compressors int
	for _, x := range m.storedOnly() {
		switch {
		case strings.HasPrefix(x.Name, "mtp.0."):
			mtp += x.Numel()
			if strings.Contains(x.Name, "compressor") {
				compressors++
			}
		case strings.HasSuffix(x.Name, "tid2eid") && x.DType == INT64:
			tables++
		case strings.HasSuffix(x.Name, "e_score_correction_bias") && x.DType == FP32:
			biases++
		}
	}
	if mtp != 6610048891 || tables != 3 || biases != 40 || compressors != 0 {
		t.Errorf("stored besides: MTP %d, %d tables, %d biases, %d compressor tensors", mtp, tables, biases, compressors)
	}
	if _, err := (Training{Model: m, SeqLen: 512, MicroBatch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("training: %v", err)
	}
	// vLLM 0.33 and SGLang 0.5.23 serve it: vllm_compressed_test.go.
	if _, err := (LlamaCpp{}).KVCache(m); err == nil || !strings.Contains(err.Error(), "compressed attention") {
		t.Errorf("llama.cpp: %v", err)
	}
}
