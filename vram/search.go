package vram

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"sort"
	"sync"
)

// The layout search: every parallel layout of a training run the
// framework supports on a number of GPUs — tensor, pipeline, context and
// fully sharded data parallelism, the micro-batch, the recompute policy,
// float8 and CPU offload — each estimated (Estimate: the allocated peak), those that fit the GPU
// by it kept, the fastest replayed (Replay: reserved and device-used) and
// ranked by the step bound with its communication (StepTime), memory
// headroom breaking ties. A layout's figures are Estimate's and Replay's of
// its plan, byte for byte: the search only chooses which plans to ask.
//
//	res, err := vram.Search(vram.SearchSpace{Plan: t, GPU: h100, GPUs: 1024, GlobalBatch: 2048})
//	for _, l := range res.Layouts { fmt.Println(l.Training.Parallel, l.DeviceUsed, l.Step.TokensPerSecond) }

// SearchSpace is what to search: the plan (its model, sequence length,
// precision, optimizer and framework; any of tp, pp, cp, micro_batch or
// grad_checkpointing it sets stays fixed), the GPU and how many, and the
// global batch in sequences a step.
type SearchSpace struct {
	Plan        Training
	GPU         GPU
	GPUs        int
	GlobalBatch int    // sequences an optimizer step (default: one a GPU)
	Torch       string // the PyTorch release (empty: the current one), which sizes the GEMM workspace
	// Headroom is the share of the GPU a layout must leave free
	// (DefaultHeadroom when 0).
	Headroom float64
	// NetworkBandwidth is each GPU's network bandwidth across nodes, bytes a
	// second (default 50e9: one 400 Gb/s NIC a GPU, as HGX H100 and B200
	// nodes are built).
	NetworkBandwidth float64
	// Replay is how many of the fastest feasible layouts are replayed for
	// device-used (default 100).
	Replay int
	// HostMemory is a node's host memory (its RAM), which an offloaded
	// layout's ranks on the node share: a layout whose ranks' host memory
	// (TrainingEstimate.Host, times the node's min(GPUs, 8) ranks) exceeds
	// it does not fit. Zero: no host check (nodes differ too much for a
	// default: 1 TiB to 4 TiB on HGX H100 and B200 systems), and the
	// result's notes say that the host memory went unchecked.
	HostMemory Bytes
}

// Layout is one searched layout.
type Layout struct {
	Training Training `json:"plan"`
	// Allocated is Estimate's peak; Reserved and DeviceUsed Replay's (zero
	// for a layout not replayed).
	Allocated  Bytes    `json:"allocated"`
	Reserved   Bytes    `json:"reserved,omitempty"`
	DeviceUsed Bytes    `json:"device_used,omitempty"`
	Fits       bool     `json:"fits"`
	Headroom   Bytes    `json:"headroom"` // the limit less the need
	Step       StepTime `json:"step"`
	// Host is the host memory each rank's offload takes (Estimate's
	// Host.Total()); zero without offload.
	Host Bytes `json:"host,omitempty"`
	// Launch is the layout as its framework's launch takes it
	// (Training.LaunchFlags).
	Launch string `json:"launch"`
}

// SearchResult is a search's outcome: the feasible layouts ranked, the
// fastest first, and what was tried.
type SearchResult struct {
	Layouts    []Layout `json:"layouts"`
	Candidates int      `json:"candidates"` // layouts the framework supports
	Feasible   int      `json:"feasible"`   // that fit by their allocated peak (and the host memory)
	// HostShort counts the layouts that fit the GPU but whose offload
	// exceeds the node's host memory (SearchSpace.HostMemory).
	HostShort int `json:"host_short,omitempty"`
	// Dominated counts the offloaded layouts not estimated because the
	// same layout without offload fits (SearchSpace.estimateAll).
	Dominated int   `json:"dominated,omitempty"`
	Limit     Bytes `json:"limit"`
	// Refused counts candidates the engine refused, by the first reason
	// met (a layout the model does not divide into, say).
	Refused map[string]int `json:"refused,omitempty"`
	// Releases are the libraries' releases the layouts were modelled with
	// (torch, NCCL, transformers as the framework runs them).
	Releases []Modelled `json:"releases,omitempty"`
	// Notes say what the search did not check or price (an offload's host
	// memory without SearchSpace.HostMemory, say).
	Notes []string `json:"notes,omitempty"`
}

