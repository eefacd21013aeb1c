package vram

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func llamaPlan() Training {
	return Training{Model: MustPreset("llama-2-7b"), SeqLen: 2048, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw"}
}

func TestTrainingValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Training)
		want string
	}{
		{func(t *Training) { t.MicroBatch = 0 }, "micro_batch must be in [1, "},
		{func(t *Training) { t.SeqLen = -1 }, "seq_len must be in [1, "},
		{func(t *Training) { t.Optimizer = "adamx" }, `unknown optimizer "adamx"; known: adamw, adam`},
		{func(t *Training) { t.Precision = "fp12" }, `unknown precision "fp12"`},
		{func(t *Training) { t.Parallel.TP = 3 }, "tp=3 does not divide 32 attention heads"},
		{func(t *Training) { t.Parallel.ZeRO = 4 }, "parallel.zero_stage must be 0, 1, 2 or 3"},
		{func(t *Training) { t.Parallel.PP = 64 }, "pp=64 exceeds the 32 layers"},
		{func(t *Training) { t.Parallel.CP = 3 }, "cp=3 does not divide seq_len = 2048"},
		{func(t *Training) { t.Parallel.SP = true }, "parallel.sp needs tp > 1"},
		{func(t *Training) { t.Trainable = "lora" }, `trainable "lora" needs a lora object`},
		{func(t *Training) { t.LoRA = &LoRA{Rank: 0, Targets: []string{"q_proj"}} }, "lora.rank must be in [1, 65536]"},
		{func(t *Training) { t.LoRA = &LoRA{Rank: 8, Targets: []string{"qq"}} }, `unknown lora target "qq"`},
		{func(t *Training) { t.QuantizedBase = Quant{DType: NF4} }, "needs a frozen base"},
		{func(t *Training) { t.Attention = "fast" }, `unknown attention "fast"`},
		{func(t *Training) { t.Optimizer = "custom" }, "custom_state_bytes must be in (0, 1024]"},
		{func(t *Training) { t.Checkpointing = "some" }, `unknown grad_checkpointing "some"`},
		{func(t *Training) { d := 1.5; t.Dropout = &d }, "dropout must be in [0, 1)"},
		{func(t *Training) { t.Model.Layers = 0 }, "model.layers must be ≥ 1"},
	} {
		tr := llamaPlan()
		tc.edit(&tr)
		_, err := tr.Estimate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Estimate() error = %v, want one containing %q", err, tc.want)
		}
	}
}

// TestBreakdownTotalIsSum: Total is exactly the sum and String shows it.
func TestBreakdownTotalIsSum(t *testing.T) {
	est, err := llamaPlan().Estimate()
	if err != nil {
		t.Fatal(err)
	}
	var sum Bytes
	for _, it := range est.Peak.Items() {
		sum += it.Bytes
	}
	if sum != est.Peak.Total() {
		t.Errorf("items sum to %d, Total is %d", sum, est.Peak.Total())
	}
	if s := est.Peak.String(); !strings.Contains(s, "total") || !strings.Contains(s, "GiB") {
		t.Errorf("String() = %q", s)
	}
	if est.Static.Total() < est.Peak.Total() {
		t.Errorf("sum of category maxima %v < peak %v", est.Static.Total(), est.Peak.Total())
	}
	// A category under 0.1 % is said with the total in its own unit (never
	// as 0.00, nor as a row of "<0.1%"); zero rows are left out.
	small := Breakdown{Parameters: 20 * GiB, Other: 32 * KiB}
	want := "parameters           20.00 GiB  100.0%\ntotal                20.00 GiB   (with other 32.00 KiB)\n"
	if got := small.String(); got != want {
		t.Errorf("String() =\n%s, want\n%s", got, want)
	}
}

