package vram_test

import (
	"fmt"

	"github.com/vramlab/vramlab/vram"
)

// A full fine-tune of Llama-2-7B in pure bf16 with AdamW: where the memory
// goes at the peak, and where the peak happens.
func ExampleTraining_Estimate() {
	plan := vram.Training{
		Model:      vram.MustPreset("llama-2-7b"),
		SeqLen:     2048,
		MicroBatch: 1,
		Precision:  "bf16",
		Optimizer:  "adamw",
		Attention:  "sdpa",
	}
	est, err := plan.Estimate()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("peak at:", est.PeakAt.Where())
	fmt.Print(est.Peak)
	// Output:
	// peak at: iteration 1, optimizer, optimizer step
	// parameters           12.55 GiB   20.0%
	// gradients            12.55 GiB   20.0%
	// optimizer states     25.10 GiB   40.0%
	// temporaries          12.55 GiB   20.0%
	// total                62.76 GiB   (with other 32.00 KiB)
}

// The same plan with LoRA on the attention projections: only the adapters
// have gradients and optimizer states.
func ExampleLoRA() {
	plan := vram.Training{
		Model: vram.MustPreset("llama-2-7b"), SeqLen: 2048, MicroBatch: 1, Precision: "bf16",
		LoRA: &vram.LoRA{Rank: 16, Targets: []string{"q_proj", "k_proj", "v_proj", "o_proj"}},
	}
	est, _ := plan.Estimate()
	fmt.Printf("trainable: %d of %d parameters\n", est.TrainableParams, est.Params)
	fmt.Println("peak:", est.Peak.Total())
	// Output:
	// trainable: 16777216 of 6738415616 parameters
	// peak: 22.0 GiB
}

// Serving: weights plus a KV cache that grows with context and concurrency.
func ExampleInference_Estimate() {
	in := vram.Inference{
		Model:        vram.MustPreset("llama-3-8b"),
		Weights:      vram.Quant{DType: vram.BF16},
		Batch:        8,
		PromptTokens: 4096,
		NewTokens:    512,
	}
	est, _ := in.Estimate()
	fmt.Println("KV cache per token:", est.KVPerToken)
	fmt.Println("KV cache:", est.KVCache)
	fmt.Println("peak:", est.Peak.Total(), "at", est.PeakAt)
	// Output:
	// KV cache per token: 128.0 KiB
	// KV cache: 4.5 GiB
	// peak: 22.3 GiB at prefill
}

// The article's rule of thumb for a 7B model: 100 GB.
func ExampleRuleOfThumb() {
	fmt.Println(vram.RuleOfThumb{Params: 7e9}.Total().Format(vram.GB, 0))
	// Output: 100 GB
}

func ExampleParseBytes() {
	a, _ := vram.ParseBytes("80GB")
	b, _ := vram.ParseBytes("80 GiB")
	fmt.Println(a, "|", b)
	// Output: 74.5 GiB | 80.0 GiB
}

// Read a model from a Hugging Face config.json.
func ExampleFromHFConfig() {
	m, err := vram.FromHFConfig([]byte(`{"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
		"num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.ParamCount())
	// Output: 8030261248
}

// The fastest a Llama-3-8B step can run on an H100: 6 FLOPs per parameter
// a token passes through, plus attention, at the 989 TFLOPS BF16 peak.
// Real runs reach a fraction of it (MFU).
func ExampleTraining_ThroughputBound() {
	plan := vram.Training{Model: vram.MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 2, GradAccum: 8, Precision: "mixed_bf16"}
	h100, _ := vram.LookupGPU("H100-80GB")
	b, err := plan.ThroughputBound(h100)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%.3g FLOPs a step, at least %.1f s: at most %.0f tokens/s, %s-bound\n", b.StepFLOPs, b.Seconds, b.TokensPerSecond, b.Limit)
	// Output: 3.16e+15 FLOPs a step, at least 3.2 s: at most 20497 tokens/s, compute-bound
}
