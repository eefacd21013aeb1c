package vram

import (
	"slices"
	"strings"
	"testing"
)

func TestPipelineSplit(t *testing.T) {
	for _, c := range []struct {
		name      string
		layers    int
		pp, v     int
		framework Framework
		want      []int
	}{
		// Llama-3.1-405B on 8 ranks, 2 virtual stages each: torchtitan's
		// 16 stages of (126+2)/16 = 8, the first and the last one block
		// less; rank 0 holds stages 0 and 8, rank 7 stages 7 and 15.
		{"405B torchtitan interleaved", 126, 8, 2, "torchtitan", []int{15, 16, 16, 16, 16, 16, 16, 15}},
		// The even split of 126 over 16 stages: 7 or 8 a stage; rank 0 gets
		// stages 0 and 8, the two of 7.
		{"405B even interleaved", 126, 8, 2, "", []int{14, 16, 16, 16, 16, 16, 16, 16}},
		{"32 over 4", 32, 4, 1, "", []int{8, 8, 8, 8}},
		// torchtitan 1F1B: 34 effective layers over 4 stages, 9 9 8 8.
		{"torchtitan 1f1b", 32, 4, 1, "torchtitan", []int{8, 9, 8, 7}},
		{"uneven 1f1b", 30, 4, 1, "", []int{7, 8, 7, 8}},
	} {
		r := &resolved{Training: Training{Framework: c.framework}, m: Model{Layers: c.layers}, pp: c.pp}
		r.Parallel.PP = c.pp
		if c.v > 1 {
			r.Parallel.PPSchedule, r.Parallel.VirtualStages = "interleaved_1f1b", c.v
		}
		got := r.blocksPerRank()
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: blocks per rank %v, want %v", c.name, got, c.want)
		}
		sum := 0
		for _, n := range got {
			sum += n
		}
		st := r.stages()
		if sum != c.layers || st[0].first != 0 || st[len(st)-1].last != c.layers || !st[0].embed || !st[len(st)-1].head {
			t.Errorf("%s: stages %+v do not cover the %d layers once", c.name, st, c.layers)
		}
	}
}

func TestPipeline405BInterleavedIsExpressible(t *testing.T) {
	m := MustPreset("llama-3.1-405b")
	if m.Layers != 126 {
		t.Fatalf("llama-3.1-405b has %d layers, want 126", m.Layers)
	}
	tr := Training{Model: m, SeqLen: 8192, MicroBatch: 8, Precision: "bf16", Checkpointing: "full", Framework: "torchtitan",
		Parallel: Parallel{DP: 8, ZeRO: 3, FSDP: "full_shard", TP: 8, SP: true, PP: 8, PPSchedule: "interleaved_1f1b", VirtualStages: 2, PPMicrobatches: 8}}
	est, err := tr.Estimate()
	if err != nil {
		t.Fatalf("405B on 8 interleaved stages of 2: %v", err)
	}
	if est.Peak.Total() <= 0 || est.Peak.Total() > 80*GiB {
		t.Errorf("405B per GPU: %v", est.Peak.Total())
	}
	bad := tr
	bad.Parallel.VirtualStages = 16 // 128 stages for 126 layers
	if _, err := bad.Estimate(); err == nil || !strings.Contains(err.Error(), "interleaved_1f1b") {
		t.Errorf("more stages than layers: %v", err)
	}
}

// A stage computes one pipeline microbatch at a time (micro_batch /
// pp_microbatches sequences), the embedding and the loss as much as the
// blocks: with the pipeline full either way (pp_microbatches ≥ pp), 16
// sequences in 8 microbatches need what 8 in 4 do.
func TestPipelineMicrobatchEdges(t *testing.T) {
	est := func(mb, ppm int) TrainingEstimate {
		tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: mb, Precision: "bf16", Framework: "torchtitan",
			Parallel: Parallel{PP: 4, PPMicrobatches: ppm, DP: 2, FSDP: "full_shard"}}
		e, err := tr.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := est(16, 8), est(8, 4)
	if a.Peak != b.Peak || a.PeakAt.Where() != b.PeakAt.Where() {
		t.Errorf("16 sequences in 8 microbatches: %v at %s; 8 in 4: %v at %s", a.Peak.Total(), a.PeakAt.Where(), b.Peak.Total(), b.PeakAt.Where())
	}
	// The last stage's logits are one microbatch's (2 × 4096 × 128256 in
	// fp32 is 3.9 GiB), not the whole micro-batch's.
	if a.Peak.Temporaries > 10*GiB {
		t.Errorf("temporaries at the peak %v: the loss of more than one pipeline microbatch", a.Peak.Temporaries)
	}
}
