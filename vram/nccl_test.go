package vram

import (
	"strings"
	"testing"
)

// TestNCCLCommBytes: a communicator's device memory by part, release and
// traffic. The eager release reproduces NVIDIA/nccl#964's measurements on
// 4×A100 (NVLink, NCCL 2.18, 24 channels): 544 MB for a group of 2, 688
// for more — the p2p network pool 32 × 16 × 512 KiB = 256 MiB, the ring 24
// × (6 + 6) MiB = 288 MiB, and for more than two ranks the tree's extra
// receive, 24 × 6 MiB = 144 MiB. On 8×H100 under 2.30.7: granules 2 MiB ×
// (3 · 32 + 2 + 17) = 230 MiB, ring 24 × 12 = 288 MiB, NVLS 16 × 2 × 1
// MiB × 8 = 256 MiB.
func TestNCCLCommBytes(t *testing.T) {
	a100 := GPU{Name: "A100", ComputeCapability: 80, NVSwitch: true}
	h100 := mustGPU("H100-80GB")
	b200 := mustGPU("B200")
	old, _, _ := ncclReleaseOf("2.18.3")
	now, _, _ := ncclReleaseOf("")
	torch28, _, _ := ncclReleaseOf("2.27.3")
	for _, c := range []struct {
		name string
		c    ncclComm
		g    GPU
		rel  ncclRelease
		want Bytes
	}{
		{"nccl#964, 2 ranks", ncclComm{ranks: 2, local: 2}, a100, old, 544 * MiB},
		{"nccl#964, 4 ranks", ncclComm{ranks: 4, local: 4}, a100, old, 688 * MiB},
		{"8×H100 data parallel", ncclComm{ranks: 8, local: 8}, h100, now, 230*MiB + 288*MiB + 256*MiB},
		// 32 channels and 24 NVLS channels: 2 × (96 + 2 + 25) + 32 × 12 + 24 × 2 × 8.
		{"8×B200 data parallel", ncclComm{ranks: 8, local: 8}, b200, now, 246*MiB + 384*MiB + 384*MiB},
		// 16 nodes, one GPU of the group per node: no NVLS, a network ring
		// of 16 channels × (10 + 10) MiB.
		{"data parallel across nodes", ncclComm{ranks: 16, local: 1}, h100, now, 2*MiB*98 + 16*20*MiB},
		// Pipeline stages across nodes: one shared pool each way.
		{"pipeline across nodes", ncclComm{ranks: 4, local: 1, traffic: ncclNeighbours}, h100, now, 2*MiB*98 + 64*MiB},
		// Expert parallelism in a node: 7 peers × 32 channels × 12 MiB; the
		// NVLS setup's granules come at init (ncclNvlsSetup, init.cc:1558)
		// whatever the traffic.
		{"expert parallel all-to-all", ncclComm{ranks: 8, local: 8, traffic: ncclAllToAll}, h100, now, 230*MiB + 7*32*12*MiB},
		// NVLS needs more than two GPUs of the group in the node up to
		// 2.27.3 (nvls.cc:160), two since 2.28.7 (2.30.7 nvls.cc:262):
		// its 17 granules and 16 × 2 × 1 MiB a GPU come and go with it.
		{"2×H100 under 2.27.3: no NVLS", ncclComm{ranks: 2, local: 2}, h100, torch28, 2*MiB*98 + 288*MiB},
		{"3×H100 under 2.27.3: NVLS", ncclComm{ranks: 3, local: 3}, h100, torch28, 2*MiB*115 + 288*MiB + 16*2*3*MiB},
		{"2×H100 under 2.30.7: NVLS", ncclComm{ranks: 2, local: 2}, h100, now, 2*MiB*115 + 288*MiB + 16*2*2*MiB},
	} {
		if got := ncclCommBytes(c.c, c.g, c.rel); got != c.want {
			t.Errorf("%s: %d MiB, want %d MiB", c.name, got/MiB, c.want/MiB)
		}
	}
}

