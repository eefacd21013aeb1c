package vram

import (
	"strings"
	"testing"
)

// kbitPlan is Llama-2-7B QLoRA as the HF Trainer runs it (bf16 autocast,
// full checkpointing, nf4 base, adapters on every linear).
func kbitPlan(kbit bool, mb int) Training {
	return Training{Model: MustPreset("llama-2-7b"), SeqLen: 2048, MicroBatch: mb, Precision: "amp_bf16", WeightsDType: BF16, KbitPrep: kbit,
		Trainable: "lora", LoRA: &LoRA{Rank: 16, Alpha: 32, Targets: []string{"all_linear"}},
		QuantizedBase: Quant{DType: NF4}, Checkpointing: CheckpointFull, Framework: FrameworkHFTrainer}
}

// TestKbitPrep: prepare_model_for_kbit_training turns the base's
// unquantized weights fp32 (peft utils/other.py:204-209), so the
// embeddings, norms and head weigh twice a bf16 base's, the residual
// stream and the norms' outputs are fp32, and each 4-bit projection that
// reads the stream returns fp32 (bitsandbytes' Linear4bit returns its
// input's dtype); the peak grows with the batch.
func TestKbitPrep(t *testing.T) {
	m := MustPreset("llama-2-7b")
	// Unquantized: embed_tokens and lm_head (32000 × 4096 each) and 65
	// norms of 4096; the adapters follow the base weights' dtype
	// (LoRA.DType unset): rank 16 on q, k, v, o (16 · 8192 each), gate and
	// up (16 · 15104 each) and down (16 · 15104), 32 layers.
	unquantized := Bytes(2*32000*4096 + 65*4096 + 32*(4*16*8192+3*16*15104))
	var prev float64
	for _, mb := range []int{1, 4} {
		base, err := kbitPlan(false, mb).Estimate()
		if err != nil {
			t.Fatal(err)
		}
		prep, err := kbitPlan(true, mb).Estimate()
		if err != nil {
			t.Fatal(err)
		}
		if d := prep.Static.Parameters - base.Static.Parameters; d != 2*unquantized {
			t.Errorf("mb %d: kbit_prep adds %v of parameters, want the unquantized weights' and the adapters' second two bytes, %v", mb, d, 2*unquantized)
		}
		grow := float64(prep.Peak.Total())/float64(base.Peak.Total()) - 1
		if grow <= prev {
			t.Errorf("mb %d: the peak grows %.1f %%, not more than at the smaller batch (%.1f %%)", mb, 100*grow, 100*prev)
		}
		prev = grow
		if !strings.Contains(strings.Join(prep.Notes, "\n"), "prepare_model_for_kbit_training") {
			t.Errorf("mb %d: no note says what kbit_prep did: %q", mb, prep.Notes)
		}
		dtypes := map[string]DType{}
		for _, a := range prep.Block.Tensors {
			dtypes[a.Name] = a.DType
		}
		for name, want := range map[string]DType{"q_proj": BF16, "q_proj.to_input_dtype": FP32, "down_proj.to_input_dtype": FP32} {
			if got, ok := dtypes[name]; !ok || got != want {
				t.Errorf("mb %d: %s in %v (present %v), want %v", mb, name, got, ok, want)
			}
		}
	}
	if _, err := (Training{Model: m, SeqLen: 512, MicroBatch: 1, Precision: "bf16", KbitPrep: true, Trainable: "lora", LoRA: &LoRA{Rank: 8}}).Estimate(); err == nil || !strings.Contains(err.Error(), "kbit_prep") {
		t.Errorf("kbit_prep without a quantized base: %v", err)
	}
	lit := kbitPlan(true, 1)
	lit.Framework, lit.Precision = FrameworkLitGPT, "bf16"
	if _, err := lit.Estimate(); err == nil || !strings.Contains(err.Error(), "kbit_prep") {
		t.Errorf("kbit_prep under litgpt: %v", err)
	}
}

// TestLinear4bitDTypes: bitsandbytes' Linear4bit computes in its input's
// dtype when that is fp32 or bf16 and returns its input's dtype
// (nn/modules.py:483-487, 514-532): outside autocast an fp32 input makes an
// fp32 matmul and output, without a cast; under autocast the matmul runs in
// the compute dtype and its output is cast back.
func TestLinear4bitDTypes(t *testing.T) {
	for _, c := range []struct {
		precision string
		matmul    DType
		cast      bool
	}{{"bf16", FP32, false}, {"amp_bf16", BF16, true}} {
		tr := kbitPlan(true, 1)
		tr.Precision = c.precision
		est, err := tr.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]DType{}
		for _, a := range est.Block.Tensors {
			got[a.Name] = a.DType
		}
		if got["gate_proj"] != c.matmul {
			t.Errorf("%s: gate_proj's matmul in %v, want %v", c.precision, got["gate_proj"], c.matmul)
		}
		if _, ok := got["gate_proj.to_input_dtype"]; ok != c.cast {
			t.Errorf("%s: output cast back to the input's dtype: %v, want %v", c.precision, ok, c.cast)
		}
	}
}