// withDefaults fills s's defaults and checks it.
func (s SearchSpace) withDefaults() (SearchSpace, error) {
	switch {
	case s.GPUs < 1 || s.GPUs > 1<<20:
		return s, fmt.Errorf("search: gpus must be in [1, %d], got %d", 1<<20, s.GPUs)
	case s.GlobalBatch < 0 || s.GlobalBatch > MaxTokens:
		return s, fmt.Errorf("search: global_batch must be in [1, %d], got %d", MaxTokens, s.GlobalBatch)
	case s.Headroom < 0 || s.Headroom >= 1:
		return s, fmt.Errorf("search: headroom must be in [0, 1), got %g", s.Headroom)
	case s.Replay < 0 || s.NetworkBandwidth < 0 || s.HostMemory < 0:
		return s, errors.New("search: replay, network_bandwidth and host_memory must not be negative")
	}
	if s.GlobalBatch == 0 {
		s.GlobalBatch = s.GPUs
	}
	if s.Headroom == 0 {
		s.Headroom = DefaultHeadroom
	}
	if s.NetworkBandwidth == 0 {
		s.NetworkBandwidth = 50e9
	}
	if s.Replay == 0 {
		s.Replay = 100
	}
	return s, nil
}

// Search searches s's layouts (see the file's comment).
func Search(s SearchSpace) (SearchResult, error) {
	s, err := s.withDefaults()
	if err != nil {
		return SearchResult{}, err
	}
	cands, err := s.candidates()
	if err != nil {
		return SearchResult{}, err
	}
	b := Budget{GPU: s.GPU, Headroom: s.Headroom, Torch: s.Torch}
	res := SearchResult{Candidates: len(cands), Limit: b.Limit(), Refused: map[string]int{}}
	one := cands[0] // a layout of the GPUs, for the releases the answer models
	if res.Releases, err = (Plan{Training: &one, Versions: Versions{Torch: s.Torch}}).Releases(); err != nil {
		return SearchResult{}, err
	}
	ls, errs, pruned := s.estimateAll(cands, b)
	res.Dominated = len(pruned)
	var ok []Layout
	for i, l := range ls {
		switch {
		case pruned[i]:
		case errs[i] != nil:
			res.Refused[firstLine(errs[i])]++
		case l.Fits && !s.hostFits(l):
			res.HostShort++
		case l.Fits:
			ok = append(ok, l)
		}
	}
	res.Notes = s.notes(cands)
	res.Feasible = len(ok)
	sortLayouts(ok)
	ok = ok[:min(len(ok), s.Replay)]
	parallel(len(ok), func(i int) { ok[i] = s.replay(ok[i], b) })
	res.Layouts = slices.DeleteFunc(append([]Layout{}, ok...), func(l Layout) bool { return !l.Fits })
	sortLayouts(res.Layouts)
	for i := range res.Layouts {
		res.Layouts[i].Launch = res.Layouts[i].Training.LaunchFlags()
	}
	if len(res.Refused) == 0 {
		res.Refused = nil
	}
	return res, nil
}

// estimateAll estimates the candidates, on every core: first those
// without an offload the search added, then each offloaded one whose twin
// without it (offloadTwin) does not fit; where the twin fits, the
// offloaded layout is dominated — the same layout with host copies and
// the CPU's optimizer step added to its step (StepTime.HostComm,
// HostStep) — and is
// left out (pruned).
func (s SearchSpace) estimateAll(cands []Training, b Budget) ([]Layout, []error, map[int]bool) {
	ls := make([]Layout, len(cands))
	errs := make([]error, len(cands))
	var first, then []int
	for i := range cands {
		if s.offloadTwin(cands, i) < 0 {
			first = append(first, i)
		} else {
			then = append(then, i)
		}
	}
	parallel(len(first), func(j int) { i := first[j]; ls[i], errs[i] = s.estimate(cands[i], b) })
	pruned := map[int]bool{}
	then = slices.DeleteFunc(then, func(i int) bool {
		tw := s.offloadTwin(cands, i)
		pruned[i] = errs[tw] == nil && ls[tw].Fits && s.hostFits(ls[tw])
		return pruned[i]
	})
	for i, p := range pruned {
		if !p {
			delete(pruned, i)
		}
	}
	parallel(len(then), func(j int) { i := then[j]; ls[i], errs[i] = s.estimate(cands[i], b) })
	return ls, errs, pruned
}

