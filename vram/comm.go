package vram

import "fmt"

// A training step's time bound with its communication: the roofline of
// the arithmetic and memory traffic on one GPU (ThroughputBound) beside the
// bytes the layout's collectives move, each at the bandwidth of the link
// it crosses, and the pipeline's bubble. Like the roofline it is a bound,
// not a forecast: it ranks layouts (the layout search's objective), it does
// not predict a run's seconds.
//
// Collectives are counted as NCCL's ring algorithm moves them, per rank
// (the "bus bandwidth" of nccl-tests' PERFORMANCE.md): an all-gather or a
// reduce-scatter of S bytes moves (n − 1)/n · S, an all-reduce twice that.
// The volumes:
//   - fully sharded data parallelism (ZeRO-3, FSDP): each micro-batch
//     all-gathers the rank's parameter shard's model in the forward and
//     again in the backward and reduce-scatters its gradients, 3 Ψ
//     (Rajbhandari et al. 2020, ZeRO §7.2.1); replicated data parallelism
//     all-reduces the gradients once a step, 2 Ψ (§7.1); both overlap the
//     computation (FSDP prefetches the next unit), so the step takes the
//     larger of the two;
//   - tensor parallelism: four all-reduces (or, with sequence parallelism,
//     as many all-gather and reduce-scatter pairs) of a micro-batch's
//     b · s · h activations per layer, two in the forward and two in the
//     backward, one pair more where a block's forward is recomputed
//     (Narayanan et al. 2021, Megatron-LM §3.2, and Korthikanti et al. 2022
//     §4); on the critical path;
//   - context parallelism: the keys and values all-gathered in each layer's
//     forward (torchtitan's default "allgather" rotation) and their
//     gradients reduce-scattered in the backward, three times (n − 1)/n of
//     a micro-batch's k and v; on the critical path;
//   - expert parallelism: each MoE layer's token dispatch and combine, an
//     all-to-all each of the micro-batch's tokens × top-k hidden vectors,
//     in the forward and again in the backward (again in a recomputed
//     forward), (n − 1)/n of them leaving the rank (Lepikhin et al. 2020,
//     GShard §2.2, the dispatch and combine all-to-alls; Rajbhandari et
//     al. 2022, DeepSpeed-MoE §5.3); on the critical path;
//   - pipeline parallelism: each micro-batch's activations sent forward and
//     its gradients back at a stage boundary, and the bubble: (p − 1)/(m + p
//     − 1) of the step for 1F1B and GPipe over m micro-batches, (p − 1)/(v ·
//     m + p − 1) interleaved over v virtual stages (Narayanan et al. 2021
//     §2.2.1-2.2.2).
// A group within a node crosses NVLink (the part's NVLink bandwidth in one
// direction; PCIe where it has none), one across nodes the network (the
// search's NetworkBandwidth a GPU).

// StepTime bounds one optimizer step of a layout.
type StepTime struct {
	Compute  float64 `json:"compute_s"`       // the roofline of the step's arithmetic and memory traffic
	DataComm float64 `json:"data_parallel_s"` // data parallelism's collectives (overlapped with compute)
	TPComm   float64 `json:"tensor_parallel_s"`
	CPComm   float64 `json:"context_parallel_s"`
	EPComm   float64 `json:"expert_parallel_s,omitempty"`
	PPComm   float64 `json:"pipeline_p2p_s"`
	// HostComm is offload's copies between the GPU and host memory over
	// the host link (hostCopyBytes): the gradients and offloaded
	// parameters overlapped with compute, the updated parameters' return
	// after the CPU's optimizer step on the critical path.
	HostComm float64 `json:"host_copy_s,omitempty"`
	// HostStep is the CPU's optimizer step over the rank's offloaded
	// partition, on the critical path (hostStepBytes at the host memory
	// bandwidth a rank gets).
	HostStep float64 `json:"host_step_s,omitempty"`
	Bubble   float64 `json:"bubble"` // the pipeline bubble's share of the step
	Seconds  float64 `json:"seconds"`
	// TokensPerSecond is the run's tokens a second: every data-parallel
	// replica's.
	TokensPerSecond float64 `json:"tokens_per_second"`
}

