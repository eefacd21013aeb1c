package vram

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gemma3nSmallTowers are a small audio_config (two blocks 64 wide, four
// heads, a 16 → 8 channel front end over 40 mel bins, chunks of 6 with 4
// left and 2 right, kernel 3, 8 hard tokens) and a vision_config whose
// embedder is 256 wide over 16 hard tokens (the MobileNetV5 itself has no
// size to set).
const gemma3nSmallTowers = `"vision_config": {"model_type": "gemma3n_vision", "hidden_size": 256, "vocab_size": 16},
	"audio_config": {"model_type": "gemma3n_audio", "hidden_size": 64, "conf_num_attention_heads": 4, "conf_num_hidden_layers": 2, "vocab_size": 8,
		"input_feat_size": 40, "sscp_conv_channel_size": [16, 8], "conf_attention_chunk_size": 6, "conf_attention_context_left": 4,
		"conf_attention_context_right": 2, "conf_conv_kernel_size": 3}`

// TestGemma3nInventory: testdata/gemma3n/small.json is the small untied
// model of gemma3nSmall's text_config and gemma3nSmallTowers as
// transformers 5.23.0 builds it with timm 1.0.31 on the meta device
// (AutoConfig.for_model("gemma3n", **hf_config),
// AutoModelForImageTextToText.from_config under torch.device("meta"),
// named_parameters() and named_buffers(), as examples/measure writes an
// inventory). The engine lists the same parameters (names, shapes, total)
// and buffers (names, shapes, dtypes, in order); the catalog's two
// presets are checked the same way by TestInventoryMatchesPyTorch.
func TestGemma3nInventory(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "gemma3n", "small.json"))
	if err != nil {
		t.Fatal(err)
	}
	var inv struct {
		inventory
		HFConfig json.RawMessage `json:"hf_config"`
	}
	if err := json.Unmarshal(b, &inv); err != nil {
		t.Fatal(err)
	}
	m, err := FromHFConfig(inv.HFConfig)
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{}
	for _, x := range m.Tensors() {
		ours[x.Name] = fmt.Sprint(x.Shape)
	}
	for _, p := range inv.Parameters {
		if got, ok := ours[p.Name]; !ok || got != fmt.Sprint(p.Shape) {
			t.Errorf("transformers has %s %v, the engine %q", p.Name, p.Shape, got)
		}
		delete(ours, p.Name)
	}
	for n := range ours {
		t.Errorf("the engine has %s, transformers does not", n)
	}
	if m.ParamCount() != inv.Total || inv.Total != 294978720 {
		t.Errorf("%d parameters, transformers %d (294,978,720 when written)", m.ParamCount(), inv.Total)
	}
	var tb, ob []string
	for _, x := range inv.Buffers {
		tb = append(tb, fmt.Sprint(x.Name, x.Shape, x.DType))
	}
	for _, x := range m.Buffers() {
		ob = append(ob, fmt.Sprint(x.Name, x.Shape, map[DType]string{FP32: "float32", Bool: "bool"}[x.DType]))
	}
	if !slices.Equal(ob, tb) {
		t.Errorf("the engine's %d buffers are not transformers' %d in order:\n%v\n%v", len(ob), len(tb), ob, tb)
	}
}

