package vram

import "testing"

// Hand-worked sequences through the caching-allocator model.
func TestAllocatorReuse(t *testing.T) {
	a := NewAllocator(AllocatorConfig{})
	h := a.Malloc(100 * MiB)
	a.Free(h)
	a.Malloc(60 * MiB) // best fit: the cached 100 MiB block, split (40 MiB > 1 MiB stays free)
	if a.Reserved() != 100*MiB || a.Allocated() != 60*MiB || a.Segments != 1 {
		t.Errorf("reserved %v allocated %v segments %d; want 100 MiB, 60 MiB, 1", a.Reserved(), a.Allocated(), a.Segments)
	}
	a.Malloc(40 * MiB) // the split remainder
	if a.Reserved() != 100*MiB || a.Segments != 1 {
		t.Errorf("remainder not reused: reserved %v, segments %d", a.Reserved(), a.Segments)
	}
}

func TestAllocatorFragmentation(t *testing.T) {
	a := NewAllocator(AllocatorConfig{})
	x := a.Malloc(30 * MiB)
	a.Malloc(30 * MiB)
	a.Free(x)
	a.Malloc(40 * MiB) // 30 MiB free block too small: a new 40 MiB segment
	if got := a.Reserved() - a.Allocated(); got != 30*MiB {
		t.Errorf("reserved − allocated = %v, want the 30 MiB hole", got)
	}
	if a.PeakReserved != 100*MiB || a.PeakAlloc != 70*MiB {
		t.Errorf("peaks reserved %v allocated %v, want 100 MiB and 70 MiB", a.PeakReserved, a.PeakAlloc)
	}
	// With expandable segments the hole at the end is grown instead.
	e := NewAllocator(AllocatorConfig{ExpandableSegments: true})
	x = e.Malloc(30 * MiB)
	e.Malloc(30 * MiB)
	e.Free(x)
	e.Malloc(40 * MiB)
	if e.Reserved() > 120*MiB || e.Reserved() < 100*MiB {
		t.Errorf("expandable reserved %v, want 100–120 MiB (20 MiB pages)", e.Reserved())
	}
}

func TestAllocatorSegmentSizes(t *testing.T) {
	for _, tc := range []struct {
		req, reserved, allocated Bytes
	}{
		{1, 2 * MiB, 512},                    // rounded to 512 B from a 2 MiB small segment
		{1000, 2 * MiB, 1024},                // 512-byte multiples
		{MiB, 2 * MiB, MiB},                  // ≤ 1 MiB is small
		{MiB + 1, 20 * MiB, MiB + 512},       // 1–10 MiB: a 20 MiB segment
		{5 * MiB, 20 * MiB, 5 * MiB},         //
		{10*MiB + 1, 12 * MiB, 10*MiB + 512}, // ≥ 10 MiB: rounded up to 2 MiB
		{100 * MiB, 100 * MiB, 100 * MiB},
	} {
		a := NewAllocator(AllocatorConfig{})
		a.Malloc(tc.req)
		if a.Reserved() != tc.reserved || a.Allocated() != tc.allocated {
			t.Errorf("Malloc(%d): reserved %d allocated %d, want %d and %d", tc.req, a.Reserved(), a.Allocated(), tc.reserved, tc.allocated)
		}
	}
	// The 20 MiB segment serves several mid-size requests.
	a := NewAllocator(AllocatorConfig{})
	a.Malloc(5 * MiB)
	a.Malloc(5 * MiB)
	a.Malloc(5 * MiB)
	if a.Reserved() != 20*MiB || a.Segments != 1 {
		t.Errorf("three 5 MiB requests: reserved %v in %d segments, want 20 MiB in 1", a.Reserved(), a.Segments)
	}
}

func TestAllocatorMaxSplitSize(t *testing.T) {
	a := NewAllocator(AllocatorConfig{MaxSplitSize: 50 * MiB})
	h := a.Malloc(200 * MiB)
	a.Free(h)
	a.Malloc(10 * MiB) // may not split the oversize 200 MiB block
	if a.Reserved() != 210*MiB {
		t.Errorf("reserved %v, want 200 + 10 MiB (a new segment of exactly 10 MiB)", a.Reserved())
	}
}