// PCIe x16 bandwidth in one direction, bytes a second: 16 lanes of 32
// GT/s (Gen5) or 16 GT/s (Gen4) with 128b/130b encoding, 63 and 31.5 GB/s
// (PCI-SIG, PCI Express Base Specification 5.0 and 4.0), as 64 and 32
// GB/s, the "PCIe Gen5: 128 GB/s" (both directions) of NVIDIA's H100
// datasheet.
const (
	pcieGen5x16 = 64e9
	pcieGen4x16 = 32e9
)

// pcieBandwidth is g's PCIe link in one direction: Gen5 x16 from compute
// capability 9.0 (Hopper, Blackwell), Gen4 x16 before.
func pcieBandwidth(g GPU) float64 {
	if g.ComputeCapability >= 90 {
		return pcieGen5x16
	}
	return pcieGen4x16
}

// linkBandwidth is the bandwidth a rank's share of a collective crosses,
// in bytes a second: NVLink within an NVSwitch node (nvlink, one
// direction), else PCIe (pcieBandwidth), across nodes the network's.
func linkBandwidth(g GPU, acrossNodes bool, network float64) float64 {
	switch {
	case acrossNodes:
		return network
	case g.NVLink > 0:
		return g.NVLink * 1e9
	}
	return pcieBandwidth(g)
}

// StepTime bounds the plan's step on g with its communication, the
// network giving each GPU network bytes a second across nodes.
func (t Training) StepTime(g GPU, network float64) (_ StepTime, err error) {
	defer recoverOverflow(&err)
	if network <= 0 {
		return StepTime{}, fmt.Errorf("network bandwidth must be positive, got %g", network)
	}
	tb, err := t.ThroughputBound(g)
	if err != nil {
		return StepTime{}, err
	}
	r, err := t.resolve()
	if err != nil {
		return StepTime{}, err
	}
	st := StepTime{Compute: tb.Seconds}
	comms := r.ncclComms()
	across := func(group string) bool {
		for _, c := range comms {
			if c.group == group {
				return c.local < c.ranks
			}
		}
		return false
	}
	ring := func(n int) float64 { return float64(n-1) / float64(n) }
	micro := float64(max(1, r.GradAccum))
	tokens := float64(r.MicroBatch) * float64(r.SeqLen) / float64(r.cp) // a micro-batch's tokens on a rank
	if r.pp > 1 {
		micro = float64(max(r.Parallel.PPMicrobatches, 1))
		tokens /= micro
	}
	layers := float64(r.m.Layers) / float64(r.pp)
	e := float64(r.ComputeDType.Bits()) / 8
	if r.dp > 1 {
		params := float64(r.m.ParamCount()) / float64(r.tp*r.pp)
		vol := 2 * params * float64(r.GradsDType.Bits()) / 8 // replicated: one all-reduce of the gradients
		if r.Parallel.ZeRO == 3 {
			vol = micro * params * (2*e + float64(r.GradsDType.Bits())/8)
		}
		st.DataComm = ring(r.dp) * vol / linkBandwidth(g, across("dp"), network)
	}
	if r.tp > 1 {
		passes := 4.0
		if r.Checkpointing == CheckpointFull {
			passes = 6
		}
		vol := micro * layers * passes * 2 * tokens * float64(r.m.Hidden) * e
		st.TPComm = ring(r.tp) * vol / linkBandwidth(g, across("tp"), network)
	}
	if r.cp > 1 {
		kv := 2 * float64(r.m.KVHeads) * float64(r.m.HeadDim) / float64(r.tp)
		vol := micro * layers * 3 * float64(r.cp) * tokens * kv * e
		st.CPComm = ring(r.cp) * vol / linkBandwidth(g, across("cp"), network)
	}
	if r.ep > 1 {
		st.EPComm = ring(r.ep) * r.allToAllBytes(micro, tokens, e) / linkBandwidth(g, across("ep"), network)
	}
	if r.pp > 1 {
		st.PPComm = 2 * micro * tokens * float64(r.m.Hidden) * e / linkBandwidth(g, across("pp"), network)
		v := float64(max(1, r.Parallel.VirtualStages))
		if !r.Parallel.PPSchedule.interleaved() {
			v = 1
		}
		p := float64(r.pp)
		st.Bubble = (p - 1) / (v*micro + p - 1)
	}
	overlapped, serial := r.hostCopyBytes(micro)
	host := pcieBandwidth(g)
	st.HostComm = (overlapped + serial) / host
	st.HostStep = r.hostStepBytes() / hostMemoryBandwidth
	busy := max(st.Compute, st.DataComm, overlapped/host) + serial/host + st.HostStep + st.TPComm + st.CPComm + st.EPComm + st.PPComm
	st.Seconds = busy / (1 - st.Bubble)
	st.TokensPerSecond = float64(r.dp) * tb.TokensPerSecond * tb.Seconds / st.Seconds
	return st, nil
}