// TestPeakInBackward: the article's claim. With set_to_none gradients each
// block's backward adds its gradients and frees its activations; when a
// block's gradients outweigh its activations (a full fine-tune at a short
// sequence), memory climbs through the backward pass and peaks late in it.
func TestPeakInBackward(t *testing.T) {
	tr := Training{Model: MustPreset("llama-2-7b"), SeqLen: 512, MicroBatch: 1, Precision: "fp32",
		Optimizer: "sgd", Attention: "sdpa"}
	est, err := tr.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	late := est.PeakAt.Layer < tr.Model.Layers/2 // blocks run backward from the last; -1 is the embedding at the end
	if est.PeakAt.Phase != "backward" || !late {
		t.Errorf("peak at %s, want in the second half of the backward pass", est.PeakAt.Where())
	}
	ms, _ := tr.ModelStates()
	if est.Peak.Gradients < ms.Gradients/2 {
		t.Errorf("peak holds %v of gradients, want most of the %v", est.Peak.Gradients, ms.Gradients)
	}
}

// TestFirstStepCreatesStates: optimizer states appear in iteration 1's step;
// the forward of iteration 1 has none, iteration 2's forward has them all.
func TestFirstStepCreatesStates(t *testing.T) {
	tl, err := llamaPlan().Timeline()
	if err != nil {
		t.Fatal(err)
	}
	var first, second Event
	for _, e := range tl.Events {
		if e.Phase == "forward" && e.Layer == 0 {
			if e.Iteration == 1 {
				first = e
			} else {
				second = e
			}
		}
	}
	if first.Live.OptimizerStates != 0 || second.Live.OptimizerStates == 0 {
		t.Errorf("optimizer states at forward block 0: iteration 1 %v, iteration 2 %v", first.Live.OptimizerStates, second.Live.OptimizerStates)
	}
	for _, e := range tl.Events {
		for _, v := range e.Live.values() {
			if v < 0 {
				t.Fatalf("negative live bytes at %s: %+v", e.Where(), e.Live)
			}
		}
	}
}

// TestRetainedGradientsDouble: keeping a copy of every gradient (out-of-place
// clipping) doubles gradient memory at the step; set_to_none frees them.
func TestRetainedGradientsDouble(t *testing.T) {
	base := Training{Model: MustPreset("gpt2"), SeqLen: 512, MicroBatch: 1, Precision: "fp32", Optimizer: "sgd_momentum"}
	ms, _ := base.ModelStates()
	base.RetainGradCopies = true
	tl, err := base.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tl.Events {
		if e.Phase == "optimizer" && e.Live.Gradients != 2*ms.Gradients {
			t.Errorf("gradients at the step with retained copies = %v, want 2 × %v", e.Live.Gradients, ms.Gradients)
		}
	}
}

// TestNoGradInference: no gradients, no optimizer, no saved activations.
func TestNoGradInference(t *testing.T) {
	in := Inference{Model: MustPreset("llama-2-7b"), Weights: Quant{DType: BF16}, Batch: 1, PromptTokens: 2048, NewTokens: 1}
	est, err := in.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if est.Peak.Gradients != 0 || est.Peak.Activations != 0 || est.Peak.OptimizerStates != 0 {
		t.Errorf("inference keeps %+v", est.Peak)
	}
	if want := Bytes(2 * MustPreset("llama-2-7b").ParamCount()); est.Weights != want {
		t.Errorf("weights %v, want %v", est.Weights, want)
	}
}

