package vram

import (
	"encoding/json"
	"strings"
	"testing"
)

// gemma4Small are a small Gemma 4 text_config (six layers, the last
// global) and vision_config.
const (
	gemma4SmallText   = `"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "hidden_size_per_layer_input": 0`
	gemma4SmallVision = `"vision_config": {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 8, "position_embedding_size": 64}`
	// gemma4SmallShared makes gemma4SmallText's layers 2 and 5 global, so
	// that the last layers may share keys and values of either kind.
	gemma4SmallShared = `"global_head_dim": 32, "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"]`
)

// TestGemma4: Gemma 4 as transformers 5.23 builds it — the parameter and
// buffer counts of its meta-device models for small configs and for the
// classes' defaults.
func TestGemma4(t *testing.T) {
	four := strings.Replace(gemma4SmallText, `"num_hidden_layers": 6`, `"num_hidden_layers": 4`, 1)
	ple := strings.Replace(gemma4SmallText, `"hidden_size_per_layer_input": 0`, `"hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 500`, 1)
	for _, c := range []struct {
		name, json       string
		params           int64
		buffers, globals int
	}{
		// transformers 5.23.0: AutoConfig.for_model(model_type, **config),
		// AutoModelForImageTextToText (gemma4) or AutoModelForCausalLM
		// (gemma4_text) .from_config under torch.device("meta"),
		// sum(p.numel() for p in model.parameters()),
		// len(list(model.named_buffers())).
		{"text: the class's defaults", `{"model_type": "gemma4_text"}`, 5077177856, 36, 5},
		{"wrapper: the class's defaults (no tower)", `{"model_type": "gemma4"}`, 5077177856, 36, 5},
		{"small", `{"model_type": "gemma4", "text_config": {` + gemma4SmallText + `, "global_head_dim": 32}, ` + gemma4SmallVision + `}`, 347712, 13, 1},
		{"attention_k_eq_v", `{"model_type": "gemma4", "text_config": {` + gemma4SmallText + `, "global_head_dim": 32, "attention_k_eq_v": true, "num_global_key_value_heads": 1}, ` + gemma4SmallVision + `}`, 341568, 13, 1},
		{"experts, per-layer embeddings, biases, untied", `{"model_type": "gemma4", "tie_word_embeddings": false, "text_config": {` + ple +
			`, "attention_bias": true, "enable_moe_block": true, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 24}, ` + gemma4SmallVision + `}`, 933728, 14, 1},
		{"per_layer_config", `{"model_type": "gemma4", "text_config": {` + gemma4SmallText + `, "per_layer_config": {"5": {"head_dim": 32, "num_key_value_heads": 1}}}, ` + gemma4SmallVision + `}`, 343616, 13, 1},
		{"layer_types, the last forced global", `{"model_type": "gemma4", "text_config": {` + four +
			`, "global_head_dim": 32, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]}, ` + gemma4SmallVision + `}`, 285728, 11, 2},
		{"four layers, the class's pattern", `{"model_type": "gemma4", "text_config": {` + four + `, "global_head_dim": 32}, ` + gemma4SmallVision + `}`, 273408, 11, 1},
		// The small releases' mechanisms on per-layer embeddings, layers
		// 2 and 5 global.
		{"KV-shared layers", `{"model_type": "gemma4_text", ` + ple + `, ` + gemma4SmallShared + `, "num_kv_shared_layers": 2}`, 332888, 12, 2},
		{"KV-shared layers, double-wide MLPs", `{"model_type": "gemma4_text", ` + ple + `, ` + gemma4SmallShared + `, "num_kv_shared_layers": 3, "use_double_wide_mlp": true}`, 402504, 12, 2},
		{"KV-shared layers, double-wide MLPs, keys as values", `{"model_type": "gemma4_text", ` + ple + `, ` + gemma4SmallShared +
			`, "num_kv_shared_layers": 3, "use_double_wide_mlp": true, "attention_k_eq_v": true, "num_global_key_value_heads": 1}`, 396360, 12, 2},
		{"double-wide MLPs without KV-shared layers", `{"model_type": "gemma4_text", ` + gemma4SmallText + `, ` + gemma4SmallShared + `, "use_double_wide_mlp": true}`, 311616, 11, 2},
		{"KV-shared layers in the image-text model", `{"model_type": "gemma4", "text_config": {` + gemma4SmallText + `, ` + gemma4SmallShared + `, "num_kv_shared_layers": 2}, ` + gemma4SmallVision + `}`, 347696, 13, 2},
		{"the tower's defaults, standardized, clipped", `{"model_type": "gemma4", "text_config": {` + gemma4SmallText + `}, "vision_config": {"standardize": true, "use_clipped_linears": true}}`, 168082656, 463, 1},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		globals := 0
		for i := 0; i < m.Layers; i++ {
			if !m.LocalLayer(i) {
				globals++
			}
		}
		if m.ParamCount() != c.params || len(m.Buffers()) != c.buffers || globals != c.globals {
			t.Errorf("%s: %d parameters, %d buffers, %d global layers; transformers 5.23 builds %d, %d, %d", c.name, m.ParamCount(), len(m.Buffers()), globals, c.params, c.buffers, c.globals)
		}
		// The engine's own config builds the same model.
		raw, _ := json.Marshal(m.HFConfig())
		back, err := FromHFConfig(raw)
		if err != nil || back.ParamCount() != m.ParamCount() || len(back.Buffers()) != len(m.Buffers()) {
			t.Errorf("%s: the engine's config read back: %v", c.name, err)
		}
	}
}

