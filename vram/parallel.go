package vram

import "fmt"

// Parallel is how one training run is split over GPUs. The zero value is a
// single GPU. Degrees multiply: GPUs = DP × TP × PP × CP (EP shares DP ranks).
type Parallel struct {
	DP int `json:"dp,omitempty"` // data-parallel replicas (default 1)
	// ZeRO is the sharding stage over ShardDegree ranks (Rajbhandari et al.
	// 2020): 1 optimizer states, 2 + gradients, 3 + parameters. FSDP
	// full_shard is 3, shard_grad_op is 2; hybrid shards within a node.
	ZeRO        int    `json:"zero_stage,omitempty"`
	FSDP        string `json:"fsdp,omitempty"`         // none (default), full_shard, shard_grad_op, hybrid
	ShardDegree int    `json:"shard_degree,omitempty"` // ranks the states are sharded over (default DP; hybrid: GPUs per node = 8)
	// FSDPVersion 1 (flat parameters) or 2 (per-parameter, default; under
	// framework "accelerate" 1, FullyShardedDataParallelPlugin's default
	// fsdp_version, accelerate/utils/dataclasses.py). FSDP1
	// reshards a flat parameter in its post-backward hook, on the flat
	// parameter's gradient accumulator, or, for a flat parameter that needs
	// no gradient (a wholly frozen unit), once the gradients of the unit's
	// inputs are computed (torch/distributed/fsdp/_runtime_utils.py
	// _register_post_backward_reshard_only_hook, PyTorch ≥ 2.1): either way
	// block by block in backward. See FSDPAdapterUnits for LoRA.
	FSDPVersion int `json:"fsdp_version,omitempty"`
	// FSDPAdapterUnits is how FSDP1 wraps a LoRA run's adapters: "apart"
	// (PEFT's fsdp_auto_wrap_policy, which transformers' Trainer applies to
	// PEFT models: each adapter linear an FSDP unit of its own, the
	// blocks' units wholly frozen) or "shared" (the adapters inside their
	// block's unit, use_orig_params=True, as Lightning's FSDPStrategy with
	// auto_wrap_policy={Block} under litgpt). A shared unit's flat parameter
	// needs a gradient, and FSDP1 computes with views of it
	// (_flat_param.py _use_unsharded_views(as_params=False)), so autograd
	// treats the frozen weights as trained: their linears save their
	// inputs, each block's whole unsharded gradient exists until its
	// reduce-scatter and the whole sharded gradient until zero_grad, as in
	// full fine-tuning; only the adapters have optimizer states (PyTorch's
	// FSDP docs warn of this gradient memory). Default "shared" under
	// framework "litgpt", else "apart"; FSDP1 LoRA runs only, with an
	// unquantized base (a flat parameter holds one dtype).
	FSDPAdapterUnits string `json:"fsdp_adapter_units,omitempty"`
	// NoSync runs FSDP1's gradient accumulation steps inside
	// FullyShardedDataParallel.no_sync(): each unit keeps its unsharded
	// gradient, accumulated over the micro-batches, and reduce-scatters it
	// only in the last one's backward (torch/distributed/fsdp/
	// _runtime_utils.py _post_backward_hook: "if not state._sync_gradients"
	// it returns after resharding the parameters, keeping the unsharded
	// gradient). Default true where the framework's loop does it —
	// "litgpt" (Lightning Fabric's no_backward_sync), "hf_trainer" and
	// "accelerate" (Accelerator.accumulate enters model.no_sync() unless
	// sync_each_batch) — under FSDP1 with grad_accum > 1; false otherwise.
	NoSync *bool `json:"no_sync,omitempty"`
	// ReshardAfterForward is FSDP2's fully_shard(reshard_after_forward=…)
	// for the decoder blocks (default true, PyTorch's default; under
	// framework "torchtitan" true unless pipeline parallelism is on, see
	// resolved.keepsUnsharded): true frees
	// each block's unsharded parameters after its forward and all-gathers
	// them again for its backward; false keeps every block's unsharded
	// parameters from its forward to its backward (torch/distributed/fsdp/
	// _fully_shard/_fsdp_state.py _post_forward → FSDPParamGroup.reshard).
	// The root's own parameters (embedding, final norm, output layer) are
	// not resharded after the forward either way (_fsdp_state.py
	// FSDPState._lazy_init: "For the root, do not reshard after forward");
	// torchtitan's own wrapping keeps only the head's (resolved.rootHeld).
	ReshardAfterForward *bool `json:"reshard_after_forward,omitempty"`
	TP                  int   `json:"tp,omitempty"` // tensor parallel (Megatron column/row splits)
	// SP is sequence parallelism on top of TP (Korthikanti et al. 2022):
	// Megatron-LM's --sequence-parallel, off unless set; under framework
	// "torchtitan" always on with TP, whose plan shards every norm over the
	// sequence (torchtitan/models/llama3/infra/parallelize.py apply_tp:
	// SequenceParallel on attention_norm, ffn_norm and norm). Through
	// DTensor a sublayer's linears save its all-gathered input; Megatron's
	// save their shard and gather it again in backward.
	SP bool `json:"sp,omitempty"`
	// LossParallel keeps the logits sharded over the vocabulary under TP,
	// each rank computing the cross-entropy on its shard (default true:
	// Megatron-LM's vocab_parallel_cross_entropy, torchtitan's
	// parallelism.disable_loss_parallel=False with loss_parallel()). false
	// is TP whose output layer all-gathers the full logits on every rank
	// (DTensor ColwiseParallel with Replicate output, as a plain
	// parallelize_module plan does).
	LossParallel *bool `json:"loss_parallel,omitempty"`
	// AsyncTP is torchtitan's async tensor parallelism
	// (enable_async_tensor_parallel, with compile and sequence parallelism):
	// Inductor fuses the all-gathers and reduce-scatters into the matmuls
	// through symmetric memory, whose per-group workspace lives outside the
	// caching allocator and counts in what nvidia-smi shows
	// (torch/distributed/_symmetric_memory get_symm_mem_workspace: the
	// fused matmul-reduce-scatter asks for two output chunks, the fused
	// all-gather-matmul for the input shard).
	AsyncTP bool `json:"async_tp,omitempty"`
	PP      int  `json:"pp,omitempty"` // pipeline stages
	// PPSchedule: 1f1b (default), interleaved_1f1b with VirtualStages chunks
	// per rank, gpipe, or zbv (torch.distributed.pipelining's ZB-V zero
	// bubble schedule: two stages per rank in a V, backward split into input
	// and weight gradients; zerobubble.go), or interleaved_zb (its
	// ScheduleInterleavedZeroBubble, ZB-1P over VirtualStages looped stages
	// per rank), or dualpipev (its ScheduleDualPipeV: ZB-V's V, forwards
	// paired with full backwards in the steady state; at least 2·pp
	// microbatches); PPMicrobatches is the number of pipeline microbatches. Layers
	// need not divide among the stages (resolved.blocksPerRank: an even
	// split, or torchtitan's, which counts the embedding and the output as
	// a layer each).
	PPSchedule Schedule `json:"pp_schedule,omitempty"`
	// Megatron-LM's uneven pipeline stages: PPFirstStageLayers and
	// PPLastStageLayers are --decoder-first-pipeline-num-layers and
	// --decoder-last-pipeline-num-layers (the other stages split the rest
	// evenly), PPAccountEmbedding and PPAccountLoss are
	// --account-for-embedding-in-pipeline-split and
	// --account-for-loss-in-pipeline-split (the embedding, the loss, count
	// as a layer of the first, the last stage), as
	// megatron/core/transformer/transformer_layer.py get_transformer_layer_offset
	// and transformer_block.py get_num_layers_to_build split them.
	PPFirstStageLayers int  `json:"pp_first_stage_layers,omitempty"`
	PPLastStageLayers  int  `json:"pp_last_stage_layers,omitempty"`
	PPAccountEmbedding bool `json:"pp_account_embedding,omitempty"`
	PPAccountLoss      bool `json:"pp_account_loss,omitempty"`
	VirtualStages      int  `json:"virtual_stages,omitempty"`
	PPMicrobatches     int  `json:"pp_microbatches,omitempty"`
	CP                 int  `json:"cp,omitempty"` // context parallel: the sequence is split over CP ranks
	EP                 int  `json:"ep,omitempty"` // expert parallel: routed experts split over EP ranks
	// DeepSpeed is the DeepSpeed config's zero_optimization section (bucket
	// sizes, prefetch, persistence), for ZeRO run by DeepSpeed.
	DeepSpeed *DeepSpeed `json:"deepspeed,omitempty"`
	// CPUOffload: none (default), optimizer (states and the step on the CPU),
	// optimizer+grads, optimizer+params (ZeRO-Infinity style parameter offload).
	CPUOffload string `json:"cpu_offload,omitempty"`
}

