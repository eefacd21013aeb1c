package vram

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Candidate plans side by side, as a team weighs them: each plan's peaks in
// the three measures (allocated, reserved, and what nvidia-smi shows on each
// target GPU), a verdict per GPU, its throughput bound on each GPU whose
// peaks are known, and which plan to run on which GPU and why.

// PlanComparison is ComparePlans' answer.
type PlanComparison struct {
	Plans []PlanResult `json:"plans"`
	GPUs  []GPUChoice  `json:"gpus"` // the target GPUs, in the order given
}

// PlanResult is one candidate plan.
type PlanResult struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // "training" or "inference"
	// Allocated and Reserved are the peaks torch.cuda.max_memory_allocated
	// and max_memory_reserved report (the allocator replay), the larger
	// across the targets (their cuBLAS workspaces differ).
	Allocated Bytes `json:"allocated"`
	Reserved  Bytes `json:"reserved"`
	// DeviceUsed is, per target GPU, what nvidia-smi shows: the reserved
	// high-water mark, that GPU's CUDA context and NCCL's buffers.
	DeviceUsed []Bytes `json:"device_used"`
	Fits       []bool  `json:"fits"` // per target GPU: DeviceUsed within its memory
	// Tokens is the work a GPU does per step: sequences × tokens ×
	// gradient accumulation for training, sequences × (prompt + generated)
	// tokens for inference.
	Tokens int64 `json:"tokens"`
	// Bounds is, per target GPU, the plan's throughput bound
	// (ThroughputBound); zero where the GPU's peaks are unknown.
	Bounds []Throughput `json:"bounds"`
	Err    string       `json:"error,omitempty"` // the plan could not be estimated
}

// GPUChoice is the recommendation for one target GPU.
type GPUChoice struct {
	GPU  GPU    `json:"gpu"`
	Best int    `json:"best"` // index into Plans; -1 when no plan fits
	Why  string `json:"why"`
}

// DefaultTargets are the GPUs a comparison uses when neither the caller nor
// a plan names one.
var DefaultTargets = []string{"A100-40GB", "A100-80GB", "H100-80GB", "L40S", "RTX-4090"}

// ComparePlans estimates each plan on each target GPU (names from the GPU
// catalog or capacities such as "48GB"; nil: the GPUs the plans name, else
// DefaultTargets) and picks for each GPU, among the plans that fit, the one
// with the highest throughput bound (when the GPU's peaks are known), then
// the most work a step, then the fewest bytes on the device. A plan that
// cannot be estimated is reported with its error, never dropped.
func ComparePlans(names []string, plans []Plan, targets []string) (PlanComparison, error) {
	if len(names) != len(plans) {
		return PlanComparison{}, fmt.Errorf("compare: %d names for %d plans", len(names), len(plans))
	}
	if len(plans) == 0 {
		return PlanComparison{}, fmt.Errorf("compare: no plans")
	}
	if len(targets) == 0 {
		seen := map[string]bool{}
		for _, p := range plans {
			if p.GPU != "" && !seen[p.GPU] {
				seen[p.GPU] = true
				targets = append(targets, p.GPU)
			}
		}
		if len(targets) == 0 {
			targets = DefaultTargets
		}
	}
	var cmp PlanComparison
	for _, t := range targets {
		g, err := ParseCapacity(t)
		if err != nil {
			return PlanComparison{}, fmt.Errorf("compare: target GPU %q: %w", t, err)
		}
		cmp.GPUs = append(cmp.GPUs, GPUChoice{GPU: g, Best: -1})
	}
	for i, p := range plans {
		cmp.Plans = append(cmp.Plans, comparePlan(names[i], p, cmp.GPUs))
	}
	for k := range cmp.GPUs {
		cmp.GPUs[k].Best, cmp.GPUs[k].Why = choose(cmp.Plans, k, cmp.GPUs[k].GPU)
	}
	return cmp, nil
}

// comparePlan estimates one plan on every target.
func comparePlan(name string, p Plan, gpus []GPUChoice) PlanResult {
	r := PlanResult{Name: name, DeviceUsed: make([]Bytes, len(gpus)), Fits: make([]bool, len(gpus)), Bounds: make([]Throughput, len(gpus))}
	fail := func(err error) PlanResult {
		r.Err = err.Error()
		return r
	}
	for k := range gpus {
		g := gpus[k].GPU
		var rep Replay
		var err error
		switch {
		case p.PostTraining != nil:
			r.Kind = "post-training"
			rep, err = postTrainingPeak(*p.PostTraining, g)
			r.Tokens = int64(p.PostTraining.Policy.MicroBatch) * int64(p.PostTraining.PromptLen+p.PostTraining.CompletionLen)
		case p.Training != nil:
			r.Kind = "training"
			t := p.Training
			r.Tokens = int64(t.MicroBatch) * int64(t.SeqLen) * int64(max(1, t.GradAccum))
			rep, err = t.Replay(ReplayOptions{GPU: &g})
			if err == nil && g.TFLOPS > 0 {
				r.Bounds[k], err = t.ThroughputBound(g)
			}
		case p.Inference != nil:
			r.Kind = "inference"
			in := p.Inference
			r.Tokens = int64(in.Batch) * int64(in.PromptTokens+in.NewTokens)
			rep, err = in.Replay(ReplayOptions{GPU: &g})
			if err == nil && g.TFLOPS > 0 {
				r.Bounds[k], err = in.ThroughputBound(g)
			}
		default:
			return fail(fmt.Errorf("the plan has neither a train nor an inference object"))
		}
		if err != nil {
			return fail(err)
		}
		r.Allocated, r.Reserved = max(r.Allocated, rep.PeakAllocated), max(r.Reserved, rep.PeakReserved)
		r.DeviceUsed[k] = rep.DeviceUsed
		r.Fits[k] = rep.DeviceUsed <= compareLimit(g)
	}
	return r
}