// TestGemma4Presets: the presets are the released configs; the round trip
// through the engine's config keeps them.
func TestGemma4Presets(t *testing.T) {
	for name, want := range map[string]int64{
		// The inventories' totals (testdata/inventory).
		"gemma-4-31b": 31273086512, "gemma-4-26b-a4b": 25805933872,
		"gemma-4-31b-text": 30697345280, "gemma-4-26b-a4b-text": 25233141760,
	} {
		m := MustPreset(name)
		raw, _ := json.Marshal(m.HFConfig())
		back, err := FromHFConfig(raw)
		if err != nil || m.ParamCount() != want || back.ParamCount() != want {
			t.Errorf("%s: %d parameters (read back %d, %v), want %d", name, m.ParamCount(), back.ParamCount(), err, want)
		}
		if m.Vision != nil && m.Vision.ImageTokens() != 256 {
			t.Errorf("%s: %d tokens an image, want 256 (48 × 48 patches pooled 3 × 3)", name, m.Vision.ImageTokens())
		}
	}
	// 26B-A4B: 128 experts of 704 a layer, 8 a token, beside the dense MLP.
	m := MustPreset("gemma-4-26b-a4b")
	experts := int64(30) * 128 * 3 * 704 * 2816
	if got := m.ParamCount() - m.ActiveParamCount(); got != experts-experts*8/128 {
		t.Errorf("26B-A4B: %d parameters a token does not pass through, want %d", got, experts-experts*8/128)
	}
}