// resolveParallel checks and defaults the plan's parallelism, step by
// step, and keeps the degrees the engine reads.
func (r *resolved) resolveParallel() error {
	if err := r.resolveDegrees(); err != nil {
		return err
	}
	if err := r.resolveSharding(); err != nil {
		return err
	}
	if err := r.resolveTensorParallel(); err != nil {
		return err
	}
	if err := r.resolvePipeline(); err != nil {
		return err
	}
	if err := r.resolveOtherParallel(); err != nil {
		return err
	}
	p := &r.Parallel
	r.dp, r.tp, r.pp, r.cp, r.ep, r.shard = p.DP, p.TP, p.PP, p.CP, p.EP, p.ShardDegree
	if p.ZeRO == 0 {
		r.shard = 1
	}
	return nil
}

// resolveDegrees checks the parallel degrees (unset: 1).
func (r *resolved) resolveDegrees() error {
	p := &r.Parallel
	def := func(v *int, name string) error {
		if *v < 0 || *v > 1<<20 {
			return fmt.Errorf("parallel.%s must be in [1, 2^20], got %d", name, *v)
		}
		if *v == 0 {
			*v = 1
		}
		return nil
	}
	for _, f := range []struct {
		v    *int
		name string
	}{{&p.DP, "dp"}, {&p.TP, "tp"}, {&p.PP, "pp"}, {&p.CP, "cp"}, {&p.EP, "ep"}, {&p.ShardDegree, "shard_degree"}, {&p.PPMicrobatches, "pp_microbatches"}, {&p.VirtualStages, "virtual_stages"}} {
		if err := def(f.v, f.name); err != nil {
			return err
		}
	}
	return nil
}

