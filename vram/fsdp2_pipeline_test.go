package vram

import (
	"strings"
	"testing"
)

// ppPlan is Llama-3-8B in 4 pipeline stages of 8 blocks, FSDP2 over 2
// ranks inside each, fp32 parameters computed in bf16 as torchtitan runs
// them (gradients reduced in fp32), every block checkpointed.
func ppPlan(fsdp string) Training {
	return Training{Model: MustPreset("llama-3-8b"), SeqLen: 8192, MicroBatch: 1, Precision: "fp32", ComputeDType: BF16,
		Checkpointing: "full", Framework: "torchtitan", Parallel: Parallel{PP: 4, PPMicrobatches: 8, DP: 2, FSDP: fsdp}}
}

// TestPipelineFSDP2Accumulates: inside a pipeline stage FSDP2 reduces
// nothing until the schedule's last micro-batch: each block's unsharded
// gradient is kept in fp32 (the reduce dtype) from its first backward on,
// so at the end of the stage's backward it holds every block's, and the
// other micro-batches in flight still hold their checkpointed inputs. The
// gradients then reduce-scatter to their shards at once.
func TestPipelineFSDP2Accumulates(t *testing.T) {
	tr := ppPlan("full_shard")
	r, err := tr.resolve()
	if err != nil {
		t.Fatal(err)
	}
	blocks, embed, head := r.units()
	tl, err := tr.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	st := r.stages()[tl.Stage]
	var accumulated, sharded Bytes
	for l := st.first; l < st.last; l++ {
		accumulated += blocks[l].gradsFull
		sharded += blocks[l].grads
	}
	if st.embed {
		sharded += embed.grads
	}
	if st.head {
		sharded += head.grads
	}
	if r.GradsDType != FP32 {
		t.Fatalf("gradients in %v, want fp32 (the reduce dtype)", r.GradsDType)
	}
	var reduce, lastBlock *Event
	for i := range tl.Events {
		ev := &tl.Events[i]
		if ev.Iteration != 2 {
			continue
		}
		if ev.Name == "pipeline reduce-scatter" {
			reduce = ev
		}
		if ev.Phase == "backward" && ev.Layer == st.first && strings.HasSuffix(ev.Name, "(accumulate)") {
			lastBlock = ev
		}
	}
	if reduce == nil || lastBlock == nil {
		t.Fatalf("no pipeline reduce-scatter or accumulate event in %d events", len(tl.Events))
	}
	if reduce.Live.Gradients < accumulated {
		t.Errorf("before the reduce-scatter the stage holds %v of gradients, want its blocks' accumulated %v", reduce.Live.Gradients, accumulated)
	}
	inflight := r.inflight(tl.Stage)
	others := scale(blockActivations(&r)[st.first].Input, inflight-1) * Bytes(st.last-st.first)
	if lastBlock.Live.Activations < others {
		t.Errorf("at the stage's last block's backward activations are %v, want at least the other micro-batches' inputs %v", lastBlock.Live.Activations, others)
	}
	for _, ev := range tl.Events {
		if ev.Iteration == 2 && ev.Phase == "optimizer" && ev.Live.Gradients > sharded*11/10 {
			t.Errorf("the step sees %v of gradients, want the shards (%v)", ev.Live.Gradients, sharded)
		}
	}
	// The replay runs the same rule.
	rp, err := tr.Replay(ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	est := estimateOf(t, tr)
	if ratio := float64(rp.PeakAllocated) / float64(est.Peak.Total()); ratio < 0.98 || ratio > 1.02 {
		t.Errorf("replay peak %v, timeline %v (ratio %.3f)", rp.PeakAllocated, est.Peak.Total(), ratio)
	}
	// Without pipeline stages FSDP2 reduce-scatters block by block.
	flat := ppPlan("full_shard")
	flat.Parallel.PP, flat.Parallel.PPMicrobatches = 1, 0
	ftl, err := flat.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range ftl.Events {
		if strings.Contains(ev.Name, "accumulate") || ev.Name == "pipeline reduce-scatter" {
			t.Fatalf("without pipeline parallelism: %s", ev.Where())
		}
	}
}