// TestGemma4ConfigDefaults: a key config.json leaves out takes
// Gemma4TextConfig's or Gemma4VisionConfig's default, the top level's
// tie_word_embeddings decides, and released configs' keys are read.
func TestGemma4ConfigDefaults(t *testing.T) {
	m, err := FromHFConfig([]byte(`{"model_type": "gemma4", "text_config": {"tie_word_embeddings": false}, "vision_config": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	tw := m.Vision.Tower
	if m.Layers != 30 || m.Hidden != 2304 || m.FFN != 9216 || m.Heads != 8 || m.KVHeads != 4 || m.HeadDim != 256 || m.Vocab != 262144 ||
		m.MaxPosition != 131072 || m.SlidingWindow != 512 || m.GlobalEvery != 6 || m.GlobalHeadDim != 512 || m.GlobalKVHeads != 4 || m.GlobalKEqV ||
		m.PerLayerInput != 256 || m.PerLayerVocab != 262144 || m.FinalSoftcap != 0 || !m.TiedEmbeddings || m.Experts != 0 || m.Normalize().Bias != BiasNone {
		t.Errorf("text defaults: %+v", m)
	}
	if im := tw.Image; tw.Layers != 16 || tw.Hidden != 768 || tw.FFN != 3072 || tw.Heads != 12 || tw.KVHeads != 12 || tw.HeadDim != 64 ||
		im.Patch != 16 || im.Merge != 3 || im.PositionTable != 10240 || im.Size != 768 || im.Standardize || im.ClippedLinears {
		t.Errorf("tower defaults: %+v %+v", tw, *im)
	}
	// attention_k_eq_v without num_global_key_value_heads keeps the
	// local layers' KV heads (no override, l.215-217); without the flag
	// num_global_key_value_heads is ignored.
	for _, c := range []struct {
		keys string
		kv   int
	}{{`"attention_k_eq_v": true`, 2}, {`"num_global_key_value_heads": 1`, 2}, {`"attention_k_eq_v": true, "num_global_key_value_heads": 1`, 1}} {
		m, err := FromHFConfig([]byte(`{"model_type": "gemma4_text", ` + gemma4SmallText + `, ` + c.keys + `}`))
		if err != nil || m.GlobalKVHeads != c.kv {
			t.Errorf("%s: global KV heads %d, want %d (%v)", c.keys, m.GlobalKVHeads, c.kv, err)
		}
	}
}

// TestGemma4ConfigErrors: each config transformers would refuse, or the
// engine does not model, is an error naming the key.
func TestGemma4ConfigErrors(t *testing.T) {
	text := `{"model_type": "gemma4", "text_config": {` + gemma4SmallText
	for _, c := range []struct{ name, json, want string }{
		{"audio without vision", `{"model_type": "gemma4", "audio_config": {}}`, "audio_config without vision_config"},
		{"double-wide MLPs beside experts", text + `, ` + gemma4SmallShared + `, "num_kv_shared_layers": 2, "use_double_wide_mlp": true, "enable_moe_block": true, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 24}}`, "double_wide_mlp"},
		{"KV-shared layers with no global layer before them", text + `, "num_kv_shared_layers": 2}}`, "every kind"},
		{"activation", text + `, "hidden_activation": "silu"}}`, "hidden_activation"},
		{"bidirectional text", text + `, "use_bidirectional_attention": "all"}}`, "use_bidirectional_attention"},
		{"experts without their sizes", text + `, "enable_moe_block": true, "num_experts": 4}}`, "top_k_experts"},
		{"a layer kind", text + `, "layer_types": ["sliding_attention", "chunked_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]}}`, "layer_types[1]"},
		{"an unperiodic pattern", strings.Replace(text, `"num_hidden_layers": 6`, `"num_hidden_layers": 8`, 1) + `}}`, "layer_types"},
		{"per_layer_config on a local layer", text + `, "per_layer_config": {"0": {"head_dim": 32}, "5": {"head_dim": 32}}}}`, "per_layer_config[0]"},
		{"per_layer_config past the layers", text + `, "per_layer_config": {"5": {"head_dim": 32}, "9": {}}}}`, "per_layer_config names layers"},
		{"per_layer_config's other keys", text + `, "per_layer_config": {"5": {"sliding_window": 32}}}}`, "sliding_window"},
		{"rope type", text + `, "rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 8}}}}`, "rope_type"},
		{"global KV heads", text + `, "attention_k_eq_v": true, "num_global_key_value_heads": 3}}`, "global_kv_heads = 3"},
		{"tower activation", `{"model_type": "gemma4", "vision_config": {"hidden_activation": "silu"}}`, "hidden_activation"},
		{"position table", `{"model_type": "gemma4", "vision_config": {"position_embedding_size": 8}}`, "position_embedding_size"},
	} {
		if _, err := FromHFConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.want)
		}
	}
	m := MustPreset("gemma-4-31b-text")
	m.Family = "gemma3_text"
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "global_head_dim") {
		t.Errorf("global layers on another family: %v", err)
	}
	m = MustPreset("gemma-4-31b-text")
	m.Layers = 61
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "last layer is global") {
		t.Errorf("a local last layer: %v", err)
	}
}

