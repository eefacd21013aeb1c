package vram

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Published exact parameter counts. Sources:
//   - gpt2 124,439,808: GPT2LMHeadModel(config).num_parameters() (tied head
//     counted once), the figure the HF model card and nanoGPT quote as 124M.
//   - bert-large-uncased 335,141,888: BertModel with pooler, no task head.
//   - Llama-2-7b 6,738,415,616, Meta-Llama-3-8B 8,030,261,248,
//     Mixtral-8x7B 46,702,792,704: metadata.total_size / 2 of each
//     checkpoint's model.safetensors.index.json (bf16 shards).
//   - Qwen2.5-7B 7,615,616,512: the Qwen2.5 model card ("Number of
//     Parameters: 7.61B") and its index total_size / 2.
func TestExactParameterCounts(t *testing.T) {
	for _, tc := range []struct {
		preset string
		want   int64
	}{
		{"gpt2", 124439808},
		{"bert-large-uncased", 335141888},
		{"llama-2-7b", 6738415616},
		{"llama-3-8b", 8030261248},
		{"mixtral-8x7b", 46702792704},
		{"qwen2.5-7b", 7615616512},
		{"pythia-410m", 405334016},
		{"opt-350m", 331196416},
		{"phi-1.5", 1418270720},
		{"gpt-j-6b", 6050882784},
		{"gpt-neox-20b", 20554567680},
		{"llama-2-70b", 68976648192},
		{"llama-3.1-70b", 70553706496},
	} {
		m := MustPreset(tc.preset)
		if got := m.ParamCount(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (diff %d)", tc.preset, got, tc.want, got-tc.want)
		}
	}
}

// TestCatalog: every preset is valid, cites its config and is counted
// consistently with its stated total.
func TestCatalog(t *testing.T) {
	if n := len(Presets()); n < 30 {
		t.Errorf("catalog has %d presets, want at least 30", n)
	}
	for _, name := range Presets() {
		p, _ := LookupPreset(name)
		if err := p.Model.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		// A config.json on the Hub, or a transformers config class whose
		// defaults are the preset (a family whose released shapes no
		// source here gives).
		if !strings.HasPrefix(p.Source, "https://huggingface.co/") && !strings.HasPrefix(p.Source, "https://github.com/huggingface/transformers/blob/") {
			t.Errorf("%s: source %q is not a config URL", name, p.Source)
		}
	}
	if _, err := LookupPreset("meta-llama/Llama-2-7b-hf"); err != nil {
		t.Errorf("lookup by Hugging Face id: %v", err)
	}
	if _, err := LookupPreset("llama-7"); err == nil || !strings.Contains(err.Error(), `did you mean "llama-7b"?`) {
		t.Errorf("unknown preset error should suggest the closest, got %v", err)
	}
	// Only a model of the same generation and size is suggested; each
	// refusal says how to describe a model the catalog lacks.
	for _, name := range []string{"llama-9", "qwen3.5-27b", "gemma-4-12b"} {
		_, err := LookupPreset(name)
		if err == nil || strings.Contains(err.Error(), "did you mean") || !strings.Contains(err.Error(), `{"hf_config": "path/to/config.json"}`) ||
			!strings.Contains(err.Error(), `{"checkpoint": "path/to/folder"}`) || !strings.Contains(err.Error(), "hf://ORG/NAME") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := LookupPreset("Qwen/Qwen3.5-27B"); err == nil || !strings.Contains(err.Error(), `"hf://Qwen/Qwen3.5-27B"`) {
		t.Errorf("a hub id missing from the catalog should be offered as hf://: %v", err)
	}
	if _, err := LookupPreset("zzzzzz"); err == nil || !strings.Contains(err.Error(), "vram.Presets()") || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("unknown preset with nothing close should say where the names are, got %v", err)
	}
}

func TestMoEActiveParams(t *testing.T) {
	m := MustPreset("mixtral-8x7b")
	// Mistral's announcement: 12.9B active parameters per token (2 of 8 experts).
	if got := float64(m.ActiveParamCount()) / 1e9; got < 12.8 || got > 13.0 {
		t.Errorf("Mixtral active params = %.2fB, want ≈ 12.9B", got)
	}
}

func TestFromHFConfig(t *testing.T) {
	for _, tc := range []struct {
		file   string
		preset string
	}{
		{"gpt2.json", "gpt2"},
		{"bert-large-uncased.json", "bert-large-uncased"},
		{"llama-2-7b-hf.json", "llama-2-7b"},
		{"meta-llama-3-8b.json", "llama-3-8b"},
		{"mixtral-8x7b.json", "mixtral-8x7b"},
		{"qwen2.5-7b.json", "qwen2.5-7b"},
		{"llava-1.5-7b-hf.json", "llava-1.5-7b"},
		{"qwen2.5-vl-7b-instruct.json", "qwen2.5-vl-7b"},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "hf", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		m, err := FromHFConfig(b)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		want := MustPreset(tc.preset)
		if got, w := m.ParamCount(), want.ParamCount(); got != w {
			t.Errorf("%s: %d parameters, want %d (preset %s)", tc.file, got, w, tc.preset)
		}
	}
}

func TestFromHFConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		json, want string
	}{
		{`{}`, `no "model_type"`},
		{`{"model_type": "mamba"}`, `model_type "mamba" is not supported`},
		// num_attention_heads left out is LlamaConfig's 32, which 100 does
		// not divide (its validate_architecture raises too).
		{`{"model_type": "llama", "hidden_size": 100}`, "not divisible by heads = 32"},
		{`{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 3, "intermediate_size": 128, "vocab_size": 10}`, "head_dim"},
		{`{"model_type": "llama", "num_hidden_layers": -2}`, "non-negative integer"},
		{`not json`, "config.json"},
	} {
		_, err := FromHFConfig([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromHFConfig(%s) = %v, want an error containing %q", tc.json, err, tc.want)
		}
	}
}

// A null key is not a missing one where the config class tells them apart,
// and a wrapper's sub-config left out is not one given empty: transformers
// 5.23.0 (AutoConfig.for_model and from_config on the meta device) reads
// MistralConfig's sliding_window as 4096 when left out and None when
// null, inside Mistral3's text_config too; LLaVA's vision_config left out
// as CLIP ViT-L/14 at 336 px (its SubConfigSpec's init_kwargs), given as
// {} as CLIPVisionConfig's defaults: 6,845,802,752 parameters.
func TestFromHFConfigNullAndLeftOut(t *testing.T) {
	for _, tc := range []struct {
		json        string
		window      int
		towerLayers int
		params      int64
	}{
		{`{"model_type": "mistral"}`, 4096, 0, 0},
		{`{"model_type": "mistral", "sliding_window": null}`, 0, 0, 0},
		{`{"model_type": "mistral3", "text_config": {}}`, 4096, 24, 0},
		{`{"model_type": "mistral3", "text_config": {"sliding_window": null}}`, 0, 24, 0},
		{`{"model_type": "mistral3"}`, 0, 24, 0},
		{`{"model_type": "llava"}`, 0, 24, 7062902784},
		{`{"model_type": "llava", "vision_config": null}`, 0, 24, 7062902784},
		{`{"model_type": "llava", "vision_config": {}}`, 0, 12, 6845802752},
	} {
		m, err := FromHFConfig([]byte(tc.json))
		if err != nil {
			t.Errorf("%s: %v", tc.json, err)
			continue
		}
		layers := 0
		if m.Vision != nil {
			layers = m.Vision.Tower.Layers
		}
		if m.SlidingWindow != tc.window || layers != tc.towerLayers || tc.params != 0 && m.ParamCount() != tc.params {
			t.Errorf("%s: sliding window %d, tower of %d layers, %d parameters; want %d, %d, %d", tc.json, m.SlidingWindow, layers, m.ParamCount(), tc.window, tc.towerLayers, tc.params)
		}
	}
}

func TestModelValidate(t *testing.T) {
	good := MustPreset("llama-2-7b")
	for _, tc := range []struct {
		edit func(*Model)
		want string
	}{
		{func(m *Model) { m.Family = "" }, "model.family is required"},
		{func(m *Model) { m.Family = "rwkv" }, `model.family "rwkv" is not supported`},
		{func(m *Model) { m.Layers = 0 }, "model.layers must be ≥ 1"},
		{func(m *Model) { m.KVHeads = 5 }, "kv_heads = 5 must divide heads = 32"},
		{func(m *Model) { m.MLP = "swish3" }, `model.mlp "swish3"`},
		{func(m *Model) { m.Params = 7 }, "model.params = 7 disagrees"},
		{func(m *Model) { m.Head = "seq_cls_x" }, "class count"},
	} {
		m := good
		tc.edit(&m)
		err := m.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
		}
	}
}

