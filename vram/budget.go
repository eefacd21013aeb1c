package vram

import (
	"errors"
	"fmt"
)

// What must fit. A run survives on a card when what nvidia-smi shows stays
// within the card's memory: the allocator's reserved memory (its cache
// included) plus the CUDA context and NCCL's buffers. That is the default
// measure; the allocated and reserved peaks can be asked for instead.
const (
	MeasureDeviceUsed = "device_used" // nvidia-smi: reserved + CUDA context + NCCL, against the GPU's memory
	MeasureReserved   = "reserved"    // torch.cuda.max_memory_reserved, against the memory after the context
	MeasureAllocated  = "allocated"   // torch.cuda.max_memory_allocated, against the memory after the context
)

// DefaultHeadroom is the share of a GPU's memory the CLI, the reports and
// plan comparisons keep free when judging whether a plan fits; "to spare"
// is always measured to that limit (Verdict.Limit − Verdict.Need).
const DefaultHeadroom = 0.05

// Budget is the memory a plan may use on one GPU, less a headroom fraction
// kept free, in one of the three measures.
type Budget struct {
	GPU      GPU
	Headroom float64 // 0.1 keeps 10% free; zero keeps none
	// Measure is what must fit (MeasureDeviceUsed when empty).
	Measure string
	// Allocator configures the allocator replay behind the reserved and
	// device-used figures (expandable segments, …).
	Allocator AllocatorConfig
	// Torch is the PyTorch release the run uses (empty: the current one;
	// JudgePlan takes the plan's versions.torch), which sizes the GEMM
	// workspaces.
	Torch string
}

func (b Budget) measure() string {
	if b.Measure == "" {
		return MeasureDeviceUsed
	}
	return b.Measure
}

// Limit is the most the plan may need in the budget's measure: the GPU's
// memory less the headroom for device-used; the memory the CUDA context
// leaves (GPU.Usable) less the headroom for reserved and allocated.
func (b Budget) Limit() Bytes {
	total := b.GPU.Total()
	if b.measure() != MeasureDeviceUsed {
		total = b.GPU.Usable()
	}
	// A unified pool is the machine's: what the operating system and other
	// processes keep of it (GPU.UnifiedReserve) is not the plan's.
	return Bytes(float64(total-b.GPU.UnifiedReserve) * (1 - b.Headroom))
}

func (b Budget) check() error {
	if b.GPU.Memory <= 0 {
		return errors.New("budget: GPU memory must be > 0")
	}
	if b.Headroom < 0 || b.Headroom >= 1 {
		return fmt.Errorf("budget: headroom must be in [0, 1), got %v", b.Headroom)
	}
	switch b.measure() {
	case MeasureDeviceUsed, MeasureReserved, MeasureAllocated:
	default:
		return fmt.Errorf("budget: measure %q; known: %s, %s, %s", b.Measure, MeasureDeviceUsed, MeasureReserved, MeasureAllocated)
	}
	return nil
}

// Verdict is a plan judged against a budget.
type Verdict struct {
	// Engine is what the figures are of: "the allocator replay" (PyTorch
	// running the plan: training, transformers' generate) or the serving
	// engine whose carve they are ("vLLM", "SGLang", "TGI").
	Engine    string `json:"engine,omitempty"`
	Measure   string `json:"measure"`
	Allocated Bytes  `json:"allocated"` // torch.cuda.max_memory_allocated
	// Reserved and DeviceUsed come from the allocator replay; both are
	// zero when it was not needed (measure allocated, or the allocated
	// peak alone is over the limit).
	Reserved   Bytes `json:"reserved,omitempty"`
	DeviceUsed Bytes `json:"device_used,omitempty"`
	Context    Bytes `json:"context,omitempty"` // CUDA context in DeviceUsed
	NCCL       Bytes `json:"nccl,omitempty"`    // NCCL buffers in DeviceUsed
	// Host is what the plan keeps in host memory (offloaded states, paged
	// optimizer states), counted in Need on a unified part, whose pool
	// the CPU shares.
	Host  Bytes  `json:"host,omitempty"`
	Need  Bytes  `json:"need"` // the figure in the budget's measure
	Limit Bytes  `json:"limit"`
	Fits  bool   `json:"fits"`
	Why   string `json:"why"`
}

