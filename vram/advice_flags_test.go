package vram

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestAdviceFlags: each advice is said in the framework's own settings,
// with the plan's numbers, and a framework without the setting says
// nothing rather than something it would not take.
func TestAdviceFlags(t *testing.T) {
	mb := Training{MicroBatch: 2, GradAccum: 8, SeqLen: 1024}
	for _, c := range []struct {
		kind      AdviceKind
		plan      Training
		framework Framework
		want      string
	}{
		{AdviceFullCheckpointing, mb, "hf_trainer", "--gradient_checkpointing true"},
		{AdviceSmallerMicroBatch, mb, "hf_trainer", "--per_device_train_batch_size 2 --gradient_accumulation_steps 8"},
		{Advice8BitAdamW, mb, "hf_trainer", "--optim adamw_bnb_8bit"},
		{AdviceFusedLoss, mb, "accelerate", "--use_liger_kernel true"},
		{AdviceSmallerMicroBatch, mb, "torchtune", "batch_size=2 gradient_accumulation_steps=8"},
		{AdviceShorterSequences, mb, "torchtune", "tokenizer.max_seq_len=1024"},
		{AdviceFullCheckpointing, mb, "torchtitan", "--activation_checkpoint.mode full"},
		{AdviceSelective, mb, "torchtitan", "--activation_checkpoint.selective_ac_option 2"},
		{AdviceShorterSequences, mb, "torchtitan", "--training.seq_len 1024"},
		{AdviceZeRO, Training{Parallel: Parallel{ZeRO: 2}}, "deepspeed", `"zero_optimization": {"stage": 2}`},
		{AdviceFullCheckpointing, mb, "deepspeed", "--gradient_checkpointing true"},
		{Advice8BitAdamW, mb, "torchtitan", ""},
		{AdviceLoRA, mb, "megatron", ""},
	} {
		if got := (Advice{Kind: c.kind, Plan: c.plan}).Flags(c.framework); !strings.Contains(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("%v in %s: %q, want %q", c.kind, c.framework, got, c.want)
		}
	}
	b, _ := json.Marshal(Advice{Kind: AdviceQLoRA})
	if !strings.Contains(string(b), `"kind":"qlora"`) {
		t.Errorf("advice JSON %s", b)
	}
	// Advise names every change it makes.
	g, _ := LookupGPU("RTX-4090")
	as, err := Advise(Training{Model: MustPreset("llama-3.2-1b"), SeqLen: 2048, MicroBatch: 8, Precision: "amp_bf16", Optimizer: "adamw"}, Budget{GPU: g})
	if err != nil || len(as) < 5 {
		t.Fatalf("%d advice, %v", len(as), err)
	}
	for _, a := range as {
		if a.Kind == AdviceUnknown {
			t.Errorf("%q has no kind", a.Change)
		}
	}
}

// TestVLLMAdvise: vLLM's own remedies, carved: the length its error
// estimates and twice the GPUs start a launch whose cache cannot hold one
// request of max_model_len; those that start come first.
func TestVLLMAdvise(t *testing.T) {
	g, _ := LookupGPU("RTX-4090")
	in := Inference{Model: MustPreset("llama-3.1-8b"), Batch: 1, PromptTokens: 1024}
	as, err := VLLM{Version: "0.11.0"}.Advise(in, g)
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for i, a := range as {
		flags = append(flags, a.Flag)
		if i > 0 && a.Starts && !as[i-1].Starts {
			t.Errorf("%q starts but comes after %q", a.Flag, as[i-1].Flag)
		}
	}
	got := strings.Join(flags, "; ")
	c, err := VLLM{Version: "0.11.0"}.Carve(in, g)
	if err != nil || c.KVCache.EstimatedMaxModelLen <= 0 {
		t.Fatalf("the carve gives no length that fits: %v", err)
	}
	for _, want := range []string{fmt.Sprintf("--max-model-len %d", c.KVCache.EstimatedMaxModelLen), "--tensor-parallel-size 2", "--kv-cache-dtype fp8", "--max-num-seqs 64"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %s", want, got)
		}
	}
	if !as[0].Starts {
		t.Errorf("nothing starts: %s", got)
	}
}
