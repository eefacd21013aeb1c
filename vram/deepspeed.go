package vram

import (
	"encoding/json"
	"fmt"
	"math"
)

// DeepSpeed is the zero_optimization section of a DeepSpeed config, for a
// plan whose ZeRO stage DeepSpeed runs (framework "deepspeed", or
// "hf_trainer" with a DeepSpeed config). Sizes count elements, as
// DeepSpeed's do; the zero value of each field is DeepSpeed's default
// (deepspeed/runtime/zero/config.py DeepSpeedZeroConfig), and "auto" is the
// value transformers' and accelerate's integrations fill in from the
// model's hidden size (transformers/integrations/deepspeed.py
// HfTrainerDeepSpeedConfig.trainer_config_finalize; accelerate's
// Accelerator._prepare_deepspeed does the same).
type DeepSpeed struct {
	// ReduceBucketSize is the gradient bucket (default 5e8; auto: hidden²).
	// With contiguous gradients ZeRO-1/2 allocate one flat bucket of this
	// many elements in the model's dtype when backward starts, two with
	// overlap_comm, and free them when the step begins (stage_1_and_2.py
	// DeepSpeedZeroOptimizer.backward, _release_ipg_buffers); ZeRO-3 keeps
	// one from initialisation on (stage3.py _setup_for_real_optimizer,
	// __ipg_bucket_flat_buffer).
	ReduceBucketSize DSSize `json:"reduce_bucket_size,omitempty"`
	// AllgatherBucketSize (default 5e8) splits ZeRO-1/2's all-gather of the
	// updated parameters after the step; DeepSpeed gathers into the
	// parameters' own flat buffers, so it adds no memory (accepted, so a
	// config can be pasted whole).
	AllgatherBucketSize DSSize `json:"allgather_bucket_size,omitempty"`
	// OverlapComm double-buffers ZeRO-1/2's gradient bucket (default: true
	// at stage 3, false below, DeepSpeedZeroConfig.overlap_comm_valid).
	OverlapComm *bool `json:"overlap_comm,omitempty"`
	// ContiguousGradients copies gradients into the flat bucket as they
	// are produced (default true); false reduces them in place, with no
	// bucket.
	ContiguousGradients *bool `json:"contiguous_gradients,omitempty"`
	// PrefetchBucketSize is how many elements of the next modules' parameters
	// ZeRO-3 all-gathers ahead of use (default 5e7; auto: 0.9 × hidden²).
	PrefetchBucketSize DSSize `json:"stage3_prefetch_bucket_size,omitempty"`
	// MaxLiveParameters caps the elements ZeRO-3 holds gathered at once
	// (default 1e9).
	MaxLiveParameters DSSize `json:"stage3_max_live_parameters,omitempty"`
	// ParamPersistenceThreshold: ZeRO-3 never partitions a parameter with
	// fewer elements (default 1e5; auto: 10 × hidden): norms' and biases'
	// weights stay whole on every rank (partition_parameters.py
	// _convert_to_zero_parameters, ds_persist).
	ParamPersistenceThreshold DSSize `json:"stage3_param_persistence_threshold,omitempty"`
	// OffloadOptimizerDevice and OffloadParamDevice are where what
	// parallel.cpu_offload offloads lives: "cpu" (default) or "nvme"
	// (ZeRO-Infinity, stage 3), as offload_optimizer.device and
	// offload_param.device say (nvme.go).
	OffloadOptimizerDevice string `json:"offload_optimizer_device,omitempty"`
	OffloadParamDevice     string `json:"offload_param_device,omitempty"`
	// SubGroupSize tiles ZeRO-3's optimizer step (default 1e9 elements):
	// with the optimizer on NVMe the host holds one sub-group's state.
	SubGroupSize DSSize `json:"sub_group_size,omitempty"`
	// MaxInCPU is how many parameter elements stay in host memory with the
	// parameters on NVMe (offload_param.max_in_cpu, default 1e9).
	MaxInCPU DSSize `json:"max_in_cpu,omitempty"`
}

// DSSize is a DeepSpeed element count: a number, or "auto" (DSAuto) for the
// value the Hugging Face integrations derive from the model.
type DSSize int64

// DSAuto is "auto" in a DeepSpeed config.
const DSAuto DSSize = -1

// DSZero is an explicit 0 (the zero value is DeepSpeed's default):
// stage3_max_live_parameters 0 keeps no gathered parameter beyond the one
// in use.
const DSZero DSSize = -2

// UnmarshalJSON takes a number (5e8 and 500000000 alike) or "auto".
func (s *DSSize) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case string:
		if x != "auto" {
			return fmt.Errorf("a DeepSpeed size is a number of elements or \"auto\", got %q", x)
		}
		*s = DSAuto
	case float64:
		if x < 0 || x > 1e15 || x != math.Trunc(x) {
			return fmt.Errorf("a DeepSpeed size is a whole number of elements in [0, 1e15], got %v", x)
		}
		*s = DSSize(x)
		if x == 0 {
			*s = DSZero
		}
	default:
		return fmt.Errorf("a DeepSpeed size is a number of elements or \"auto\", got %s", b)
	}
	return nil
}