// Judge estimates t and says whether it fits the budget, and why, with
// all three figures (the allocator replay runs unless the measure is
// allocated).
func (b Budget) Judge(t Training) (Verdict, error) { return b.judgeTraining(t, false) }

// judgeTraining is Judge; quick skips the replay (the slow part) when the
// allocated peak alone is over the limit: reserved is never below
// allocated, so such a plan is over it on every measure. The solvers ask
// for quick answers.
func (b Budget) judgeTraining(t Training, quick bool) (Verdict, error) {
	if err := b.check(); err != nil {
		return Verdict{}, err
	}
	est, err := t.Estimate()
	if err != nil {
		return Verdict{}, err
	}
	var host Bytes
	if b.GPU.Unified {
		host = addBytes(est.Host.Total(), est.PagedStates) // the same pool as the device's
	}
	return b.judge(est.Peak.Total(), host, quick, func(o ReplayOptions) (Replay, error) { return t.Replay(o) })
}

// JudgeInference is Judge for an inference plan.
func (b Budget) JudgeInference(in Inference) (Verdict, error) {
	if err := b.check(); err != nil {
		return Verdict{}, err
	}
	est, err := in.Estimate()
	if err != nil {
		return Verdict{}, err
	}
	return b.judge(est.Peak.Total(), 0, false, func(o ReplayOptions) (Replay, error) { return in.Replay(o) })
}

func (b Budget) judge(allocated, host Bytes, quick bool, replay func(ReplayOptions) (Replay, error)) (Verdict, error) {
	// max_memory_allocated includes cuBLAS's workspace, which the first
	// matmul allocates through the caching allocator and keeps.
	g := b.GPU
	v := Verdict{Measure: b.measure(), Allocated: allocated + gemmWorkspace(&g, b.Torch), Limit: b.Limit(), Host: host}
	floor := v.Allocated + host
	if v.Measure == MeasureDeviceUsed {
		floor += b.GPU.Context
	}
	if v.Measure == MeasureAllocated || quick && floor > v.Limit {
		v.Need = floor
		v.Fits = floor <= v.Limit
		v.Why = b.why(v)
		return v, nil
	}
	rep, err := replay(ReplayOptions{GPU: &g, Allocator: b.Allocator, Torch: b.Torch})
	if err != nil {
		return Verdict{}, err
	}
	v.Allocated = rep.PeakAllocated
	v.Reserved, v.DeviceUsed, v.Context, v.NCCL = rep.PeakReserved, rep.DeviceUsed, rep.Context, rep.NCCL
	v.Need = v.Reserved + host
	if v.Measure == MeasureDeviceUsed {
		v.Need = v.DeviceUsed + host
	}
	v.Fits = v.Need <= v.Limit
	v.Why = b.why(v)
	return v, nil
}