// resolveSharding reads FSDP and ZeRO: stage, version, adapter units,
// no_sync, resharding, the shard degree.
func (r *resolved) resolveSharding() error {
	p := &r.Parallel
	if p.FSDP == "" {
		p.FSDP = "none"
	}
	if err := oneOf("parallel.fsdp", p.FSDP, fsdpModes...); err != nil {
		return err
	}
	switch p.FSDP {
	case "full_shard", "hybrid":
		if p.ZeRO == 0 {
			p.ZeRO = 3
		}
	case "shard_grad_op":
		if p.ZeRO == 0 {
			p.ZeRO = 2
		}
	}
	if p.FSDPVersion == 0 && r.Framework == FrameworkAccelerate && p.FSDP != "none" {
		p.FSDPVersion = 1
	}
	if p.FSDPVersion < 0 || p.FSDPVersion > 2 {
		return fmt.Errorf("parallel.fsdp_version must be 1 or 2, got %d", p.FSDPVersion)
	}
	fsdp1 := p.FSDP != "none" && p.FSDPVersion == 1
	fsdp1LoRA := fsdp1 && r.Trainable == "lora"
	if p.FSDPAdapterUnits != "" {
		if err := oneOf("parallel.fsdp_adapter_units", p.FSDPAdapterUnits, "apart", "shared"); err != nil {
			return err
		}
		if !fsdp1LoRA {
			return fmt.Errorf("parallel.fsdp_adapter_units applies to LoRA (trainable \"lora\") under FSDP1 (fsdp_version 1), not trainable %q with fsdp %q version %d", r.Trainable, p.FSDP, max(p.FSDPVersion, 2))
		}
	} else if fsdp1LoRA {
		p.FSDPAdapterUnits = "apart"
		if r.Framework == FrameworkLitGPT && !r.QuantizedBase.Quantized() {
			p.FSDPAdapterUnits = "shared"
		}
	}
	if p.FSDPAdapterUnits == "shared" && r.QuantizedBase.Quantized() {
		return fmt.Errorf("parallel.fsdp_adapter_units \"shared\" needs an unquantized base: an FSDP1 flat parameter holds one dtype, so quantized weights and adapters cannot share a unit")
	}
	if p.FSDPAdapterUnits == "shared" {
		r.notes = append(r.notes, "parallel.fsdp_adapter_units \"shared\": FSDP1 flattens each block's adapters with its frozen weights, so autograd computes gradients for the frozen weights too, as in full fine-tuning (wrapping the adapters apart, as PEFT's fsdp_auto_wrap_policy does, avoids it)")
	}
	if p.NoSync != nil && *p.NoSync && !fsdp1 {
		return fmt.Errorf("parallel.no_sync changes memory only under FSDP1 (fsdp set, fsdp_version 1), not fsdp %q version %d", p.FSDP, max(p.FSDPVersion, 2))
	}
	if p.NoSync == nil && fsdp1 && r.GradAccum > 1 {
		switch r.Framework {
		case FrameworkLitGPT, FrameworkHFTrainer, FrameworkAccelerate:
			on := true
			p.NoSync = &on
		}
	}
	if p.ReshardAfterForward != nil && (p.FSDP != "full_shard" && p.FSDP != "hybrid" || p.FSDPVersion == 1) {
		return fmt.Errorf("parallel.reshard_after_forward applies to FSDP2 full sharding (fsdp full_shard or hybrid, fsdp_version 2), not fsdp %q version %d", p.FSDP, max(p.FSDPVersion, 2))
	}
	if p.ZeRO < 0 || p.ZeRO > 3 {
		return fmt.Errorf("parallel.zero_stage must be 0, 1, 2 or 3, got %d", p.ZeRO)
	}
	if p.ShardDegree == 1 && p.ZeRO > 0 {
		p.ShardDegree = p.DP
		if p.FSDP == "hybrid" && p.DP > 8 {
			p.ShardDegree = 8
		}
	}
	if p.ShardDegree > p.DP*p.CP {
		return fmt.Errorf("parallel.shard_degree = %d must not exceed dp × cp = %d", p.ShardDegree, p.DP*p.CP)
	}
	return nil
}

