package vram

import (
	"reflect"
	"sync"
	"testing"
)

// concurrently runs each(g) on n goroutines, g = 0 … n−1, and waits for
// them (the pooled-builder, pooled-replay and cache tests, under -race).
func concurrently(n int, each func(g int)) {
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			each(g)
		}()
	}
	wg.Wait()
}

// arenaPlans are plans of every block builder an estimate pools: decoder
// blocks (dense, MoE, MLA), a hybrid's recurrent layers, encoder-decoders
// (text and audio), a vision tower, pipeline stages, LoRA.
func arenaPlans() []Training {
	lora := Training{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16", Optimizer: "adamw",
		LoRA: &LoRA{Rank: 16, Alpha: 32, Targets: []string{"q_proj", "v_proj"}}, Checkpointing: "full"}
	pp := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 1, GradAccum: 8, Precision: "mixed_bf16", Optimizer: "adamw",
		Parallel: Parallel{PP: 4, PPSchedule: Schedule1F1B}}
	vl := Training{Model: MustPreset("qwen2.5-vl-7b"), SeqLen: 1024, MicroBatch: 1, Precision: "mixed_bf16", Optimizer: "adamw", Images: 1}
	t5 := Training{Model: MustPreset("flan-t5-base"), SeqLen: 512, DecoderSeqLen: 128, MicroBatch: 4, Precision: "fp32", Optimizer: "adamw"}
	whisper := Training{Model: MustPreset("whisper-small"), SeqLen: 3000, DecoderSeqLen: 448, MicroBatch: 2, Precision: "mixed_bf16", Optimizer: "adamw", Attention: "sdpa"}
	vl3 := Training{Model: MustPreset("qwen3-vl-8b"), SeqLen: 2048, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw", Images: 1, VisionTower: "trainable", Checkpointing: "full"}
	return []Training{llama70BPlan(), lora, pp, vl, vl3, t5, whisper,
		{Model: MustPreset("falcon-h1-0.5b-instruct"), SeqLen: 1024, MicroBatch: 2, Precision: "mixed_bf16", Optimizer: "adamw"},
		{Model: MustPreset("bamba-9b"), SeqLen: 1024, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw", Checkpointing: "full"},
		{Model: MustPreset("deepseek-v2-lite"), SeqLen: 1024, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw"},
		{Model: MustPreset("mixtral-8x7b"), SeqLen: 2048, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw", Checkpointing: "selective"},
	}
}

// TestEstimatesReuseBuilders: an estimate lends its op inventories'
// builders back to a pool; estimates made in any order, at once on several
// goroutines (go test -race), equal the timeline built without the pool,
// and an estimate's result keeps nothing of the pooled builders.
func TestEstimatesReuseBuilders(t *testing.T) {
	plans := arenaPlans()
	want := make([]Event, len(plans))
	wantBlock := make([]BlockActivations, len(plans))
	for i, tr := range plans {
		tl, err := tr.Timeline() // no arena: fresh builders
		if err != nil {
			t.Fatalf("plan %d: %v", i, err)
		}
		want[i] = tl.PeakEvent()
		wantBlock[i] = tl.block
		wantBlock[i].prog, wantBlock[i].bwd = nil, nil
	}
	concurrently(4, func(g int) {
		for n := 0; n < 3*len(plans); n++ {
			i := (n*7 + g*3) % len(plans)
			est, err := plans[i].estimate() // computed, not the cache's answer
			if err != nil {
				t.Errorf("plan %d: %v", i, err)
				return
			}
			if !reflect.DeepEqual(est.PeakAt, want[i]) {
				t.Errorf("plan %d, estimate %d on goroutine %d: peak %+v, the unpooled timeline's %+v", i, n, g, est.PeakAt, want[i])
			}
			if !reflect.DeepEqual(est.Block, wantBlock[i]) {
				t.Errorf("plan %d, estimate %d on goroutine %d: block %+v, the unpooled timeline's %+v", i, n, g, est.Block, wantBlock[i])
			}
			if est.Block.prog != nil || est.Timeline.block.prog != nil {
				t.Errorf("plan %d: the estimate keeps a pooled builder", i)
			}
		}
	})
}

// TestReplaysReuseAllocators: a replay takes its replayer and allocator
// from a pool and resets them; replays made in any order, at once on
// several goroutines (go test -race), with the plans' own allocator
// settings (expandable segments, a split limit), equal a replay on a new
// allocator, point by point.
func TestReplaysReuseAllocators(t *testing.T) {
	plans := arenaPlans()
	for _, conf := range []string{"expandable_segments:True", "max_split_size_mb:128"} {
		tr := plans[1]
		tr.AllocConf = conf
		plans = append(plans, tr)
	}
	want := make([]Replay, len(plans))
	for i, tr := range plans {
		r, err := tr.resolve()
		if err != nil {
			t.Fatalf("plan %d: %v", i, err)
		}
		blocks, embed, head := r.unitsSized(true)
		_, prog := simulateTraining(&r, blocks, embed, head, false, true)
		x := &replayer{a: NewAllocator(r.alloc)}
		x.reset(r.alloc, true, gemmWorkspace(nil, ""))
		x.run(prog)
		want[i] = Replay{PeakAllocated: x.a.PeakAlloc, PeakReserved: x.a.PeakReserved, Segments: x.a.Segments, Points: x.points}
	}
	concurrently(4, func(g int) {
		for n := 0; n < 2*len(plans); n++ {
			i := (n*5 + g*3) % len(plans)
			rep, err := plans[i].replay(ReplayOptions{Points: true}) // computed, not the cache's answer
			if err != nil {
				t.Errorf("plan %d: %v", i, err)
				return
			}
			got := Replay{PeakAllocated: rep.PeakAllocated, PeakReserved: rep.PeakReserved, Segments: rep.Segments, Points: rep.Points}
			if !reflect.DeepEqual(got, want[i]) {
				t.Errorf("plan %d, replay %d on goroutine %d: allocated %v reserved %v segments %d (%d points), a new allocator's %v, %v, %d (%d points)",
					i, n, g, got.PeakAllocated, got.PeakReserved, got.Segments, len(got.Points), want[i].PeakAllocated, want[i].PeakReserved, want[i].Segments, len(want[i].Points))
			}
		}
	})
	if want[len(want)-2].PeakReserved == want[1].PeakReserved {
		t.Errorf("expandable segments reserve what the default does (%v): the plan's setting did not reach the allocator", want[1].PeakReserved)
	}
}