// why says the verdict in words, naming what the need is made of and, when
// the allocated peak alone would fit, that the allocator's cache and the
// context are what does not.
func (b Budget) why(v Verdict) string {
	limit := fmt.Sprintf("%v (%s's %v", v.Limit, b.GPU.Name, b.GPU.Total())
	if v.Measure != MeasureDeviceUsed && b.GPU.Context > 0 {
		limit += fmt.Sprintf(" less its %v CUDA context", b.GPU.Context)
	}
	if b.Headroom > 0 {
		limit += fmt.Sprintf(", %g %% kept free", 100*b.Headroom)
	}
	limit += ")"
	var need string
	switch {
	case v.Measure == MeasureAllocated:
		need = fmt.Sprintf("an allocated peak of %v", v.Allocated)
	case v.Reserved == 0 && v.Measure == MeasureDeviceUsed:
		need = fmt.Sprintf("at least %v on the device (allocated peak %v + CUDA context %v; the allocator's cache comes on top)", v.Need, v.Allocated, b.GPU.Context)
	case v.Reserved == 0:
		need = fmt.Sprintf("at least its allocated peak, %v (the allocator's cache comes on top)", v.Allocated)
	case v.Measure == MeasureDeviceUsed:
		need = fmt.Sprintf("%v on the device (reserved %v + CUDA context %v", v.DeviceUsed, v.Reserved, v.Context)
		if v.NCCL > 0 {
			need += fmt.Sprintf(" + NCCL %v", v.NCCL)
		}
		need += ")"
	default:
		need = fmt.Sprintf("a reserved peak of %v", v.Reserved)
	}
	shared := ""
	if b.GPU.Unified {
		shared = "; this memory is unified, shared with the CPU"
		if b.GPU.UnifiedReserve > 0 {
			shared += fmt.Sprintf(": the limit leaves the %v the operating system and other processes were measured to keep", b.GPU.UnifiedReserve)
		}
		if v.Host > 0 {
			shared += fmt.Sprintf("; the need counts the plan's %v in host memory (offloaded and paged states), which comes off the same pool", v.Host)
		}
		shared += "; the process's own host memory (its Python heap, pinned buffers, a dataloader's workers) comes off it too, so keep it within what is spared"
	}
	if v.Fits {
		return fmt.Sprintf("fits: needs %s, within %s; %v to spare%s", need, limit, v.Limit-v.Need, shared)
	}
	s := fmt.Sprintf("does not fit: needs %s, over %s by %v", need, limit, v.Need-v.Limit)
	if v.Measure != MeasureAllocated && v.Reserved > 0 {
		allocLimit := Bytes(float64(b.GPU.Usable()) * (1 - b.Headroom))
		if v.Allocated <= allocLimit {
			s += fmt.Sprintf("; the allocated peak alone (%v) would fit: the allocator's cache and fragmentation", v.Allocated)
			if v.Measure == MeasureDeviceUsed {
				s += " and the CUDA context"
			}
			s += " make the difference"
		}
	}
	return s + shared
}

// JudgePlan judges a plan as it will run: a training plan, or an
// inference plan run by transformers' generate, on the allocator replay
// (Judge, JudgeInference); a plan served by vLLM, SGLang or TGI on that
// engine's own figure (its carve): the engine takes its share of the GPU
// up front, so the verdict is whether it starts, in its words when it
// does not, and what nvidia-smi then shows, against the whole card (its
// memory fraction is the headroom the plan chose).
func (b Budget) JudgePlan(p Plan) (Verdict, error) {
	if err := b.check(); err != nil {
		return Verdict{}, err
	}
	if b.Torch == "" {
		b.Torch = p.Versions.Torch
	}
	switch {
	case p.PostTraining != nil:
		return b.JudgePostTraining(*p.PostTraining)
	case p.Training != nil:
		v, err := b.Judge(*p.Training)
		v.Engine = "the allocator replay"
		return v, err
	case p.Inference == nil:
		return Verdict{}, errors.New("budget: the plan has neither train nor inference")
	case p.LlamaCpp != nil:
		return b.judgeLlamaCpp(*p.LlamaCpp, p.Model)
	case p.Ollama != nil:
		return b.judgeOllama(*p.Ollama, p.Model)
	case p.VLLM != nil:
		c, err := p.VLLM.Carve(*p.Inference, b.GPU)
		if err != nil {
			return Verdict{}, err
		}
		why := fmt.Sprintf("vLLM %s takes %v on the device (gpu_memory_utilization × %v = %v", c.Release.Release, c.DeviceUsed, b.GPU.Total(), c.Requested)
		switch {
		case c.ExtensibleKVCache:
			why = fmt.Sprintf("vLLM %s takes %v on the device (its KV cache sized after warmup and capture, the transient %v it keeps free counted in, the margin %v not; CUDA graphs %v", c.Release.Release, c.DeviceUsed, c.TransientReserve, c.KVMargin, c.CUDAGraphs)
		case c.CUDAGraphs > 0 && c.GraphsInBudget:
			why += fmt.Sprintf(", CUDA graphs %v within it", c.CUDAGraphs)
		case c.CUDAGraphs > 0:
			why += fmt.Sprintf(", CUDA graphs %v beside it", c.CUDAGraphs)
		}
		why += fmt.Sprintf(", memory outside PyTorch %v: the CUDA context", c.NonTorch)
		if c.NCCL > 0 {
			why += fmt.Sprintf(" and NCCL %v", c.NCCL)
		}
		why += fmt.Sprintf("); KV cache %s tokens, %.2fx requests of %d tokens at once", Grouped(c.KVCache.Tokens), c.KVCache.MaxConcurrency, c.KVCache.MaxModelLen)
		return b.engineVerdict("vLLM", c.DeviceUsed, c.Err, why), nil
	case p.SGLang != nil:
		c, err := p.SGLang.Carve(*p.Inference, b.GPU)
		if err != nil {
			return Verdict{}, err
		}
		return b.engineVerdict("SGLang", c.DeviceUsed, c.Err, fmt.Sprintf("SGLang %s takes %v on the device (CUDA context %v, weights %v, KV pool %v: max_total_num_tokens %s)", c.Release.Release, c.DeviceUsed, b.GPU.Context, c.Weights, c.Rest, Grouped(c.Tokens))), nil
	case p.TGI != nil:
		c, err := p.TGI.Carve(*p.Inference, b.GPU)
		if err != nil {
			return Verdict{}, err
		}
		return b.engineVerdict("TGI", c.DeviceUsed, c.Err, fmt.Sprintf("TGI takes %v on the device (CUDA context %v, weights %v, warmup %v, %d KV blocks: max_batch_total_tokens %s)", c.DeviceUsed, b.GPU.Context, c.Weights, c.Activation, c.Blocks, Grouped(c.MaxBatchTotalTokens))), nil
	}
	in := *p.Inference
	in.cc = b.GPU.ComputeCapability
	v, err := b.JudgeInference(in)
	v.Engine = "the allocator replay (transformers' generate)"
	return v, err
}