// resolveTensorParallel checks tensor parallelism against the model's
// heads and widths, and sequence parallelism with it.
func (r *resolved) resolveTensorParallel() error {
	p := &r.Parallel
	m := r.m
	if m.Heads%p.TP != 0 {
		return fmt.Errorf("tp=%d does not divide %d attention heads", p.TP, m.Heads)
	}
	if m.KVHeads%p.TP != 0 && p.TP%m.KVHeads != 0 {
		return fmt.Errorf("tp=%d and %d key/value heads: one must divide the other", p.TP, m.KVHeads)
	}
	if m.FFN%p.TP != 0 {
		return fmt.Errorf("tp=%d does not divide ffn = %d", p.TP, m.FFN)
	}
	if p.SP && p.TP == 1 {
		return fmt.Errorf("parallel.sp needs tp > 1")
	}
	if r.Framework == FrameworkTorchtitan && p.TP > 1 {
		p.SP = true // apply_tp shards every norm over the sequence: no TP without SP
	}
	if p.AsyncTP && (p.TP < 2 || !p.SP || !r.Compile) {
		return fmt.Errorf("parallel.async_tp fuses sequence parallelism's collectives into compiled matmuls: it needs tp > 1, sp and compile (tp %d, sp %v, compile %v)", p.TP, p.SP, r.Compile)
	}
	return nil
}

// resolvePipeline checks the pipeline schedule against the layers and
// micro-batches.
func (r *resolved) resolvePipeline() error {
	p := &r.Parallel
	m := r.m
	if p.PP > m.Layers {
		return fmt.Errorf("pp=%d exceeds the %d layers", p.PP, m.Layers)
	}
	p.PPSchedule = orDefault(p.PPSchedule, Schedule1F1B)
	if err := oneOf("parallel.pp_schedule", p.PPSchedule, Schedules...); err != nil {
		return err
	}
	v := p.PPSchedule.vShape()
	if p.PPSchedule.splitBackward() {
		switch {
		case p.PP < 2:
			return fmt.Errorf("parallel.pp_schedule %q needs pp ≥ 2", p.PPSchedule)
		case v && 2*p.PP > m.Layers:
			return fmt.Errorf("%s: its 2 × pp = %d stages exceed the %d layers", p.PPSchedule, 2*p.PP, m.Layers)
		case p.PPSchedule == ScheduleDualPipeV && p.PPMicrobatches < 2*p.PP:
			return fmt.Errorf("dualpipev: pp_microbatches = %d must be at least its 2 × pp = %d stages (ScheduleDualPipeV)", p.PPMicrobatches, 2*p.PP)
		case r.Compile:
			return fmt.Errorf("%s splits each backward into input and weight gradients, which torch.compile does not support (schedules.py _check_torch_compile_compatibility); drop compile", p.PPSchedule)
		}
	}
	if p.PPSchedule == ScheduleInterleavedZB {
		mb := max(p.PPMicrobatches, p.PP)
		if rounds := max(1, mb/p.PP); mb%rounds != 0 {
			return fmt.Errorf("interleaved_zb: pp_microbatches %d must be a multiple of its %d rounds (ScheduleInterleavedZeroBubble)", mb, rounds)
		}
		if p.PP*p.VirtualStages > m.Layers {
			return fmt.Errorf("interleaved_zb: pp × virtual_stages = %d stages exceed the %d layers (each stage needs one)", p.PP*p.VirtualStages, m.Layers)
		}
	}
	if p.PPSchedule == ScheduleInterleaved1F1B && p.PP*p.VirtualStages > m.Layers {
		return fmt.Errorf("interleaved_1f1b: pp × virtual_stages = %d stages exceed the %d layers (each stage needs one)", p.PP*p.VirtualStages, m.Layers)
	}
	if r.Framework == FrameworkTorchtitan && p.PP > 1 {
		// generate_llm_fqn_per_model_part: the first and last stages hold
		// the embedding and the output as a layer each, besides one block.
		s := p.PP
		switch {
		case p.PPSchedule.interleaved():
			s *= max(1, p.VirtualStages)
		case p.PPSchedule.vShape():
			s *= 2
		}
		if (m.Layers+2)/s < 2 {
			return fmt.Errorf("torchtitan pipeline: %d stages leave fewer than one block to the first and last stage of %d layers", s, m.Layers)
		}
	}
	return nil
}