// MarshalJSON writes "auto" back as "auto".
func (s DSSize) MarshalJSON() ([]byte, error) {
	switch s {
	case DSAuto:
		return []byte(`"auto"`), nil
	case DSZero:
		return []byte("0"), nil
	}
	return json.Marshal(int64(s))
}

// deepSpeed is a run's resolved DeepSpeed ZeRO settings, in elements.
type deepSpeed struct {
	on                                       bool
	reduceBucket, prefetch, maxLive, persist int64
	overlap, contiguous                      bool
	optNVMe, paramNVMe                       bool  // ZeRO-Infinity (nvme.go)
	subGroup, maxInCPU                       int64 // elements
}

// resolveDeepSpeed fills the plan's DeepSpeed settings. They apply where
// DeepSpeed runs ZeRO: a stage set without FSDP, under framework
// "deepspeed" or with a deepspeed section.
func (r *resolved) resolveDeepSpeed() error {
	p := r.Parallel
	if p.DeepSpeed == nil && r.Framework != FrameworkDeepSpeed {
		return nil
	}
	if p.DeepSpeed != nil && (p.FSDP != "none" || p.ZeRO == 0) {
		return fmt.Errorf("parallel.deepspeed configures DeepSpeed's ZeRO: it needs zero_stage 1–3 without fsdp (zero_stage %d, fsdp %q)", p.ZeRO, p.FSDP)
	}
	if p.ZeRO == 0 || p.FSDP != "none" {
		return nil
	}
	var c DeepSpeed
	if p.DeepSpeed != nil {
		c = *p.DeepSpeed
	}
	h := int64(r.m.Hidden)
	size := func(v DSSize, def, auto int64) int64 {
		switch {
		case v == DSAuto:
			return auto
		case v == DSZero:
			return 0
		case v == 0:
			return def
		}
		return int64(v)
	}
	r.ds = deepSpeed{
		on:           true,
		reduceBucket: size(c.ReduceBucketSize, 5e8, h*h),
		prefetch:     size(c.PrefetchBucketSize, 5e7, h*h*9/10),
		maxLive:      size(c.MaxLiveParameters, 1e9, 1e9),
		persist:      size(c.ParamPersistenceThreshold, 1e5, 10*h),
		overlap:      p.ZeRO == 3,
		contiguous:   true,
	}
	if c.OverlapComm != nil {
		r.ds.overlap = *c.OverlapComm
	}
	if c.ContiguousGradients != nil {
		r.ds.contiguous = *c.ContiguousGradients
	}
	r.ds.subGroup, r.ds.maxInCPU = size(c.SubGroupSize, 1e9, 1e9), size(c.MaxInCPU, 1e9, 1e9)
	return r.resolveNVMe(c)
}

// dsBucket is DeepSpeed's flat gradient bucket memory (see
// DeepSpeed.ReduceBucketSize), in the model's dtype; persistent reports
// whether it lives from initialisation on (ZeRO-3) rather than from each
// backward to the step (ZeRO-1/2).
func (r *resolved) dsBucket() (b Bytes, persistent bool) {
	if !r.ds.on || !r.ds.contiguous || r.Optimizer == "none" && r.Trainable == "frozen" {
		return 0, false
	}
	b = r.WeightsDType.Size(r.ds.reduceBucket)
	if r.Parallel.ZeRO == 3 {
		return b, true
	}
	if r.ds.overlap {
		b = addBytes(b, b)
	}
	return b, false
}

// dsPersistent reports whether ZeRO-3 keeps a parameter of n elements whole
// on every rank (DeepSpeed.ParamPersistenceThreshold).
func (r *resolved) dsPersistent(n int64) bool {
	return r.ds.on && r.Parallel.ZeRO == 3 && n < r.ds.persist
}

// dsPrefetched is how much of the next block's gathered parameters (next)
// ZeRO-3 holds besides the current block's (cur): up to the prefetch
// bucket, within the live-parameter cap.
func (r *resolved) dsPrefetched(cur, next Bytes) Bytes {
	d := r.gatheredDType()
	b := min(next, d.Size(r.ds.prefetch))
	if live := d.Size(r.ds.maxLive); cur+b > live {
		b = max(0, live-cur)
	}
	return b
}

// dsBucket is DeepSpeed ZeRO-1/2's backward allocating its gradient
// bucket(s) in the step program: the previous backward's are dropped first
// (DeepSpeedZeroOptimizer.backward rebinds ipg_buffer); the step releases
// them. later: for the next moment (a stage without the head).
func (c *stepCompiler) dsBucket(later bool) {
	b, persistent := c.r.dsBucket()
	if persistent || b <= 0 {
		return
	}
	c.free(c.bucket)
	if later {
		c.bucket = c.allocLater(catOther, b, nil)
	} else {
		c.bucket = c.alloc(catOther, b)
	}
}
