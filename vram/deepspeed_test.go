package vram

import (
	"encoding/json"
	"strings"
	"testing"
)

func dsPlan(t *testing.T, parallel string) Training {
	t.Helper()
	p, err := ParsePlan([]byte(`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1, "precision": "bf16", "framework": "deepspeed", "parallel": `+parallel+`}}`), t.TempDir())
	if err != nil {
		t.Fatalf("%s: %v", parallel, err)
	}
	return *p.Training
}

func estimateOf(t *testing.T, tr Training) TrainingEstimate {
	t.Helper()
	e, err := tr.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// DeepSpeed's ZeRO-1/2 allocate the flat gradient bucket (reduce_bucket_size
// elements in the model's dtype, twice with overlap_comm) when backward
// starts and free it as the step begins; ZeRO-3 keeps one from
// initialisation. contiguous_gradients false has no bucket.
func TestDeepSpeedGradientBucket(t *testing.T) {
	none := estimateOf(t, dsPlan(t, `{"dp": 8, "zero_stage": 2, "deepspeed": {"contiguous_gradients": false}}`))
	for _, c := range []struct {
		parallel string
		bucket   Bytes
	}{
		{`{"dp": 8, "zero_stage": 2}`, 2 * 5e8},
		{`{"dp": 8, "zero_stage": 2, "deepspeed": {"overlap_comm": true}}`, 2 * 2 * 5e8},
		{`{"dp": 8, "zero_stage": 2, "deepspeed": {"reduce_bucket_size": 2e8, "overlap_comm": true}}`, 2 * 2 * 2e8},
		{`{"dp": 8, "zero_stage": 2, "deepspeed": {"reduce_bucket_size": "auto"}}`, 2 * 4096 * 4096},
	} {
		e := estimateOf(t, dsPlan(t, c.parallel))
		if got := e.Static.Other - none.Static.Other; got != c.bucket {
			t.Errorf("%s: bucket %v, want %v", c.parallel, got, c.bucket)
		}
		if e.Peak.Total()-none.Peak.Total() > c.bucket {
			t.Errorf("%s: the bucket should add at most itself to the peak", c.parallel)
		}
	}
	z3 := dsPlan(t, `{"dp": 8, "zero_stage": 3}`)
	r, err := z3.resolve()
	if err != nil {
		t.Fatal(err)
	}
	tl, _ := z3.Timeline()
	for _, ev := range tl.Events {
		if ev.Live.Other < 2*5e8 {
			t.Fatalf("ZeRO-3's bucket should exist at every moment: %s has other %v", ev.Where(), ev.Live.Other)
		}
	}
	if b, persistent := r.dsBucket(); !persistent || b != 2*5e8 {
		t.Errorf("ZeRO-3 bucket %v persistent %v", b, persistent)
	}
}

// ZeRO-3 leaves parameters under stage3_param_persistence_threshold whole on
// every rank and prefetches no more than stage3_prefetch_bucket_size.
func TestDeepSpeedZeRO3Knobs(t *testing.T) {
	base := estimateOf(t, dsPlan(t, `{"dp": 8, "zero_stage": 3, "deepspeed": {"stage3_param_persistence_threshold": 1}}`))
	def := estimateOf(t, dsPlan(t, `{"dp": 8, "zero_stage": 3}`))
	// Llama-3-8B's 65 RMSNorm weights (4096 elements each) stay whole in bf16.
	if got, want := def.Peak.Parameters-base.Peak.Parameters, Bytes(65*4096*2*7/8); got != want {
		t.Errorf("persistent norms add %v to the parameters, want %v", got, want)
	}
	// The gathered parameters while block 1 runs its forward.
	gathered := func(parallel string) Bytes {
		tl, err := dsPlan(t, parallel).Timeline()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range tl.Events {
			if ev.Iteration == 2 && ev.Phase == "forward" && ev.Layer == 1 {
				return ev.Live.Temporaries
			}
		}
		t.Fatal("no forward event for block 1")
		return 0
	}
	full := gathered(`{"dp": 8, "zero_stage": 3}`)
	small := gathered(`{"dp": 8, "zero_stage": 3, "deepspeed": {"stage3_prefetch_bucket_size": 1000}}`)
	// The default bucket (5e7 elements) holds a part of the next block's
	// 218M parameters; 1000 elements next to nothing.
	if d := full - small; d != BF16.Size(5e7-1000) {
		t.Errorf("the prefetch bucket holds %v more of the next block, want %v", d, BF16.Size(5e7-1000))
	}
	capped := gathered(`{"dp": 8, "zero_stage": 3, "deepspeed": {"stage3_max_live_parameters": 1000}}`)
	if capped != small-BF16.Size(1000) {
		t.Errorf("a live cap below one block leaves nothing to prefetch: %v vs %v", capped, small)
	}
	// An explicit 0 (axolotl's zero3_bf16.json) is 0, not the default.
	zero := gathered(`{"dp": 8, "zero_stage": 3, "deepspeed": {"stage3_max_live_parameters": 0}}`)
	if zero != small-BF16.Size(1000) {
		t.Errorf("stage3_max_live_parameters 0 holds %v, want %v (as small a cap as 1000 elements)", zero, small-BF16.Size(1000))
	}
	if b, err := json.Marshal(DeepSpeed{MaxLiveParameters: DSZero}); err != nil || string(b) != `{"stage3_max_live_parameters":0}` {
		t.Errorf("an explicit 0 writes back as %s (%v)", b, err)
	}
}

func TestDeepSpeedErrors(t *testing.T) {
	for _, c := range []struct{ parallel, want string }{
		{`{"dp": 8, "zero_stage": 2, "deepspeed": {"reduce_bucket_size": "big"}}`, `"auto"`},
		{`{"dp": 8, "zero_stage": 2, "deepspeed": {"reduce_bucket_size": -5}}`, "whole number"},
		{`{"dp": 8, "zero_stage": 2, "deepspeed": {"stage3_prefetch_bucket_size": 1.5}}`, "whole number"},
		{`{"dp": 8, "fsdp": "full_shard", "deepspeed": {}}`, "parallel.deepspeed"},
		{`{"dp": 8, "deepspeed": {}}`, "parallel.deepspeed"},
	} {
		p, err := ParsePlan([]byte(`{"model": "gpt2", "train": {"seq_len": 64, "micro_batch": 1, "parallel": `+c.parallel+`}}`), t.TempDir())
		if err == nil {
			_, err = p.Training.Estimate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.parallel, err, c.want)
		}
	}
}