// TestGemma3n: the parameter and buffer counts of Gemma 3n models as
// transformers 5.23.0 (with timm 1.0.31) builds them on the meta device
// (AutoConfig.for_model("gemma3n", **config),
// AutoModelForImageTextToText.from_config under torch.device("meta"),
// sum(p.numel() for p in model.parameters()), len(named_buffers())), the
// towers' and embedders' shares, and the round trip of the engine's
// config.
func TestGemma3n(t *testing.T) {
	for _, c := range []struct {
		name, json                   string
		params, audio, embed, stored int64
		buffers                      int
	}{
		// The classes' defaults: the released E4B.
		{"the classes' defaults", `{"model_type": "gemma3n"}`, 7818517072, 681348640, 4460544 + 3345408, 15 * (2*2048*512 + 256), 151},
		{"E2B's text_config", `{"model_type": "gemma3n", "text_config": {"num_hidden_layers": 30, "intermediate_size": 8192, "num_kv_shared_layers": 10}}`,
			5418464192, 681348640, 4460544 + 3345408, 10 * (2*2048*512 + 256), 146},
		{"a small language model, the towers' defaults", `{"model_type": "gemma3n", "text_config": {` + gemma3nSmall + `, "num_kv_shared_layers": 5}}`,
			976728312, 681348640, 397312 + 297984, 5 * (2*64*32 + 32), 126},
		{"small, tied", `{"model_type": "gemma3n", "text_config": {` + gemma3nSmall + `, "num_kv_shared_layers": 5}, ` + gemma3nSmallTowers + `}`,
			294914720, 204616, 20992 + 4736, 5 * (2*64*32 + 32), 36},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var audio, embed, stored int64
		for _, x := range m.Tensors() {
			switch {
			case strings.HasPrefix(x.Name, "model.audio_tower."):
				audio += x.Numel()
			case strings.HasPrefix(x.Name, "model.embed_"):
				embed += x.Numel()
			}
		}
		for _, x := range m.storedOnly() {
			stored += x.Numel()
		}
		if m.ParamCount() != c.params || audio != c.audio || embed != c.embed || stored != c.stored || len(m.Buffers()) != c.buffers {
			t.Errorf("%s: %d parameters (audio tower %d, embedders %d, stored only %d), %d buffers; transformers builds %d (%d, %d; %d), %d",
				c.name, m.ParamCount(), audio, embed, stored, len(m.Buffers()), c.params, c.audio, c.embed, c.stored, c.buffers)
		}
		raw, _ := json.Marshal(m.HFConfig())
		back, err := FromHFConfig(raw)
		if err != nil || back.ParamCount() != m.ParamCount() || len(back.Buffers()) != len(m.Buffers()) {
			t.Errorf("%s: the engine's config read back: %v", c.name, err)
		}
	}
	for name, want := range map[string]int64{"gemma-3n-e4b-it": 7818517072, "gemma-3n-e2b-it": 5418464192} {
		if m := MustPreset(name); m.ParamCount() != want {
			t.Errorf("%s: %d parameters, the inventory's total is %d", name, m.ParamCount(), want)
		}
	}
}

// TestGemma3nVisionTower: timm 1.0.31's mobilenetv5_300m_enc built on the
// meta device (timm.create_model("mobilenetv5_300m_enc",
// pretrained=False, num_classes=0)) has 548 parameters of 294,126,912
// elements in 84 blocks (3, 5, 37 and 39 a stage), and no buffers.
func TestGemma3nVisionTower(t *testing.T) {
	var l tensorList
	gemma3nVisionTensors(Model{}, &l)
	var n int64
	for _, x := range l.ts {
		n += x.Numel()
	}
	if len(l.ts) != 548 || n != 294126912 {
		t.Errorf("%d tensors of %d elements; timm builds 548 of 294,126,912", len(l.ts), n)
	}
	var sizes []int
	for _, st := range mnv5Blocks() {
		sizes = append(sizes, len(st))
	}
	if !slices.Equal(sizes, []int{3, 5, 37, 39}) {
		t.Errorf("blocks by stage %v, timm's 3, 5, 37, 39", sizes)
	}
	// Three blocks as timm names and shapes them.
	want := map[string]string{
		"blocks.1.0.dw_mid.conv.weight":        "[768 1 5 5]",
		"blocks.2.9.attn.key.down_conv.weight": "[640 1 3 3]",
		"blocks.3.1.attn.output.proj.weight":   "[1280 1536 1 1]",
		"msfa.ffn.pw_exp.conv.weight":          "[3840 1920 1 1]",
		"conv_stem.conv.bias":                  "[64]",
		"blocks.0.0.conv_exp.weight":           "[256 64 3 3]",
		"blocks.2.8.layer_scale.gamma":         "[640]",
		"blocks.3.38.pw_proj.bn.weight":        "[1280]",
		"blocks.2.36.pw_exp.conv.weight":       "[1280 640 1 1]",
		"blocks.3.1.attn.key.proj.weight":      "[96 1280 1 1]",
		"blocks.2.35.attn.query.proj.weight":   "[768 640 1 1]",
		"blocks.1.4.dw_start.conv.weight":      "[256 1 3 3]",
		"msfa.norm.weight":                     "[2048]",
		"blocks.2.9.attn.value.norm.weight":    "[640]",
		"blocks.3.0.dw_start.conv.weight":      "[640 1 5 5]",
		"blocks.0.2.bn2.weight":                "[128]",
		"blocks.2.0.pw_proj.conv.weight":       "[640 1536 1 1]",
		"blocks.3.0.layer_scale.gamma":         "[1280]",
		"blocks.2.10.pw_exp.bn.weight":         "[1280]",
		"blocks.3.2.pw_exp.conv.weight":        "[2560 1280 1 1]",
		"blocks.2.9.norm.weight":               "[640]",
		"blocks.1.1.pw_exp.conv.weight":        "[1024 256 1 1]",
		"blocks.3.37.attn.query.proj.weight":   "[1536 1280 1 1]",
		"blocks.2.8.pw_exp.conv.weight":        "[640 640 1 1]",
		"conv_stem.conv.weight":                "[64 3 3 3]",
		"blocks.0.1.conv_exp.weight":           "[512 128 3 3]",
		"msfa.ffn.pw_proj.conv.weight":         "[2048 3840 1 1]",
		"blocks.2.11.attn.value.proj.weight":   "[64 640 1 1]",
		"blocks.3.38.layer_scale.gamma":        "[1280]",
		"blocks.2.9.attn.output.proj.weight":   "[640 768 1 1]",
	}
	for _, x := range l.ts {
		if s, ok := want[x.Name]; ok {
			if got := fmt.Sprint(x.Shape); got != s {
				t.Errorf("%s: %s, timm's %s", x.Name, got, s)
			}
			delete(want, x.Name)
		}
	}
	for n := range want {
		t.Errorf("timm has %s, the engine does not", n)
	}
}