// TestKVCache: 2 (K and V) × layers × kv_heads × head_dim × dtype per token.
func TestKVCache(t *testing.T) {
	for _, tc := range []struct {
		preset string
		kv     DType
		want   Bytes
	}{
		{"llama-2-7b", FP16, 2 * 32 * 32 * 128 * 2}, // 512 KiB: MHA
		{"llama-3-8b", BF16, 2 * 32 * 8 * 128 * 2},  // 128 KiB: GQA 8
		{"llama-3-8b", FP8E4M3, 2 * 32 * 8 * 128},   // fp8 cache
		{"starcoder", FP16, 2 * 40 * 1 * 128 * 2},   // MQA
		{"deepseek-v3", BF16, 61 * (512 + 64) * 2},  // MLA latent + rope key
	} {
		in := Inference{Model: MustPreset(tc.preset), Batch: 1, PromptTokens: 10, KVDType: tc.kv}
		est, err := in.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		if est.KVPerToken != tc.want {
			t.Errorf("%s %s: KV per token %v, want %v", tc.preset, tc.kv, est.KVPerToken, tc.want)
		}
	}
	// Sliding window bounds Mistral's cache (DynamicSlidingWindowLayer keeps
	// the last window − 1 tokens); paged blocks round it up.
	in := Inference{Model: MustPreset("mistral-7b"), Batch: 2, PromptTokens: 10000, NewTokens: 1}
	est, _ := in.Estimate()
	if want := 2 * 4095 * est.KVPerToken; est.KVCache != want {
		t.Errorf("mistral sliding window cache %v, want %v", est.KVCache, want)
	}
	in = Inference{Model: MustPreset("llama-3-8b"), Batch: 1, PromptTokens: 17, Cache: "paged"}
	est, _ = in.Estimate()
	if want := 32 * est.KVPerToken; est.KVCache != want {
		t.Errorf("paged cache %v, want 32 tokens' worth %v", est.KVCache, want)
	}
}

// TestShardingNeverIncreases: more sharding never needs more per GPU for
// the sharded parts (the estimator invariant).
func TestShardingNeverIncreases(t *testing.T) {
	prev := MaxBytes
	for _, dp := range []int{1, 2, 4, 8, 16} {
		tr := llamaPlan()
		tr.Precision = "mixed_bf16"
		tr.Parallel = Parallel{DP: dp, ZeRO: 3}
		ms, err := tr.ModelStates()
		if err != nil {
			t.Fatal(err)
		}
		if ms.Total() > prev {
			t.Errorf("dp=%d: model states %v > %v with fewer ranks", dp, ms.Total(), prev)
		}
		prev = ms.Total()
	}
}

func TestLoRAParams(t *testing.T) {
	// litgpt's table: Llama-2-7B, r=8 on query and value → 4,194,304 trainable
	// (32 layers × 2 × 8 × (4096 + 4096)).
	tr := llamaPlan()
	tr.LoRA = &LoRA{Rank: 8, Targets: []string{"q_proj", "v_proj"}}
	est, err := tr.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if est.TrainableParams != 4194304 {
		t.Errorf("LoRA trainable = %d, want 4194304", est.TrainableParams)
	}
}

// TestTimelineConsistency: the timeline and the static model states come
// from the same inventory. Parameters are the same at every event; in the
// steady-state iteration the optimizer states are complete from the first
// forward; gradients never exceed the model states' gradients; the peak holds
// at least the persistent parts that coexist at it.
func TestTimelineConsistency(t *testing.T) {
	for _, tr := range []Training{
		llamaPlan(),
		{Model: MustPreset("gpt2"), SeqLen: 1024, MicroBatch: 4, Precision: "amp_bf16", Optimizer: "adamw", Checkpointing: "full"},
		{Model: MustPreset("mixtral-8x7b"), SeqLen: 4096, MicroBatch: 1, Precision: "mixed_bf16", Optimizer: "adamw",
			Parallel: Parallel{DP: 8, EP: 8, FSDP: "full_shard"}},
		{Model: MustPreset("llama-3.1-70b"), SeqLen: 8192, MicroBatch: 8, Precision: "mixed_bf16",
			Parallel: Parallel{TP: 8, SP: true, PP: 4, PPMicrobatches: 8, DP: 2, ZeRO: 1}},
	} {
		ms, err := tr.ModelStates()
		if err != nil {
			t.Fatal(err)
		}
		tl, err := tr.Timeline()
		if err != nil {
			t.Fatal(err)
		}
		r, _ := tr.resolve()
		onOneStage := r.pp == 1
		var buffers Bytes // live with the parameters, not a model state
		for _, b := range tr.Model.Buffers() {
			buffers += b.Bytes()
		}
		for _, e := range tl.Events {
			if onOneStage && e.Live.Parameters != ms.Parameters+buffers {
				t.Errorf("%s %s: parameters %v, model states %v + buffers %v", tr.Model.Name, e.Where(), e.Live.Parameters, ms.Parameters, buffers)
			}
			if e.Live.Gradients > 2*ms.Gradients {
				t.Errorf("%s %s: gradients %v exceed the model's %v", tr.Model.Name, e.Where(), e.Live.Gradients, ms.Gradients)
			}
			if onOneStage && e.Iteration == 2 && e.Phase == "forward" && e.Live.OptimizerStates != ms.OptimizerStates {
				t.Errorf("%s %s: optimizer states %v, model states %v", tr.Model.Name, e.Where(), e.Live.OptimizerStates, ms.OptimizerStates)
			}
		}
		peak := tl.PeakEvent()
		if peak.Live.Total() < peak.Live.Parameters+peak.Live.OptimizerStates {
			t.Errorf("%s: peak %v below its persistent parts", tr.Model.Name, peak.Live.Total())
		}
		for _, e := range tl.Events {
			if e.Live.Total() > peak.Live.Total() {
				t.Errorf("%s: event %s above the peak", tr.Model.Name, e.Where())
			}
		}
	}
}