// TestReplayMatchesTimeline: the timeline and the allocator replay evaluate
// one step program (program.go), so the most the replay has allocated at
// once, before the allocator's rounding, is the timeline's peak plus the
// cuBLAS workspace, to the byte: for the plans below and for the estimates
// golden's replayed plans of every catalog model (TestEstimatesGolden runs
// those; testAgreement is shared). Reserved is never below allocated.
func TestReplayMatchesTimeline(t *testing.T) {
	for _, tr := range []Training{
		llamaPlan(),
		{Model: MustPreset("gpt2"), SeqLen: 1024, MicroBatch: 8, Precision: "amp_bf16", Attention: "eager"},
		{Model: MustPreset("llama-2-7b"), SeqLen: 512, MicroBatch: 2, Precision: "bf16", Checkpointing: "full",
			LoRA: &LoRA{Rank: 8, Targets: []string{"q_proj", "v_proj"}}},
		// Sharded runs: the optimizer step's scratch is a shard's.
		{Model: MustPreset("llama-3.1-70b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Checkpointing: "full",
			Parallel: Parallel{DP: 8, FSDP: "full_shard"}},
		{Model: MustPreset("mixtral-8x7b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16", Parallel: Parallel{DP: 8, ZeRO: 2}},
		{Model: MustPreset("mixtral-8x7b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Checkpointing: "full",
			Parallel: Parallel{DP: 8, EP: 8, FSDP: "full_shard"}},
		// Pipelines: the other microbatches in flight hold their saved
		// activations too.
		{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 16, Precision: "bf16", Framework: "torchtitan",
			Parallel: Parallel{PP: 4, PPMicrobatches: 8, DP: 2, FSDP: "full_shard"}},
		{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 16, Precision: "bf16",
			Parallel: Parallel{PP: 4, PPSchedule: "dualpipev", PPMicrobatches: 8}},
		// Checkpointed: each microbatch in flight keeps the block inputs,
		// and only the one back-propagated recomputes a block.
		{Model: MustPreset("llama-3-8b"), SeqLen: 8192, MicroBatch: 8, Precision: "bf16", Checkpointing: "full", Framework: "torchtitan",
			Parallel: Parallel{PP: 8, PPMicrobatches: 8, DP: 2, FSDP: "full_shard"}},
		{Model: MustPreset("llama-3.1-70b"), SeqLen: 8192, MicroBatch: 8, Precision: "mixed_bf16",
			Parallel: Parallel{TP: 8, SP: true, PP: 4, PPSchedule: "interleaved_1f1b", VirtualStages: 2, PPMicrobatches: 8, DP: 2, ZeRO: 1}},
		// Megatron's uniform recompute groups, DeepSpeed's prefetch and
		// buckets with accumulation, the optimizer in backward, retained
		// gradient copies, activation and parameter offload, compile.
		{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 2, Precision: "mixed_bf16", Checkpointing: "full", Framework: "megatron",
			RecomputeMethod: "uniform", RecomputeNumLayers: 4, Parallel: Parallel{TP: 2, PP: 2, PPMicrobatches: 4, DP: 2, ZeRO: 1}},
		{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 2, GradAccum: 4, Precision: "mixed_bf16", Framework: "deepspeed",
			Parallel: Parallel{DP: 8, ZeRO: 3}},
		{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 2, GradAccum: 4, Precision: "mixed_bf16", Framework: "deepspeed",
			Parallel: Parallel{DP: 8, ZeRO: 2}},
		{Model: MustPreset("llama-3.2-1b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16", OptimizerInBackward: true, Framework: "torchtune"},
		{Model: MustPreset("gpt2"), SeqLen: 1024, MicroBatch: 4, Precision: "amp_bf16", RetainGradCopies: true, KeepGrads: true},
		{Model: MustPreset("llama-3.2-1b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16", Checkpointing: "full", ActivationOffloading: true, Framework: "torchtune"},
		{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 1, Precision: "mixed_bf16", Checkpointing: "full",
			Parallel: Parallel{DP: 8, FSDP: "full_shard", CPUOffload: "optimizer+params"}},
		{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Compile: true, Framework: "torchtitan",
			Parallel: Parallel{DP: 8, FSDP: "full_shard"}},
		// torchtitan's chunked head with the gradients kept (CUDA graphs).
		{Model: MustPreset("llama-3.1-8b"), SeqLen: 8192, MicroBatch: 1, Precision: "fp32", ComputeDType: BF16, Checkpointing: "selective",
			SelectiveACOption: "op", Loss: "chunked_head", KeepGrads: true, Framework: "torchtitan", Parallel: Parallel{DP: 8, FSDP: "full_shard", FSDPVersion: 2}},
		{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Checkpointing: "op", Framework: "torchtitan",
			Parallel: Parallel{DP: 8, FSDP: "full_shard"}},
	} {
		testAgreement(t, tr.Model.Name, tr)
	}
}

// testAgreement checks that tr's replay allocates at most the timeline's
// peak plus the workspace, and exactly that much at its most.
func testAgreement(t *testing.T, name string, tr Training) {
	t.Helper()
	est, err := tr.Estimate()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	rep, err := tr.Replay(ReplayOptions{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if rep.PeakReserved < rep.PeakAllocated {
		t.Errorf("%s: reserved %v < allocated %v", name, rep.PeakReserved, rep.PeakAllocated)
	}
	if want := est.Peak.Total() + rep.Workspace; rep.requested != want {
		t.Errorf("%s: the replay's most requested %d, the timeline's peak and the workspace %d (%+d)", name, rep.requested, want, rep.requested-want)
	}
}

// A block freed on one stream is cached for that stream only: the compute
// stream cannot reuse what a collective's stream freed (PyTorch's pools
// order blocks by stream first), and the collective's stream reuses its own.
func TestAllocatorStreamsKeepTheirBlocks(t *testing.T) {
	a := NewAllocator(AllocatorConfig{})
	a.SetStream(1)
	a.Free(a.Malloc(100 * MiB))
	a.SetStream(0)
	h := a.Malloc(100 * MiB)
	if a.Reserved() != 200*MiB || a.ReservedOn(1) != 100*MiB || a.ReservedOn(0) != 100*MiB {
		t.Errorf("reserved %v (stream 0 %v, stream 1 %v), want 100 MiB each", a.Reserved(), a.ReservedOn(0), a.ReservedOn(1))
	}
	a.Free(h)
	a.SetStream(1)
	a.Malloc(60 * MiB) // fits the stream's own cached block
	if a.Reserved() != 200*MiB {
		t.Errorf("stream 1 should reuse its block: reserved %v", a.Reserved())
	}
	a.EmptyCache()
	if a.ReservedOn(0) != 0 || a.ReservedOn(1) != 100*MiB {
		t.Errorf("after empty_cache: stream 0 %v, stream 1 %v", a.ReservedOn(0), a.ReservedOn(1))
	}
}

// Under FSDP2 the all-gather outputs live on their own stream: the replay
// caches no more there than the two in flight at once (a block's and the
// next's), reused block after block, and the reserved peak counts it apart
// from the compute stream's.
func TestFSDP2ReplayStreams(t *testing.T) {
	tr := Training{Model: MustPreset("llama-3.1-70b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Checkpointing: "full",
		Parallel: Parallel{DP: 8, FSDP: "full_shard"}}
	r, err := tr.resolve()
	if err != nil {
		t.Fatal(err)
	}
	blocks, embed, head := r.unitsSized(true)
	_, prog := simulateTraining(&r, blocks, embed, head, false, true)
	x := &replayer{a: NewAllocator(AllocatorConfig{})}
	x.reset(AllocatorConfig{}, false, 0)
	x.run(prog)
	g := segmentSize(roundSize(blocks[0].gathered))
	if ag := x.a.ReservedOn(allGatherStream); ag == 0 || ag > 2*g {
		t.Errorf("all-gather stream caches %v, want at most two blocks' outputs (%v each)", ag, g)
	}
	if rs := x.a.ReservedOn(reduceScatterStream); rs == 0 {
		t.Errorf("the sharded gradients should come from the reduce-scatter stream")
	}
	if x.a.PeakReserved < x.a.PeakAlloc {
		t.Errorf("reserved %v below allocated %v", x.a.PeakReserved, x.a.PeakAlloc)
	}
}