// engineVerdict is a serving engine's verdict: it starts (err empty) and
// what it takes of the device fits the card.
func (b Budget) engineVerdict(engine string, used Bytes, err, what string) Verdict {
	v := Verdict{Engine: engine, Measure: MeasureDeviceUsed, DeviceUsed: used, Need: used, Limit: b.GPU.Total()}
	v.Fits = err == "" && used <= v.Limit
	switch {
	case err != "":
		v.Why = fmt.Sprintf("does not fit: %s would not start: %s", engine, err)
	case !v.Fits:
		v.Why = fmt.Sprintf("does not fit: %s, over %s's %v by %v", what, b.GPU.Name, b.GPU.Total(), used-v.Limit)
	default:
		v.Why = fmt.Sprintf("fits: %s, within %s's %v", what, b.GPU.Name, b.GPU.Total())
	}
	return v
}

// fits reports whether t fits the budget, and its need in the budget's
// measure.
func fits(t Training, b Budget) (bool, Bytes, error) {
	v, err := b.judgeTraining(t, true)
	return v.Fits, v.Need, err
}

// JudgePostTraining judges every phase of a post-training step on
// device-used: the run fits when the engine starts and no phase or
// transition passes the limit.
func (b Budget) JudgePostTraining(pt PostTraining) (Verdict, error) {
	if err := b.check(); err != nil {
		return Verdict{}, err
	}
	e, err := pt.Estimate(b.GPU)
	if err != nil {
		return Verdict{}, err
	}
	peak := e.Peak()
	v := Verdict{Engine: "the post-training phases", Measure: MeasureDeviceUsed, Allocated: peak.Allocated, Reserved: peak.Reserved,
		DeviceUsed: peak.DeviceUsed, Context: b.GPU.Context, Need: peak.DeviceUsed, Limit: b.Limit()}
	v.Fits = e.Starts && v.Need <= v.Limit
	switch {
	case !e.Starts && e.VLLM != nil:
		v.Engine = "vLLM" // the run ends where its rollout engine does not start
	case !e.Starts && e.SGLang != nil:
		v.Engine = "SGLang"
	}
	switch {
	case !e.Starts:
		v.Why = "does not fit: the rollout engine would not start: " + e.Err
	case !v.Fits:
		v.Why = fmt.Sprintf("does not fit: %s takes %v on the device, over %s's limit %v by %v", peak.Name, peak.DeviceUsed, b.GPU.Name, v.Limit, v.Need-v.Limit)
	default:
		v.Why = fmt.Sprintf("fits: the largest phase, %s, takes %v on the device, %v to spare on %s", peak.Name, peak.DeviceUsed, v.Limit-v.Need, b.GPU.Name)
	}
	return v, nil
}