// offloadTwin is the index of candidate i's twin without offload when the
// search added i's offload (float8AndOffload puts a layout's offloads
// right after it without), else -1.
func (s SearchSpace) offloadTwin(cands []Training, i int) int {
	if s.Plan.Parallel.CPUOffload != "" || cands[i].Parallel.CPUOffload == "" || i == 0 {
		return -1
	}
	for j := i - 1; j >= 0 && cands[j].Float8 == cands[i].Float8; j-- {
		if cands[j].Parallel.CPUOffload == "" {
			return j
		}
	}
	return -1
}

// estimate is one candidate's estimate and step bound; Fits by its
// allocated peak with cuBLAS's workspace and the CUDA context, the least
// its device-used can be.
func (s SearchSpace) estimate(t Training, b Budget) (Layout, error) {
	est, err := t.Estimate()
	if err != nil {
		return Layout{}, err
	}
	alloc := est.Peak.Total() + gemmWorkspace(&s.GPU, s.Torch)
	floor := alloc + s.GPU.Context // device-used is never less
	l := Layout{Training: t, Allocated: alloc, Fits: floor <= b.Limit(), Headroom: b.Limit() - floor, Host: est.Host.Total()}
	if !l.Fits {
		return l, nil // no need of its speed
	}
	l.Step, err = t.StepTime(s.GPU, s.NetworkBandwidth)
	return l, err
}

// hostFits reports whether a layout's offload fits the node's host
// memory: each of its ranks on a node (min(GPUs, 8)) takes its Host; true
// without a host memory to judge by.
func (s SearchSpace) hostFits(l Layout) bool {
	return s.HostMemory == 0 || l.Host*Bytes(min(s.GPUs, nodeGPUs)) <= s.HostMemory
}

// notes are what the search says of its candidates: an offload's host
// memory unchecked, and how float8's matmuls were priced.
func (s SearchSpace) notes(cands []Training) []string {
	var offload, float8 bool
	for _, t := range cands {
		offload = offload || t.Parallel.CPUOffload != "" && t.Parallel.CPUOffload != "none"
		float8 = float8 || t.Float8 != "" && t.Float8 != "none"
	}
	var out []string
	if offload && s.HostMemory == 0 {
		out = append(out, "offloaded layouts' host memory is not checked (no host_memory given): each rank's is the layout's host figure, a node's ranks share its RAM")
	}
	if offload {
		out = append(out, "offload's step bound prices the copies over PCIe and the CPU's optimizer step at a DGX H100 node's DDR5 bandwidth, an eighth of 614.4 GB/s a rank (vram/comm.go hostCopyBytes, hostStepBytes)")
	}
	if float8 {
		out = append(out, fmt.Sprintf("float8 layouts' converted linears run at %s's float8 peak (%g TFLOPS dense, twice its 16-bit one), attention and the output layer at the 16-bit peak", s.GPU.Name, peakFLOPS(s.GPU, FP8E4M3)/1e12))
	}
	return out
}

// replay replays a feasible layout on the GPU and judges it on
// device-used.
func (s SearchSpace) replay(l Layout, b Budget) Layout {
	rep, err := l.Training.Replay(ReplayOptions{GPU: &s.GPU, Torch: s.Torch})
	if err != nil {
		l.Fits = false
		return l
	}
	l.Reserved, l.DeviceUsed = rep.PeakReserved, rep.DeviceUsed
	l.Fits, l.Headroom = rep.DeviceUsed <= b.Limit(), b.Limit()-rep.DeviceUsed
	return l
}