func TestBreakdownJSONRoundTrip(t *testing.T) {
	est, _ := llamaPlan().Estimate()
	b, err := json.Marshal(est.Peak)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"total":`) {
		t.Errorf("JSON lacks the total: %s", b)
	}
	var back Breakdown
	if err := json.Unmarshal(b, &back); err != nil || back != est.Peak {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

// TestOutputHeldThroughBackward: a plain loop keeps the model output (the
// logits) in scope through loss.backward(); the HF Trainer returns only the
// loss from compute_loss, so the logits are gone before backward. With
// checkpointing (no cache) the two peaks differ by exactly the logits.
func TestOutputHeldThroughBackward(t *testing.T) {
	plan := Training{Model: MustPreset("gpt2"), SeqLen: 1024, MicroBatch: 4, Precision: "bf16",
		Checkpointing: "full", Optimizer: "sgd"}
	peak := func(framework Framework) TrainingEstimate {
		p := plan
		p.Framework = framework
		est, err := p.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		return est
	}
	plain, trainer := peak("plain_pytorch"), peak("hf_trainer")
	logits := BF16.Size(4 * 1024 * 50257)
	if got := plain.Peak.Total() - trainer.Peak.Total(); got != logits {
		t.Errorf("plain loop − Trainer = %v (at %s and %s), want the logits %v",
			got, plain.PeakAt.Where(), trainer.PeakAt.Where(), logits)
	}
}

// TestEstimateMatchesRecordedTimeline: Estimate evaluates a run of
// identical blocks at its first two and its last iterations (step_run.go);
// its peak and category maxima are those of the fully recorded timeline.
func TestEstimateMatchesRecordedTimeline(t *testing.T) {
	plans := []Training{
		llamaPlan(),
		{Model: MustPreset("gpt2"), SeqLen: 1024, MicroBatch: 4, Precision: "amp_bf16", Checkpointing: "full"},
		{Model: MustPreset("llama-2-7b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16", Checkpointing: "selective"},
		{Model: MustPreset("mixtral-8x7b"), SeqLen: 4096, MicroBatch: 1, Precision: "mixed_bf16",
			Parallel: Parallel{DP: 8, EP: 8, FSDP: "full_shard"}},
		{Model: MustPreset("llama-3.1-70b"), SeqLen: 8192, MicroBatch: 8, Precision: "mixed_bf16",
			Parallel: Parallel{TP: 8, SP: true, PP: 4, PPMicrobatches: 8, DP: 2, ZeRO: 1}},
		{Model: MustPreset("llama-2-70b"), SeqLen: 1024, MicroBatch: 1, Precision: "bf16", Checkpointing: "full",
			LoRA: &LoRA{Rank: 16, Targets: []string{"all_linear"}}, QuantizedBase: Quant{DType: NF4},
			Parallel: Parallel{DP: 8, FSDP: "full_shard", FSDPVersion: 1}},
		{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16", OptimizerInBackward: true},
		{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 2, GradAccum: 4, Precision: "mixed_bf16",
			Parallel: Parallel{DP: 4, ZeRO: 2}},
		{Model: MustPreset("deepseek-v3"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Checkpointing: "full",
			Parallel: Parallel{DP: 64, EP: 64, FSDP: "full_shard"}},
	}
	for _, tr := range plans {
		est, err := tr.Estimate()
		if err != nil {
			t.Fatalf("%s: %v", tr.Model.Name, err)
		}
		tl, err := tr.Timeline()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := est.Peak.Total(), tl.PeakEvent().Live.Total(); got != want {
			t.Errorf("%s: estimate peak %v, recorded timeline %v", tr.Model.Name, got, want)
		}
		var max Breakdown
		for _, e := range tl.Events {
			max = max.Max(e.Live)
		}
		if max != tl.static {
			t.Errorf("%s: recorded maxima %+v, kept %+v", tr.Model.Name, max, tl.static)
		}
	}
}

// TestExpertImbalance: a busier expert can only raise the peak; the field
// is checked against the model.
func TestExpertImbalance(t *testing.T) {
	base := Training{Model: MustPreset("mixtral-8x7b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16",
		Checkpointing: "full", Parallel: Parallel{DP: 8, EP: 8, FSDP: "full_shard"}}
	var last Bytes
	for _, imb := range []float64{1, 1.5, 3, 8} {
		tr := base
		tr.Parallel.EP = 1
		tr.ExpertImbalance = imb
		est, err := tr.Estimate()
		if err != nil {
			t.Fatalf("imbalance %v: %v", imb, err)
		}
		if est.Peak.Total() < last {
			t.Errorf("imbalance %v lowers the peak to %v (from %v)", imb, est.Peak.Total(), last)
		}
		last = est.Peak.Total()
	}
	for _, tc := range []struct {
		tr   Training
		want string
	}{
		{Training{Model: MustPreset("gpt2"), SeqLen: 128, MicroBatch: 1, ExpertImbalance: 1.2}, "expert_imbalance applies to mixture-of-experts models"},
		{func() Training { b := base; b.ExpertImbalance = 0.5; return b }(), "expert_imbalance must be between 1 and the experts per rank (1)"},
		{func() Training { b := base; b.Parallel.EP = 1; b.ExpertImbalance = 9; return b }(), "expert_imbalance must be between 1 and the experts per rank (8)"},
		{func() Training { b := base; b.ExpertImbalance = math.NaN(); return b }(), "expert_imbalance must be between 1"},
	} {
		if _, err := tc.tr.Estimate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.tr.ExpertImbalance, err, tc.want)
		}
	}
}

// TestOptimizerInBackwardKeepsStates: with the optimizer in backward each
// unit's states appear in its grad hook during the first backward, the
// embedding's and the head's too, and they stay: the second iteration runs
// with all of them (the two-walk engine's timeline had dropped them from
// iteration 2 and never counted the embedding's and the head's).
func TestOptimizerInBackwardKeepsStates(t *testing.T) {
	tr := Training{Model: MustPreset("llama-3.2-1b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16", OptimizerInBackward: true, Framework: "torchtune"}
	tl, err := tr.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	states, err := tr.ModelStates()
	if err != nil {
		t.Fatal(err)
	}
	var forward2 int
	for _, e := range tl.Events {
		if e.Iteration == 2 && e.Phase == "forward" {
			forward2++
			if e.Live.OptimizerStates != states.OptimizerStates {
				t.Fatalf("iteration 2 %s: optimizer states %v, want all of them (%v)", e.Where(), e.Live.OptimizerStates, states.OptimizerStates)
			}
		}
		if e.Iteration == 1 && e.Phase == "forward" && e.Live.OptimizerStates != 0 {
			t.Fatalf("iteration 1 %s: optimizer states %v before any step", e.Where(), e.Live.OptimizerStates)
		}
	}
	if forward2 == 0 {
		t.Fatal("no forward moment in iteration 2")
	}
}