// judgeLlamaCpp judges a llama-server launch on the busiest GPU as its
// build places the model (its automatic fit where the build has one):
// what each device is projected to hold, beside what it had free at start.
func (b Budget) judgeLlamaCpp(l LlamaCpp, m Model) (Verdict, error) {
	f, err := l.FitParams(m, &b.GPU)
	if err != nil {
		return Verdict{}, err
	}
	var busiest LlamaCppFitDevice
	for _, d := range f.Devices {
		if d.Used-d.Free > busiest.Used-busiest.Free || busiest.Name == "" {
			busiest = d
		}
	}
	v := Verdict{Engine: "llama.cpp " + f.Release.Release, Measure: MeasureDeviceUsed, Need: busiest.Used + b.GPU.Context,
		DeviceUsed: busiest.Used + b.GPU.Context, Limit: busiest.Free + b.GPU.Context}
	v.Fits = f.Status != "failed" && busiest.Used <= busiest.Free
	what := fmt.Sprintf("llama.cpp %s holds %v on %s (weights %v, KV cache and state %v, compute buffers %v) beside its context %v",
		f.Release.Release, busiest.Used, busiest.Name, busiest.Model, busiest.Context, busiest.Compute, b.GPU.Context)
	if busiest.Compute == 0 {
		what += "; its compute buffers are not counted (give llama_cpp.compute_buffers)"
	}
	switch {
	case f.Status == "failed":
		v.Why = fmt.Sprintf("does not fit: llama.cpp's fit gave up (%s); %s", f.Reason, what)
	case !v.Fits:
		v.Why = fmt.Sprintf("does not fit: %s, over the %v %s had free by %v", what, busiest.Free, busiest.Name, busiest.Used-busiest.Free)
	default:
		v.Why = fmt.Sprintf("fits: %s, within the %v %s had free (%s)", what, busiest.Free, busiest.Name, f.Args)
	}
	return v, nil
}

// judgeOllama judges an Ollama load on the busiest GPU it runs on, as its
// release places the model (Ollama.Place: llama-server and llama.cpp's
// fit under Ollama's flags); an up-front release has no such placement.
func (b Budget) judgeOllama(o Ollama, m Model) (Verdict, error) {
	p, err := o.Place(m, &b.GPU)
	if err != nil {
		return Verdict{}, err
	}
	var busiest LlamaCppFitDevice
	for _, d := range p.Fit.Devices {
		if d.Used-d.Free > busiest.Used-busiest.Free || busiest.Name == "" {
			busiest = d
		}
	}
	v := Verdict{Engine: "Ollama " + p.Release.Release, Measure: MeasureDeviceUsed, Need: busiest.Used + b.GPU.Context,
		DeviceUsed: busiest.Used + b.GPU.Context, Limit: busiest.Free + b.GPU.Context}
	v.Fits = busiest.Used <= busiest.Free // a fit that gave up loads num_gpu's layers as given
	what := fmt.Sprintf("Ollama %s (num_ctx %d, %d of %d layers on the GPUs) holds %v on %s (weights %v, KV cache %v, compute buffers %v) beside its context %v",
		p.Release.Release, p.NumCtx, p.Layers-p.CPULayers, p.Layers, busiest.Used, busiest.Name, busiest.Model, busiest.Context, busiest.Compute, b.GPU.Context)
	if busiest.Compute == 0 {
		what += "; its compute buffers are not counted (give ollama.compute_buffers)"
	}
	if p.Fit.Status == "failed" {
		what += fmt.Sprintf("; llama.cpp's fit gave up (%s) and llama-server loads num_gpu's layers as given", p.Fit.Reason)
	}
	if !v.Fits {
		v.Why = fmt.Sprintf("does not fit: %s, over the %v %s had free by %v", what, busiest.Free, busiest.Name, busiest.Used-busiest.Free)
	} else {
		v.Why = fmt.Sprintf("fits: %s, within the %v %s had free (llama-server %s)", what, busiest.Free, busiest.Name, p.Args)
	}
	return v, nil
}