// TestNCCLInReplay: a plan's communicators, laid out tensor parallel
// innermost, reach device-used on an NVSwitch part; a part without
// NVSwitch keeps the measured default per group; a measured figure
// replaces both; a release the table cannot read is refused by name.
func TestNCCLInReplay(t *testing.T) {
	base := Training{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 1, Precision: "mixed_bf16", Checkpointing: "full",
		Parallel: Parallel{DP: 4, FSDP: "full_shard", TP: 2}}
	r, err := base.resolve()
	if err != nil {
		t.Fatal(err)
	}
	comms := r.ncclComms()
	if len(comms) != 2 || comms[0] != (ncclComm{group: "tp", ranks: 2, local: 2}) || comms[1] != (ncclComm{group: "dp", ranks: 4, local: 4}) {
		t.Fatalf("communicators %+v", comms)
	}
	h100, l40s := mustGPU("H100-80GB"), mustGPU("L40S")
	now, _, _ := ncclReleaseOf("")
	want := ncclCommBytes(comms[0], h100, now) + ncclCommBytes(comms[1], h100, now)
	rep, err := base.Replay(ReplayOptions{GPU: &h100})
	if err != nil || rep.NCCL != want || rep.DeviceUsed != rep.PeakReserved+rep.Context+rep.NCCL {
		t.Errorf("H100: NCCL %v (want %v), %v", rep.NCCL, want, err)
	}
	if rep, err := base.Replay(ReplayOptions{GPU: &l40s}); err != nil || rep.NCCL != 2*ncclPerGroup {
		t.Errorf("L40S: NCCL %v, want 2 × %v, %v", rep.NCCL, ncclPerGroup, err)
	}
	measured := base
	measured.NCCLMemory = 3 * GiB
	if rep, err := measured.Replay(ReplayOptions{GPU: &h100}); err != nil || rep.NCCL != 3*GiB {
		t.Errorf("nccl_memory: NCCL %v, %v", rep.NCCL, err)
	}
	bad := base
	bad.NCCL = "two"
	if _, err := bad.Estimate(); err == nil || !strings.Contains(err.Error(), "versions.nccl") {
		t.Errorf("nccl release \"two\": %v", err)
	}
	if note := ncclNote(comms, &h100, ""); !strings.Contains(note, "NCCL 2.30.7 on H100-80GB") {
		t.Errorf("note %q", note)
	}
}

// TestNCCLHost: the host-pinned share of a communicator: the work FIFO, 1
// MiB from 2.22.3 and 32 MiB before, and across nodes 520 KiB for each of
// the 16 channels' network send connections.
func TestNCCLHost(t *testing.T) {
	h100 := mustGPU("H100-80GB")
	now, _, _ := ncclReleaseOf("")
	old, _, _ := ncclReleaseOf("2.21.5")
	for _, c := range []struct {
		c    ncclComm
		rel  ncclRelease
		want Bytes
	}{
		{ncclComm{ranks: 8, local: 8}, now, 1 * MiB},
		{ncclComm{ranks: 8, local: 8}, old, 32 * MiB},
		{ncclComm{ranks: 16, local: 8}, now, 1*MiB + 16*520*KiB},
	} {
		if got := ncclHostBytes(c.c, h100, c.rel); got != c.want {
			t.Errorf("%+v under %s: %v, want %v", c.c, c.rel.Version, got, c.want)
		}
	}
}

// TestOtherProcessesContexts: each process beside the training process
// pays a CUDA context of its own on the GPU (verl#5979), which device-used
// counts; a negative or absurd count is refused naming the field.
func TestOtherProcessesContexts(t *testing.T) {
	h100 := mustGPU("H100-80GB")
	tr := Training{Model: MustPreset("llama-3.2-1b"), SeqLen: 1024, MicroBatch: 1, Precision: "bf16"}
	one, err := tr.Replay(ReplayOptions{GPU: &h100})
	if err != nil {
		t.Fatal(err)
	}
	tr.OtherProcesses = 2
	three, err := tr.Replay(ReplayOptions{GPU: &h100})
	if err != nil {
		t.Fatal(err)
	}
	if three.Context != 3*h100.Context || three.DeviceUsed-one.DeviceUsed != 2*h100.Context || three.PeakReserved != one.PeakReserved {
		t.Errorf("two more processes: context %v, device used %v → %v (the GPU's context %v)", three.Context, one.DeviceUsed, three.DeviceUsed, h100.Context)
	}
	for _, n := range []int{-1, 65} {
		tr.OtherProcesses = n
		if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), "other_processes must be in [0, 64]") {
			t.Errorf("other_processes %d: %v", n, err)
		}
	}
}
