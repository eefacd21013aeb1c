package answer

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// TestServedServingOnlyFamily: a family whose transformers generate is not
// modelled (vram.ErrServingOnly) is answered by the serving engine that
// runs it — the carve and the engine's verdict, with no figures of
// generate and the reason said — while the same plan without an engine
// is refused with the family's reason.
func TestServedServingOnlyFamily(t *testing.T) {
	for _, engine := range []string{"vllm", "sglang"} {
		plan := `{"model": "glm-5", "inference": {"batch": 1, "prompt_tokens": 4096}, "gpu": "H200-141GB", "` + engine + `": {}}`
		p, err := vram.ParsePlanContent([]byte(plan))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := For(p, nil)
		if err != nil {
			t.Fatalf("%s: %v", engine, err)
		}
		if rep.Inference != nil || rep.Measures != (Measures{}) || rep.Peak != 0 {
			t.Errorf("%s: generate's figures given for a family whose generate is not modelled: %+v", engine, rep.Measures)
		}
		if !strings.Contains(rep.NoGenerate, "glm_moe_dsa") || !strings.Contains(rep.NoGenerate, "not modelled yet") {
			t.Errorf("%s: no_generate %q does not say why", engine, rep.NoGenerate)
		}
		if rep.Fit == nil || rep.Fit.Engine == "" || rep.Fit.DeviceUsed == 0 {
			t.Fatalf("%s: no engine verdict: %+v", engine, rep.Fit)
		}
		// 744B parameters in bf16 on one H200: the engine does not start.
		if rep.Fit.Fits {
			t.Errorf("%s: GLM-5 in bf16 fits one H200: %s", engine, rep.Fit.Why)
		}
		if (engine == "vllm") != (rep.VLLM != nil) || (engine == "sglang") != (rep.SGLang != nil) {
			t.Errorf("%s: the engine's carve is missing", engine)
		}
	}
	p, err := vram.ParsePlanContent([]byte(`{"model": "glm-5", "inference": {"batch": 1, "prompt_tokens": 4096}, "gpu": "H200-141GB"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := For(p, nil); !errors.Is(err, vram.ErrServingOnly) {
		t.Errorf("generate of glm-5 with no engine: %v, want vram.ErrServingOnly", err)
	}
}

// TestKbitPrepVariant: a QLoRA plan run through transformers is answered
// also as if its script called prepare_model_for_kbit_training (a larger
// peak, the residual stream fp32); a plan that says kbit_prep, and a plan
// without a quantized base, have no such variant.
func TestKbitPrepVariant(t *testing.T) {
	for _, c := range []struct {
		plan string
		want int
	}{
		{`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 2, "precision": "amp_bf16", "weights_dtype": "bf16", "grad_checkpointing": "full", "quantized_base": {"dtype": "nf4"}, "lora": {"rank": 16, "targets": ["all_linear"]}}}`, 1},
		// amp_bf16's base is fp32 already: kbit_prep changes nothing.
		{`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 2, "precision": "amp_bf16", "grad_checkpointing": "full", "quantized_base": {"dtype": "nf4"}, "lora": {"rank": 16, "targets": ["all_linear"]}}}`, 0},
		{`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 2, "precision": "amp_bf16", "grad_checkpointing": "full", "kbit_prep": true, "quantized_base": {"dtype": "nf4"}, "lora": {"rank": 16, "targets": ["all_linear"]}}}`, 0},
		{`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 2, "precision": "bf16", "lora": {"rank": 16, "targets": ["all_linear"]}}}`, 0},
		{`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 2, "precision": "bf16", "framework": "litgpt", "quantized_base": {"dtype": "nf4"}, "lora": {"rank": 16, "targets": ["all_linear"]}}}`, 0},
	} {
		p, err := vram.ParsePlanContent([]byte(c.plan))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := For(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Variants) != c.want {
			t.Fatalf("%s: %d variants, want %d", c.plan, len(rep.Variants), c.want)
		}
		if c.want == 1 {
			v := rep.Variants[0]
			if v.Setting != `"kbit_prep": true` || v.Change <= 0 || v.Peak != rep.Peak+v.Change {
				t.Errorf("variant %+v on a peak of %v", v, rep.Peak)
			}
		}
	}
}