// sortLayouts ranks layouts by tokens a second, then a layout that does
// not offload before one that does (the host's own load is beyond the
// bound), then headroom.
func sortLayouts(ls []Layout) {
	sort.SliceStable(ls, func(i, j int) bool {
		a, b := ls[i], ls[j]
		if a.Step.TokensPerSecond != b.Step.TokensPerSecond {
			return a.Step.TokensPerSecond > b.Step.TokensPerSecond
		}
		if oa, ob := a.Host > 0, b.Host > 0; oa != ob {
			return ob
		}
		return a.Headroom > b.Headroom
	})
}

// parallel runs f(0) … f(n−1) on as many goroutines as the machine has
// cores.
func parallel(n int, f func(int)) {
	workers := min(n, goruntime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// firstLine is an error's text, cut to 160 bytes, so that refusals of
// one kind count together.
func firstLine(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// candidates are the layouts the framework supports on s.GPUs: tensor
// parallel degrees 1–8 (a node), pipeline stages in powers of two up to
// the layers, context parallel 1–8 (torchtitan and Megatron-LM all three,
// and expert parallelism for a MoE model; accelerate's no pipeline; the
// others data parallelism alone, DeepSpeed at ZeRO stage 1, 2 or 3), the
// data-parallel degree what is left
// (fully sharded, as torchtitan and FSDP shard it, unless the plan shards
// otherwise), micro-batches 1–8 that divide each replica's share of the
// global batch (with pipeline stages: microbatches of the pipeline, at
// least one a stage; one or two virtual stages a rank), no, selective
// (torchtitan's op-level) or full recompute, and each of those with and
// without float8 and CPU offload where the framework runs them
// (float8AndOffload). What the plan sets stays.
func (s SearchSpace) candidates() ([]Training, error) {
	base := s.Plan
	if err := base.Model.Validate(); err != nil {
		return nil, err
	}
	var pps []int
	for n := 1; n <= max(1, base.Model.Normalize().Layers) && n <= s.GPUs; n *= 2 {
		pps = append(pps, n)
	}
	tps, cps := []int{1, 2, 4, 8}, []int{1, 2, 4, 8}
	switch base.Framework {
	case FrameworkTorchtitan, FrameworkMegatron:
	case FrameworkAccelerate, FrameworkHFTrainer:
		// accelerate's ParallelismConfig: dp_replicate, dp_shard, tp and
		// cp sizes, no pipeline.
		pps = []int{1}
	default:
		// litgpt, torchtune, DeepSpeed's ZeRO and a plain loop: data
		// parallelism alone.
		tps, cps, pps = []int{1}, []int{1}, []int{1}
	}
	checkpoints := []Checkpointing{CheckpointNone, CheckpointSelective, CheckpointFull}
	if base.Framework == FrameworkTorchtitan {
		checkpoints[1] = CheckpointOp // its "selective" is op-level SAC
	}
	if base.Checkpointing != "" {
		checkpoints = []Checkpointing{base.Checkpointing}
	}
	var out []Training
	for _, g := range s.grids(tps, pps, cps) {
		dp, local := s.GPUs/(g.tp*g.pp*g.cp), s.GlobalBatch/(s.GPUs/(g.tp*g.pp*g.cp))
		for _, mb := range fixedOr(base.MicroBatch, 1, 2, 4, 8) {
			if local%mb != 0 || g.pp > 1 && local/mb < g.pp {
				continue
			}
			for _, ck := range checkpoints {
				for _, v := range s.virtualStages(g.pp, local/mb) {
					for _, zero := range s.zeroStages() {
						l := s.layout(grid{dp: dp, tp: g.tp, pp: g.pp, cp: g.cp, ep: g.ep, zero: zero}, local, mb, ck)
						if v > 1 {
							l.Parallel.PPSchedule, l.Parallel.VirtualStages = ScheduleInterleaved1F1B, v
						}
						out = append(out, l)
					}
				}
			}
		}
	}
	out = s.float8AndOffload(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("search: no layout of %d GPUs divides a global batch of %d sequences with the plan's fixed choices", s.GPUs, s.GlobalBatch)
	}
	return out, nil
}

// float8AndOffload is each layout as it is, and with torchao's float8
// training and with CPU offload where the search may try them
// (float8Choices, offloadChoices), the layout's variants together.
func (s SearchSpace) float8AndOffload(ls []Training) []Training {
	if len(ls) == 0 {
		return ls
	}
	f8s := s.float8Choices(ls[0])
	out := make([]Training, 0, len(ls)*len(f8s))
	for _, l := range ls {
		for _, f8 := range f8s {
			for _, off := range s.offloadChoices(l) {
				v := l
				v.Float8, v.Parallel.CPUOffload = f8, off
				out = append(out, v)
			}
		}
	}
	return out
}

// float8Choices are the float8 settings to search: the plan's when it
// sets one ("none" included); else off, and under torchtitan on a GPU with
// float8 tensor cores (GPU.float8Training) for a plan that computes in
// bf16 (torchao casts bf16 matmuls), "rowwise" too: torchtitan 0.3.0's
// Float8LinearConverter takes "rowwise" (its default) or
// "rowwise_with_gw_hp" (components/quantization/float8.py:58), the
// tensorwise recipe gone. Megatron-LM's --fp8-format (Transformer Engine)
// is not modelled, so not searched; t is a candidate, for its dtypes.
func (s SearchSpace) float8Choices(t Training) []string {
	if s.Plan.Float8 != "" {
		return []string{s.Plan.Float8}
	}
	if s.Plan.Framework != FrameworkTorchtitan || !s.GPU.float8Training() {
		return []string{""}
	}
	if r, err := t.resolve(); err != nil || r.ComputeDType != BF16 {
		return []string{""}
	}
	return []string{"", "rowwise"}
}

// offloadChoices are the CPU offloads to search for layout t: the plan's
// when it sets one ("none" included); else none, and for a full
// fine-tune with an optimizer DeepSpeed's offload_optimizer to the CPU
// ("optimizer": the states and the step on the CPU, the gradients with
// them, offload.go) at any ZeRO stage, or torchtitan's
// training.enable_cpu_offload where FSDP2 shards the layout's data
// parallelism ("optimizer+params": CPUOffloadPolicy, parameters,
// gradients and the step on the CPU). Megatron-LM's, accelerate's and the
// others' offloads are not searched.
func (s SearchSpace) offloadChoices(t Training) []string {
	p := s.Plan
	switch {
	case p.Parallel.CPUOffload != "":
		return []string{p.Parallel.CPUOffload}
	case p.Optimizer == "none" || p.Trainable != "" && p.Trainable != "full":
		return []string{""}
	case p.Framework == FrameworkDeepSpeed:
		return []string{"", "optimizer"}
	case p.Framework == FrameworkTorchtitan && t.Parallel.DP > 1:
		return []string{"", "optimizer+params"}
	}
	return []string{""}
}

// grid is a layout's degrees: data, tensor, pipeline, context and expert
// parallel, and the ZeRO stage (0: the framework's sharding).
type grid struct{ dp, tp, pp, cp, ep, zero int }

// grids are the degrees the GPUs and the global batch allow, each with the
// expert-parallel degrees its data and context ranks allow.
func (s SearchSpace) grids(tps, pps, cps []int) []grid {
	p := s.Plan.Parallel
	var out []grid
	for _, tp := range fixedOr(p.TP, tps...) {
		for _, pp := range fixedOr(p.PP, pps...) {
			for _, cp := range fixedOr(p.CP, cps...) {
				n := tp * pp * cp
				if s.GPUs%n != 0 || s.GlobalBatch%(s.GPUs/n) != 0 {
					continue
				}
				for _, ep := range s.epDegrees(s.GPUs / n * cp) {
					out = append(out, grid{tp: tp, pp: pp, cp: cp, ep: ep})
				}
			}
		}
	}
	return out
}

// epDegrees are the expert-parallel degrees a MoE model may take over
// ranks data-parallel and context-parallel ranks: powers of two dividing
// its routed experts and those ranks (torchtitan's ParallelDims and
// Megatron-LM take the expert ranks from them), under the two frameworks
// that run expert parallelism; one otherwise, or the plan's.
func (s SearchSpace) epDegrees(ranks int) []int {
	m := s.Plan.Model.Normalize()
	switch {
	case s.Plan.Parallel.EP > 0:
		return []int{s.Plan.Parallel.EP}
	case m.Experts == 0 || s.Plan.Framework != FrameworkTorchtitan && s.Plan.Framework != FrameworkMegatron:
		return []int{1}
	}
	var out []int
	for ep := 1; ep <= m.Experts && ep <= ranks; ep *= 2 {
		if m.Experts%ep == 0 && ranks%ep == 0 {
			out = append(out, ep)
		}
	}
	return out
}

// zeroStages are DeepSpeed's ZeRO stages to search (1–3), unless the plan
// sets one; other frameworks shard as they do (0).
func (s SearchSpace) zeroStages() []int {
	if s.Plan.Framework != FrameworkDeepSpeed || s.Plan.Parallel.ZeRO > 0 {
		return []int{s.Plan.Parallel.ZeRO}
	}
	return []int{1, 2, 3}
}

// layout is the plan on one layout: g.dp replicas of g.tp × g.pp × g.cp
// GPUs, g.ep of their ranks splitting the experts, each replica taking
// local sequences a step in micro-batches of mb; under DeepSpeed, ZeRO
// stage g.zero.
func (s SearchSpace) layout(g grid, local, mb int, ck Checkpointing) Training {
	t := s.Plan
	dp, tp, pp := g.dp, g.tp, g.pp
	t.Parallel.DP, t.Parallel.TP, t.Parallel.PP, t.Parallel.CP = dp, tp, pp, g.cp
	if g.ep > 1 {
		t.Parallel.EP = g.ep
	}
	if g.zero > 0 {
		t.Parallel.ZeRO = g.zero
	}
	if dp > 1 && t.Parallel.FSDP == "" && t.Parallel.ZeRO == 0 && t.Framework != FrameworkMegatron {
		t.Parallel.FSDP = "full_shard"
	}
	t.Parallel.SP = t.Parallel.SP || tp > 1 && t.Framework == FrameworkTorchtitan
	t.Checkpointing = ck
	t.MicroBatch, t.GradAccum = mb, local/mb
	if pp > 1 {
		// A pipeline's step is one local batch in local/mb microbatches.
		t.MicroBatch, t.GradAccum, t.Parallel.PPMicrobatches = local, 1, local/mb
	}
	return t
}

// virtualStages are the looped stages a rank may hold: one, and for a
// pipeline the plan leaves unscheduled two (interleaved 1F1B, whose
// bubble shrinks by that factor: Narayanan et al. 2021 §2.2.2), where the
// layers give each stage one and the microbatches fill the loop.
func (s SearchSpace) virtualStages(pp, microbatches int) []int {
	if pp == 1 || s.Plan.Parallel.PPSchedule != "" || s.Plan.Parallel.VirtualStages > 0 {
		return []int{max(1, s.Plan.Parallel.VirtualStages)}
	}
	layers := s.Plan.Model.Normalize().Layers
	if s.Plan.Framework == FrameworkTorchtitan && (layers+2)%(2*pp) != 0 {
		// torchtitan counts the embedding and the output as a layer each
		// and needs its virtual stages a multiple of pp: layers_per_stage
		// must divide them evenly (pipeline_llm).
		return []int{1}
	}
	if 2*pp > layers || microbatches%pp != 0 {
		return []int{1}
	}
	return []int{1, 2}
}

// fixedOr is a plan's fixed choice, or the choices to search.
func fixedOr(fixed int, choices ...int) []int {
	if fixed > 0 {
		return []int{fixed}
	}
	return choices
}

// SearchSpaceOn is a training plan's search on g as its plan file asks
// for it (its "search" section: the GPUs, the global batch, the network);
// a caller may override any of them.
func (p Plan) SearchSpaceOn(g GPU) SearchSpace {
	s := SearchSpace{GPU: g, Torch: p.Versions.Torch}
	if p.Training != nil {
		s.Plan = *p.Training
	}
	if ss := p.Search; ss != nil {
		s.GPUs, s.GlobalBatch, s.NetworkBandwidth, s.HostMemory = ss.GPUs, ss.GlobalBatch, ss.NetworkBandwidth, ss.HostMemory
	}
	return s
}
