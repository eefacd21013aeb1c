package vram

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
)

// TestConfigClassDefaultsAll: a config.json that names only its
// model_type stands for the config class's defaults, every key left out
// taking the class's value; the engine reads it as transformers builds it.
// testdata/class_defaults.json holds each family's parameter count as
// transformers builds the class's defaults on the meta device
// (examples/measure defaults; regenerate with make truth). A type
// transformers builds no model of alone (a vision tower's config) is
// listed with transformers' reason and skipped.
func TestConfigClassDefaultsAll(t *testing.T) {
	b, err := os.ReadFile("testdata/class_defaults.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Transformers string         `json:"transformers"`
		Parameters   map[string]any `json:"parameters"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	types := make([]string, 0, len(d.Parameters))
	for mt := range d.Parameters {
		types = append(types, mt)
	}
	sort.Strings(types)
	checked := 0
	for _, mt := range types {
		n, ok := d.Parameters[mt].(float64)
		if !ok {
			continue // transformers builds no model of the class alone
		}
		checked++
		m, err := FromHFConfig([]byte(fmt.Sprintf(`{"model_type": %q}`, mt)))
		if why, ok := classDefaultsUnrunnable[mt]; ok {
			if err == nil {
				t.Errorf("%s: the class's defaults are read (%d parameters), but %s", mt, m.ParamCount(), why)
			}
			continue
		}
		if extra, ok := classDefaultsUntied[mt]; ok && err == nil {
			n += float64(extra(m))
		}
		if err != nil {
			t.Errorf("%s: the class's defaults are refused (%v); transformers %s builds %d parameters", mt, err, d.Transformers, int64(n))
			continue
		}
		if got := m.ParamCount(); got != int64(n) {
			t.Errorf("%s: the class's defaults make %d parameters, transformers %s builds %d", mt, got, d.Transformers, int64(n))
		}
	}
	if checked < len(Families())/2 {
		t.Errorf("only %d of %d families checked (make truth)", checked, len(Families()))
	}
}

// classDefaultsUnrunnable are the classes whose defaults transformers
// builds but cannot run; the engine refuses them in words.
var classDefaultsUnrunnable = map[string]string{
	"deepseek_v2":  "num_experts_per_tok defaults to None, which DeepseekV2Moe cannot route with (torch.topk with k=None)",
	"gemma3":       "SigLIP's defaults (224 px, 16 px patches, the pooling head on) leave Gemma 3's projector a pooling window of 0 (stride should not be zero)",
	"llama4":       "the vision adapter's widths do not meet (fc1 reads intermediate_size 5632 where the pixel shuffle makes 3072; linear_1 reads vision_output_dim 7680 where fc2 makes 4096)",
	"qwen2_5_vl":   "the tower's out_hidden_size (3584) is not the language model's hidden_size (8192): masked_scatter cannot place the image features",
	"qwen3_vl":     "the tower's out_hidden_size (3584) is not the language model's hidden_size (4096): masked_scatter cannot place the image features",
	"qwen3_vl_moe": "the tower's out_hidden_size (3584) is not the language model's hidden_size (2048): masked_scatter cannot place the image features",
	"qwen3_5":      "the tower's out_hidden_size (3584) is not the language model's hidden_size (4096): masked_scatter cannot place the image features",
	"qwen3_5_moe":  "the tower's out_hidden_size (3584) is not the language model's hidden_size (2048): masked_scatter cannot place the image features",
}

// classDefaultsUntied are the classes whose defaults' meta build ties a
// head that their released checkpoints load untied: Mistral3Config ties
// at the wrapper in 5.x (configuration_mistral3.py:98), and transformers
// 5.23 unties when the checkpoint stores lm_head beside the embeddings
// (modeling_utils.py:2556-2575), as Mistral Small 3.1 and 3.2 do; the
// engine reads the key as those checkpoints load. The map gives the head
// the meta build does not count.
var classDefaultsUntied = map[string]func(Model) int64{
	"mistral3": func(m Model) int64 { return int64(m.Vocab) * int64(m.Hidden) },
}