// TestGemma4Serving: the image-text model's training and the language
// model's follow transformers 5.23 (traced at 5.23.0), their generate
// refused; vLLM pages the 31B's
// and the 26B-A4B's layers on an H100 as the engine sizes them, every layer
// as the local ones, and says so.
func TestGemma4Serving(t *testing.T) {
	for _, n := range []string{"gemma-4-31b", "gemma-4-31b-text", "gemma-4-26b-a4b-text"} {
		text := MustPreset(n)
		if est, err := (Training{Model: text, SeqLen: 1024, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
			t.Errorf("%s: training: %v, notes %q", n, err, est.Notes)
		}
		if _, err := (Inference{Model: text, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
			t.Errorf("%s: generate: %v", n, err)
		}
	}
	m, err := FromHFConfig([]byte(`{"model_type": "gemma4"}`))
	if err != nil || m.Family != "gemma4_text" || m.Vision != nil || m.Origin == nil || !strings.Contains(m.Origin.Notes[0], "vision_config") {
		t.Errorf("a config without vision_config: family %s, origin %+v, %v", m.Family, m.Origin, err)
	}
	for _, c := range []struct {
		preset        string
		page          Bytes
		sliding, full int // the layers of each kind
		groupSize     int
		starts        bool
	}{
		// A page is 16 tokens × K and V × the local layers' KV heads ×
		// 256 × 2 bytes; 0.33 groups the layers by the smaller kind's
		// count (the larger one is not under 1.5 × it). The 31B's 58 GiB
		// of weights leave 6.5 GiB, short of a 32,768-token request.
		{"gemma-4-31b", 16 * 2 * 16 * 256 * 2, 50, 10, 10, false},
		{"gemma-4-26b-a4b", 16 * 2 * 8 * 256 * 2, 25, 5, 5, true},
	} {
		v, err := VLLM{Version: "0.33.0", MaxModelLen: 32768}.Carve(Inference{Model: MustPreset(c.preset)}, mustGPU("H100-80GB"))
		if err != nil {
			t.Errorf("%s: %v", c.preset, err)
			continue
		}
		k := v.KVCache
		sliding, full := 0, 0
		for _, g := range k.kinds {
			switch g.Kind {
			case "sliding_window":
				sliding += g.Layers
			case "full":
				full += g.Layers
			}
		}
		noted := false
		for _, n := range k.Notes {
			noted = noted || strings.Contains(n, "the global layers have")
		}
		if k.PageBytes != c.page || k.BlockSize != 16 || sliding != c.sliding || full != c.full || k.GroupSize != c.groupSize || v.Starts != c.starts || !noted {
			t.Errorf("%s: page %v, block %d, %d sliding and %d full layers in groups of %d, starts %v, noted %v; want %v, 16, %d, %d, %d, %v, true",
				c.preset, k.PageBytes, k.BlockSize, sliding, full, k.GroupSize, v.Starts, noted, c.page, c.sliding, c.full, c.groupSize, c.starts)
		}
	}
}

// TestGemma4KVShared: a Gemma 4 with KV-shared layers plans its training
// (traced at 5.23.0), and vLLM gives the shared layers no cache (their
// Attention's kv_sharing_target_layer_name, vLLM's
// model_executor/models/gemma4.py Gemma4Attention): of 12 layers (every
// sixth global) with the last 4 shared, 7 sliding-window layers and 1
// global one are pooled.
func TestGemma4KVShared(t *testing.T) {
	twelve := strings.Replace(gemma4SmallText, `"num_hidden_layers": 6`, `"num_hidden_layers": 12`, 1)
	m, err := FromHFConfig([]byte(`{"model_type": "gemma4_text", ` + twelve + `, "num_kv_shared_layers": 4, "use_double_wide_mlp": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if est, err := (Training{Model: m, SeqLen: 256, MicroBatch: 1, Checkpointing: CheckpointFull}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v, notes %q", err, est.Notes)
	}
	v, err := VLLM{MaxModelLen: 4096}.Carve(Inference{Model: m}, mustGPU("H100-80GB"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, g := range v.KVCache.kinds {
		kinds[g.Kind] += g.Layers
	}
	if kinds["sliding_window"] != 7 || kinds["full"] != 1 {
		t.Errorf("cache layers by kind %v; want 7 sliding, 1 full", kinds)
	}
}