// TestGemma3nConfigDefaults: a key left out takes its class's default
// (configuration_gemma3n.py l.96-127, 308-331, 366-374, 476-489): an empty
// config is the E4B preset; E2B's config.json shape keys (its text_config
// differs from the class's in num_hidden_layers, intermediate_size and
// num_kv_shared_layers; the towers' keys are the classes' defaults) read
// as the E2B preset.
func TestGemma3nConfigDefaults(t *testing.T) {
	e4b, err := FromHFConfig([]byte(`{"model_type": "gemma3n", "text_config": null, "vision_config": null, "audio_config": null}`))
	if err != nil {
		t.Fatal(err)
	}
	e2b, err := FromHFConfig([]byte(`{"model_type": "gemma3n", "architectures": ["Gemma3nForConditionalGeneration"],
		"text_config": {"model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 30, "intermediate_size": [` +
		strings.TrimSuffix(strings.Repeat("8192, ", 30), ", ") + `], "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
		"num_kv_shared_layers": 10, "sliding_window": 512, "vocab_size": 262400, "vocab_size_per_layer_input": 262144,
		"hidden_size_per_layer_input": 256, "altup_num_inputs": 4, "laurel_rank": 64, "rope_scaling": null,
		"activation_sparsity_pattern": [` + strings.Repeat("0.95, ", 10) + strings.TrimSuffix(strings.Repeat("0.0, ", 20), ", ") + `]},
		"vision_config": {"model_type": "gemma3n_vision", "architecture": "mobilenetv5_300m_enc", "do_pooling": true, "hidden_size": 2048, "model_args": null,
			"vocab_size": 128, "vocab_offset": 262144, "num_classes": 2, "label_names": ["LABEL_0", "LABEL_1"]},
		"audio_config": {"model_type": "gemma3n_audio", "hidden_size": 1536, "conf_num_hidden_layers": 12, "conf_num_attention_heads": 8,
			"conf_conv_kernel_size": 5, "sscp_conv_channel_size": [128, 32], "sscp_conv_kernel_size": [[3, 3], [3, 3]],
			"sscp_conv_stride_size": [[2, 2], [2, 2]], "input_feat_size": 128, "conf_attention_chunk_size": 12,
			"conf_attention_context_left": 13, "conf_attention_context_right": 0, "vocab_size": 128, "vocab_offset": 262272},
		"torch_dtype": "bfloat16"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  Model
	}{{"gemma-3n-e4b-it", e4b}, {"gemma-3n-e2b-it", e2b}} {
		want := MustPreset(c.name)
		g, _ := json.Marshal(c.got.Normalize())
		c.got.Name, c.got.Release = want.Name, nil
		gw, _ := json.Marshal(c.got.Normalize())
		ww, _ := json.Marshal(want.Normalize())
		if string(gw) != string(ww) {
			t.Errorf("%s: the config reads as\n%s\nthe preset is\n%s", c.name, g, ww)
		}
	}
}

// TestGemma3nErrors: what the engine refuses, each naming the key.
func TestGemma3nErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`"vision_config": {"architecture": "resnet50"}`, "architecture"},
		{`"vision_config": {"model_args": {"depth": 3}}`, "model_args"},
		{`"vision_config": {"vocab_size": 0}`, "vocab"},
		{`"audio_config": {"conf_num_attention_heads": 7}`, "conf_num_attention_heads"},
		{`"audio_config": {"sscp_conv_channel_size": [128, 32, 16]}`, "sscp_conv_channel_size"},
		{`"audio_config": {"sscp_conv_kernel_size": [[5, 5], [3, 3]]}`, "sscp_conv_kernel_size"},
		{`"audio_config": {"sscp_conv_stride_size": [[2, 2], [1, 1]]}`, "sscp_conv_stride_size"},
		{`"audio_config": {"conf_attention_chunk_size": 0}`, "chunk"},
		{`"audio_config": {"conf_attention_context_right": -1}`, "context_right"},
		{`"text_config": {"num_kv_shared_layers": 35}`, "kv_shared_layers"},
		{`"tie_word_embeddings": "yes"`, "tie_word_embeddings"},
	} {
		_, err := FromHFConfig([]byte(`{"model_type": "gemma3n", ` + c.json + `}`))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.json, err, c.want)
		}
	}
	// The wrapper always builds both towers, of their families.
	m := MustPreset("gemma-3n-e4b-it")
	m.Audio = nil
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "model.audio") {
		t.Errorf("no audio tower: %v, want an error naming model.audio", err)
	}
	m = MustPreset("gemma-3n-e4b-it")
	m.Vision.Tower = MustPreset("gemma-4-31b").Vision.Tower
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "model.vision.tower.family") {
		t.Errorf("a Gemma 4 tower: %v, want an error naming model.vision.tower.family", err)
	}
	m = MustPreset("gemma-3n-e4b-it")
	m.Vision.Tower.Layers = 83
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "layers") {
		t.Errorf("83 blocks: %v, want an error naming layers", err)
	}
	// The vision tower's forward is not modelled: a plan asking for
	// images is refused, one without runs the text.
	_, err := VLLM{MaxModelLen: 8192}.Carve(Inference{Model: MustPreset("gemma-3n-e2b-it"), Images: 2, PromptTokens: 1024}, mustGPU("H100-80GB"))
	if err == nil || !strings.Contains(err.Error(), "images") {
		t.Errorf("two images a prompt: %v, want an error naming images", err)
	}
	if _, err := (Training{Model: MustPreset("gemma-3n-e2b-it"), SeqLen: 8, MicroBatch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled") {
		t.Errorf("training: %v, want the serving-only refusal", err)
	}
}

// TestGemma3nServing: vLLM serves E2B and E4B on an H100 with the
// language model's cache (family gemma3n_text's: the KV-shared layers get
// none, 16 sliding and 4 global layers pooled in both), their weights
// including both towers and embedders, and notes that neither tower runs.
func TestGemma3nServing(t *testing.T) {
	for _, name := range []string{"gemma-3n-e2b-it", "gemma-3n-e4b-it"} {
		m := MustPreset(name)
		v, err := VLLM{MaxModelLen: 32768}.Carve(Inference{Model: m}, mustGPU("H100-80GB"))
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, g := range v.KVCache.kinds {
			kinds[g.Kind] += g.Layers
		}
		if kinds["sliding_window"] != 16 || kinds["full"] != 4 || !v.Starts {
			t.Errorf("%s: cache layers by kind %v, starts %v; want 16 sliding, 4 full", name, kinds, v.Starts)
		}
		text := m
		text.Vision, text.Audio = nil, nil
		if got, min := v.Weights, Bytes(2*(m.ParamCount()-text.ParamCount())); got <= min {
			t.Errorf("%s: weights %v, not above the towers' and embedders' %v in bf16", name, got, min)
		}
		notes := strings.Join(v.Notes, "\n")
		if !strings.Contains(notes, "the plan runs the text only") || !strings.Contains(notes, "gemma3n_vision tower's forward is not") {
			t.Errorf("%s: notes do not say the towers do not run:\n%s", name, notes)
		}
	}
}