// choose picks the plan for GPU k: among those that fit, the highest
// throughput bound, then the most tokens a step, then the least device
// memory; and says why. Training and inference
// plans do different work: only plans of the first plan's kind are ranked.
func choose(plans []PlanResult, k int, g GPU) (int, string) {
	kind := ""
	for _, p := range plans {
		if p.Err == "" {
			kind = p.Kind
			break
		}
	}
	var fit []int
	others := 0
	for i, p := range plans {
		if p.Err == "" && p.Fits[k] {
			if p.Kind != kind {
				others++
				continue
			}
			fit = append(fit, i)
		}
	}
	note := ""
	switch {
	case others == 1:
		note = fmt.Sprintf(" (1 %s plan that fits is not ranked against %s plans)", otherKind(kind), kind)
	case others > 1:
		note = fmt.Sprintf(" (%d %s plans that fit are not ranked against %s plans)", others, otherKind(kind), kind)
	}
	if len(fit) == 0 {
		smallest := -1
		for i, p := range plans {
			if p.Err == "" && p.Kind == kind && (smallest < 0 || p.DeviceUsed[k] < plans[smallest].DeviceUsed[k]) {
				smallest = i
			}
		}
		if smallest < 0 {
			return -1, "no plan could be estimated"
		}
		s := plans[smallest]
		return -1, fmt.Sprintf("no %s plan fits: the smallest, %s, needs %v on the device, %v more than the %v it may use (%v less %g %% kept free)%s",
			kind, s.Name, s.DeviceUsed[k], s.DeviceUsed[k]-compareLimit(g), compareLimit(g), g.Total(), 100*DefaultHeadroom, note)
	}
	sort.SliceStable(fit, func(a, b int) bool {
		pa, pb := plans[fit[a]], plans[fit[b]]
		if ta, tb := pa.Bounds[k].TokensPerSecond, pb.Bounds[k].TokensPerSecond; !sameSpeed(ta, tb) {
			return ta > tb
		}
		if pa.Tokens != pb.Tokens {
			return pa.Tokens > pb.Tokens
		}
		return pa.DeviceUsed[k] < pb.DeviceUsed[k]
	})
	best := plans[fit[0]]
	head := fmt.Sprintf("%s fits with %v to spare (%v of the %v it may use on the device, %g %% of %v kept free)", best.Name, compareLimit(g)-best.DeviceUsed[k], best.DeviceUsed[k], compareLimit(g), 100*DefaultHeadroom, g.Total())
	bound := ""
	if b := best.Bounds[k]; b.TokensPerSecond > 0 {
		bound = fmt.Sprintf("at most %s tokens/s on this GPU, %s-bound", Grouped(int64(b.TokensPerSecond)), boundWord(b.Limit))
	}
	work := Grouped(best.Tokens) + " tokens"
	switch {
	case len(fit) == 1:
		return fit[0], fmt.Sprintf("%s; it is the only %s plan that fits%s%s", head, kind, paren(bound), note)
	case !sameSpeed(best.Bounds[k].TokensPerSecond, plans[fit[1]].Bounds[k].TokensPerSecond):
		return fit[0], fmt.Sprintf("%s and can run fastest of the %d %s plans that fit%s%s", head, len(fit), kind, paren(bound), note)
	case best.Tokens > plans[fit[1]].Tokens:
		return fit[0], fmt.Sprintf("%s and does the most work a step of the %d %s plans that fit%s%s", head, len(fit), kind, paren(work, bound), note)
	default:
		return fit[0], fmt.Sprintf("%s; of the %d %s plans that fit, it ties for the most work a step%s and needs the least memory%s", head, len(fit), kind, paren(work, bound), note)
	}
}

// compareLimit is what a compared plan may use on g: the budget of the CLI
// and the reports (device-used, DefaultHeadroom kept free).
func compareLimit(g GPU) Bytes { return Budget{GPU: g, Headroom: DefaultHeadroom}.Limit() }

// paren writes the non-empty parts in parentheses, after a space.
func paren(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return ""
	}
	return " (" + strings.Join(keep, "; ") + ")"
}

// sameSpeed reports whether two throughput bounds are within 1 % (the
// count's own precision): plans that differ only in batch size are both
// compute-bound at the same speed, and then the work a step decides.
func sameSpeed(a, b float64) bool {
	return math.Abs(a-b) <= 0.01*math.Max(a, b)
}

// boundWord is the limit as an adjective: "compute" or "bandwidth".
func boundWord(limit string) string {
	if limit == "memory bandwidth" {
		return "bandwidth"
	}
	return limit
}

func otherKind(kind string) string {
	if kind == "training" {
		return "inference"
	}
	return "training"
}

// Grouped writes n with its digits in groups of three (65,536).
func Grouped(n int64) string {
	s := fmt.Sprint(n)
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// postTrainingPeak is a post-training step's largest phase on g in the
// replay's three measures (a device figure past the card when the engine
// would not start).
func postTrainingPeak(pt PostTraining, g GPU) (Replay, error) {
	e, err := pt.Estimate(g)
	if err != nil {
		return Replay{}, err
	}
	peak := e.Peak()
	rep := Replay{PeakAllocated: peak.Allocated, PeakReserved: peak.Reserved, DeviceUsed: peak.DeviceUsed}
	if !e.Starts {
		rep.DeviceUsed = max(rep.DeviceUsed, g.Total()+1)
	}
	return rep, nil
}