// TestTensorNames spot-checks Hugging Face state-dict names and shapes.
func TestTensorNames(t *testing.T) {
	want := map[string][]int64{
		"model.layers.0.self_attn.k_proj.weight":              {1024, 4096},
		"model.layers.31.mlp.down_proj.weight":                {4096, 14336},
		"lm_head.weight":                                      {128256, 4096},
		"model.norm.weight":                                   {4096},
		"model.layers.3.block_sparse_moe.experts.7.w2.weight": nil, // Mixtral only
		"gpt_neox.layers.0.attention.query_key_value.weight":  nil,
		"transformer.h.0.attn.c_attn.weight":                  nil,
		"encoder.layer.0.attention.self.query.weight":         nil,
		"model.decoder.layers.0.self_attn_layer_norm.weight":  nil,
		"model.layers.0.self_attn.kv_a_proj_with_mqa.weight":  nil,
		"embeddings.patch_embeddings.projection.weight":       nil,
		"model.layers.3.mlp.experts.255.down_proj.weight":     nil,
		"model.layers.0.self_attn.qkv_proj.weight":            nil,
		"transformer.h.0.mlp.fc_in.bias":                      nil,
		"model.decoder.project_in.weight":                     nil,
		"model.layers.5.mlp.shared_experts.gate_proj.weight":  nil,
		"model.layers.0.self_attn.dense.bias":                 nil,
		"gpt_neox.layers.0.post_attention_layernorm.weight":   nil,
		"transformer.h.0.ln_2.bias":                           nil,
		"model.layers.0.block_sparse_moe.gate.weight":         nil,
		"model.layers.0.self_attn.q_b_proj.weight":            nil,
		"pooler.dense.weight":                                 nil,
		"encoder.layer.0.layernorm_before.weight":             nil,
		"model.layers.0.mlp.gate_up_proj.weight":              nil,
		"model.layers.2.mlp.gate_proj.weight":                 nil,
		"transformer.h.0.attn.c_proj.weight":                  nil,
		"gpt_neox.embed_in.weight":                            nil,
		"embed_out.weight":                                    nil,
		"model.layers.0.self_attn.q_proj.bias":                nil,
		"model.decoder.embed_positions.weight":                nil,
		"model.layers.0.input_layernorm.bias":                 nil,
		"embeddings.token_type_embeddings.weight":             nil,
		"transformer.wpe.weight":                              nil,
		"model.layers.0.self_attn.o_proj.weight":              nil,
		"model.layers.0.mlp.up_proj.weight":                   nil,
		"model.layers.0.post_attention_layernorm.weight":      nil,
		"layernorm.bias":                                      nil,
		"model.embed_tokens.weight":                           nil,
	}
	names := map[string][]int64{}
	for _, p := range Presets() {
		for _, tn := range MustPreset(p).Tensors() {
			if _, ok := names[tn.Name]; !ok {
				names[tn.Name] = tn.Shape
			}
		}
	}
	llama3 := map[string][]int64{}
	for _, tn := range MustPreset("llama-3-8b").Tensors() {
		llama3[tn.Name] = tn.Shape
	}
	for name, shape := range want {
		if _, ok := names[name]; !ok {
			t.Errorf("no preset has tensor %q", name)
		}
		if shape != nil {
			if got := llama3[name]; len(got) != len(shape) || (len(got) > 0 && (got[0] != shape[0] || got[len(got)-1] != shape[len(shape)-1])) {
				t.Errorf("llama-3-8b %s shape = %v, want %v", name, got, shape)
			}
		}
	}
}

// TestHFConfigRoundTrip: every preset survives HFConfig → JSON → FromHFConfig.
func TestHFConfigRoundTrip(t *testing.T) {
	for _, name := range Presets() {
		m := MustPreset(name)
		b, err := json.Marshal(m.HFConfig())
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromHFConfig(b)
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, b)
			continue
		}
		if back.ParamCount() != m.ParamCount() {
			t.Errorf("%s: %d parameters after the round trip, want %d\n%s", name, back.ParamCount(), m.ParamCount(), b)
		}
	}
}

// TestFromPresetTypo: a mistyped catalog name is an error naming the field
// and suggesting the closest names, not a panic.
func TestFromPresetTypo(t *testing.T) {
	if m := FromPreset("llama-2-7b"); m.Params != MustPreset("llama-2-7b").Params || m.Family != "llama" {
		t.Errorf("FromPreset(llama-2-7b) = %+v", m)
	}
	_, err := Training{Model: FromPreset("llama-2-7bb"), SeqLen: 128, MicroBatch: 1}.Estimate()
	if err == nil || !strings.Contains(err.Error(), `model.name: unknown model preset "llama-2-7bb"; did you mean "llama-2-7b"?`) {
		t.Errorf("error %v", err)
	}
	if _, err := (Inference{Model: FromPreset("gpt5"), Batch: 1, PromptTokens: 128}).Estimate(); err == nil || !strings.Contains(err.Error(), "unknown model preset") {
		t.Errorf("inference error %v", err)
	}
}

// Validate counts a mixture of experts from two small inventories; the
// count equals the full inventory's for every MoE preset.
func TestParamsLinearInExperts(t *testing.T) {
	n := 0
	for _, name := range Presets() {
		m := MustPreset(name)
		if m.Experts <= 2 {
			continue
		}
		n++
		if got, want := m.Normalize().paramsLinearInExperts(), m.ParamCount(); got != want {
			t.Errorf("%s: %d parameters from two inventories, %d from the full one", name, got, want)
		}
	}
	if n < 10 {
		t.Errorf("only %d MoE presets checked", n)
	}
}