// allToAllBytes is what expert parallelism's all-to-alls move on a rank in
// a step of micro micro-batches of tokens each: per MoE layer of the stage,
// the dispatch and the combine of tokens × top-k hidden vectors of e bytes,
// forward and backward, and the forward's again where it is recomputed.
func (r *resolved) allToAllBytes(micro, tokens, e float64) float64 {
	moe := 0
	for l := range r.m.Layers {
		if r.m.IsMoELayer(l) {
			moe++
		}
	}
	passes := 4.0 // dispatch and combine, forward and backward
	if r.Checkpointing == CheckpointFull {
		passes = 6
	}
	layers := float64(moe) / float64(r.pp)
	return micro * layers * passes * tokens * float64(r.m.ExpertsPerToken) * float64(r.m.Hidden) * e
}

// hostCopyBytes is what offload copies between a rank's GPU and host
// memory in a step of micro micro-batches, over the rank's partition of
// the parameters, Ψ/(tp · pp · dp) of the model's Ψ (a full fine-tune's:
// an adapter's optimizer is not worth offloading, and the search offloads
// none): overlapped, each micro-batch's gradients sent to the host in
// their dtype as they are reduced, and offloaded parameters' shards
// brought to the GPU in their stored dtype at each unshard, forward and
// backward (FSDP2's CPUOffloadPolicy: foreach_reduce copies the reduced
// gradient .to("cpu"), the unshard copies the shard to the device,
// torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py and
// _fsdp_param.py; ZeRO-3's offload_param likewise); serial, the updated
// 16-bit parameters copied back after the CPU's optimizer step where
// they live on the GPU (DeepSpeed's offload_optimizer): ZeRO-Offload's 2Ψ
// of gradients down and 2Ψ of parameters up a step, the return waiting
// on the CPU's step unless the update is delayed (Ren et al. 2021,
// ZeRO-Offload §4.1-4.2, §5.2).
func (r *resolved) hostCopyBytes(micro float64) (overlapped, serial float64) {
	off := r.offloadOf()
	if !off.optimizer {
		return 0, 0
	}
	part := float64(r.m.ParamCount()) / float64(r.tp*r.pp*r.dp)
	if off.grads {
		overlapped += micro * part * float64(r.GradsDType.Bits()) / 8
	}
	if off.params {
		overlapped += micro * 2 * part * float64(r.WeightsDType.Bits()) / 8
	} else {
		serial = part * float64(r.WeightsDType.Bits()) / 8
	}
	return overlapped, serial
}

// hostMemoryBandwidth is the host memory bandwidth a rank's CPU optimizer
// step gets, bytes a second: an HGX/DGX H100 node's two Xeon Platinum
// 8480C (NVIDIA DGX H100 User Guide, hardware overview), each with eight
// DDR5-4800 channels of 38.4 GB/s (Intel ARK, Xeon Platinum 8480+): 614.4
// GB/s a node, shared by its eight GPUs' ranks. A bound: the step streams
// each byte once at the channels' peak.
const hostMemoryBandwidth = 614.4e9 / nodeGPUs

// hostStepBytes is the memory traffic of the CPU's optimizer step over a
// rank's offloaded partition, Ψ/(tp · pp · dp) elements: the master
// weights (the parameters' dtype without them) and the optimizer states
// read and written, the gradients read (fp32 on DeepSpeed's host, which
// keeps an fp32 gradient partition, offload.go hostGrads; the reduced
// dtype under FSDP). DeepSpeed's CPU-Adam and torch's foreach AdamW on
// CPU tensors each stream them once (ZeRO-Offload §4.2-4.3).
func (r *resolved) hostStepBytes() float64 {
	if !r.offloadOf().optimizer {
		return 0
	}
	n := r.m.ParamCount() / int64(r.tp*r.pp*r.dp)
	states, _ := r.stateBytes(n, nil, r.WeightsDType)
	master := r.WeightsDType.Size(n)
	if r.MasterWeights != DTypeUnset {
		master = r.MasterWeights.Size(n)
	}
	grads := r.GradsDType.Size(n)
	if r.ds.on {
		grads = FP32.Size(n)
	}
	return 2*float64(master) + 2*float64(states) + float64(grads)
}