// resolveOtherParallel checks context and expert parallelism and the
// CPU offload.
func (r *resolved) resolveOtherParallel() error {
	p := &r.Parallel
	m := r.m
	if r.SeqLen%p.CP != 0 {
		return fmt.Errorf("cp=%d does not divide seq_len = %d", p.CP, r.SeqLen)
	}
	if p.EP > 1 && (m.Experts == 0 || m.Experts%p.EP != 0) {
		return fmt.Errorf("ep=%d must divide the model's %d routed experts", p.EP, m.Experts)
	}
	if p.CPUOffload == "" {
		p.CPUOffload = "none"
	}
	if err := oneOf("parallel.cpu_offload", p.CPUOffload, cpuOffloads...); err != nil {
		return err
	}
	return nil
}

// GPUs is the total number of GPUs of the run.
func (p Parallel) GPUs() int {
	n := 1
	for _, d := range []int{p.DP, p.TP, p.PP, p.CP} {
		if d > 1 {
			n *= d
		}
	}
	return n
}

// sharedAdapterUnits reports whether FSDP1 flattens each block's adapters
// with its frozen weights (Parallel.FSDPAdapterUnits "shared"), so that
// autograd trains the frozen weights too.
func (r *resolved) sharedAdapterUnits() bool {
	return r.frozen && r.Parallel.FSDPAdapterUnits == "shared"
}

// fsdp1NoSync reports whether FSDP1 accumulates unsharded gradients over
// the micro-batches (Parallel.NoSync).
func (r *resolved) fsdp1NoSync() bool {
	p := r.Parallel
	return p.NoSync != nil && *p.NoSync && p.ZeRO >= 2 && p.FSDPVersion == 1 && r.GradAccum > 1
}

// vocabShard is the share of the vocabulary whose logits a rank holds: 1/tp
// with loss parallelism (the default), the whole vocabulary without.
func (r *resolved) vocabShard() int64 {
	if r.Parallel.LossParallel != nil && !*r.Parallel.LossParallel {
		return 1
	}
	return int64(r.tp)
}

// asyncTPWorkspace is async TP's symmetric-memory workspace on each rank
// (Parallel.AsyncTP): two chunks of a fused reduce-scatter's output, the
// larger request (the residual stream's shard of one microbatch, in the
// compute dtype), once per TP group.
func (r *resolved) asyncTPWorkspace() Bytes {
	if !r.Parallel.AsyncTP {
		return 0
	}
	mb := r.MicroBatch
	if r.pp > 1 {
		mb = max(1, mb/max(1, r.Parallel.PPMicrobatches))
	}
	tokens := int64(mb) * int64(r.SeqLen) / int64(r.cp) / int64(r.tp)
	return 2 * r.ComputeDType.Size(mulI64(tokens, int64(r.m.Hidden)))
}

var (
	fsdpModes   = enum("fsdp", "none", "full_shard", "shard_grad_op", "hybrid")
	cpuOffloads = enum("cpu_offload", "none", "optimizer", "optimizer+grads", "optimizer+params")
)
