package vram

import (
	"fmt"
	"sort"
	"strings"
)

// The pieces a framework's step is made of (posttraining.go): what the
// trainer keeps between its steps, the no-grad log-probability passes, the
// engine awake and asleep, the weight-sync buffers. A framework's phases
// function walks them in its order (posttrain_trl.go, posttrain_verl.go).

// rlFramework is a post-training framework's declaration.
type rlFramework struct {
	name    string
	release string // the release whose source the rules follow
	// resolve fills the framework's defaults into the plan and refuses
	// what the framework refuses, in its words.
	resolve func(pt *PostTraining) error
	// lossOf is the training pass's log-probability loss.
	lossOf func(pt PostTraining) LogProbLoss
	// phases appends the step's phases in the framework's order.
	phases func(run *rlRun)
}

var rlFrameworks = map[string]rlFramework{}

func registerRLFramework(f rlFramework) { rlFrameworks[f.name] = f }

func rlFrameworkNames() []string {
	var ns []string
	for n := range rlFrameworks {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// rlRun is one post-training step being evaluated on one GPU.
type rlRun struct {
	pt  PostTraining
	g   GPU
	fw  rlFramework
	est PostTrainingEstimate

	step   TrainingEstimate // the policy's training step
	replay Replay           // its allocator replay on g
	// resident is what the trainer keeps on the GPU between steps:
	// parameters, optimizer states and master weights (gradients are
	// freed by zero_grad(set_to_none=True), torch ≥ 2.0's default).
	resident Breakdown
	// reference is the reference model's weights on this GPU when it is
	// a model of its own.
	reference Bytes
	// weights is the policy in the engine's dtype, split by its TP degree.
	weights Bytes
	// largestParam is the policy's largest tensor, whole, in the
	// trainer's weights dtype: what one all-gather of it makes.
	largestParam Bytes
	nccl         Bytes
	// carry is the trainer's reserved memory entering a phase: PyTorch's
	// cache keeps the training step's high-water mark until
	// torch.cuda.empty_cache.
	carry Bytes
	// engine state
	awake, asleep Bytes // what the engine holds on the GPU awake (idle) and asleep
	generating    Bytes // its peak while generating (its activations on top)
	engineHost    Bytes // host memory it holds asleep (level 1)
	engineCtx     Bytes // a second CUDA context when the engine is a process of its own
	// engineInTorch: the engine's tensors come from the trainer's PyTorch
	// allocator (same process, no sleep mode: vLLM allocates through
	// CuMemAllocator's pool only with enable_sleep_mode,
	// vllm/device_allocator/cumem.py), so allocated and reserved count them.
	engineInTorch bool
	engineParts   []PhasePart
	engineName    string // "vLLM", "SGLang"
	critic        criticRun
	otherCtx      Bytes // other processes' CUDA contexts on this GPU (OpenRLHF's colocated models)
	// engineWeights is how the engine stores the weights (unset: bf16,
	// as the frameworks sync them; Unsloth's 4-bit base stays 4-bit).
	engineWeights Quant
}

// setup names the plan in a line, as a chart or a report titles it: the
// algorithm, the framework, the policy and how the rollout runs.
func (pt PostTraining) setup() string {
	parts := []string{strings.ToUpper(pt.Algorithm), pt.Framework, pt.Policy.Model.Name}
	if pt.Policy.Trainable == "lora" || pt.Policy.LoRA != nil {
		parts = append(parts, "LoRA")
	}
	if n := pt.Policy.Parallel.GPUs(); n > 1 {
		parts = append(parts, fmt.Sprintf("%d GPUs", n))
	}
	if r := pt.Rollout; r != nil && r.Engine != "" && r.Engine != "generate" {
		parts = append(parts, fmt.Sprintf("%s %g", r.Engine, r.GPUMemoryUtilization), fmt.Sprintf("TP %d", max(1, r.TP)), "sleep "+r.Sleep)
	} else if r != nil {
		parts = append(parts, r.Engine)
	}
	return strings.Join(parts, " · ")
}

// newRLRun prepares the pieces shared by every framework.
func newRLRun(pt PostTraining, g GPU) (*rlRun, error) {
	run := &rlRun{pt: pt, g: g, fw: rlFrameworks[pt.Framework]}
	run.est.GPU, run.est.Starts, run.est.Setup = g.Name, true, pt.setup()
	t, err := pt.trainingStep()
	if err != nil {
		return nil, err
	}
	if run.step, err = t.Estimate(); err != nil {
		return nil, fmt.Errorf("post_training.policy: %w", err)
	}
	if run.replay, err = t.Replay(ReplayOptions{GPU: &g, Torch: pt.Torch}); err != nil {
		return nil, fmt.Errorf("post_training.policy: %w", err)
	}
	ms, err := t.ModelStates()
	if err != nil {
		return nil, err
	}
	run.resident = Breakdown{Parameters: ms.Parameters, OptimizerStates: ms.OptimizerStates}
	run.nccl = run.replay.NCCL
	run.carry = run.replay.PeakReserved
	r, err := t.resolve()
	if err != nil {
		return nil, err
	}
	m := r.m
	if pt.Reference == "model" {
		// A second model of the policy's kind, loaded and sharded as the
		// policy's parameters are.
		run.reference = ms.Parameters
	}
	tp := 1
	if pt.Rollout != nil {
		tp = max(1, pt.Rollout.TP)
	}
	run.weights = BF16.Size(m.ParamCount()) / Bytes(tp)
	for _, x := range m.Tensors() {
		n := int64(1)
		for _, d := range x.Shape {
			n *= d
		}
		run.largestParam = max(run.largestParam, r.WeightsDType.Size(n))
	}
	run.est.Training = run.step
	run.est.Notes = append(run.est.Notes, run.step.Notes...)
	return run, nil
}

// phase records one phase: the trainer's allocated bytes with the parts
// that make them, what the engine holds, and the host memory.
func (run *rlRun) phase(name string, transition bool, alloc []PhasePart, reserved, engine, host Bytes, engineParts []PhasePart) {
	var a Bytes
	for _, p := range alloc {
		a = addBytes(a, p.Bytes)
	}
	reserved = max(reserved, a)
	cache := reserved - a
	p := Phase{Name: name, Transition: transition, Allocated: a, Reserved: reserved, Engine: engine, Host: host}
	p.DeviceUsed = addBytes(addBytes(reserved, engine), addBytes(addBytes(run.g.Context, run.nccl), addBytes(run.engineCtx, run.otherCtx)))
	if run.engineInTorch {
		p.Allocated, p.Reserved = addBytes(a, engine), addBytes(reserved, engine)
	}
	parts := append(append([]PhasePart(nil), alloc...), engineParts...)
	if cache > 0 {
		parts = append(parts, PhasePart{"PyTorch's cache (reserved, not allocated)", cache, HolderCache})
	}
	parts = append(parts, PhasePart{"CUDA context", run.g.Context, HolderRuntime})
	if run.engineCtx > 0 {
		parts = append(parts, PhasePart{"the engine's CUDA context", run.engineCtx, HolderRuntime})
	}
	if run.otherCtx > 0 {
		parts = append(parts, PhasePart{"the other models' CUDA contexts", run.otherCtx, HolderRuntime})
	}
	if run.nccl > 0 {
		parts = append(parts, PhasePart{"NCCL buffers", run.nccl, HolderRuntime})
	}
	var kept []PhasePart
	for _, q := range parts {
		if q.Bytes > 0 {
			kept = append(kept, q)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].Bytes > kept[j].Bytes })
	p.Live = kept
	run.est.Phases = append(run.est.Phases, p)
}

// residentParts are the trainer's persistent parts on the GPU; those
// offloaded between phases are in host memory instead (returned).
func (run *rlRun) residentParts(paramsOff, statesOff bool) (parts []PhasePart, host Bytes) {
	r := run.resident
	if paramsOff {
		host = addBytes(host, r.Parameters)
	} else {
		parts = append(parts, PhasePart{"policy parameters", r.Parameters, HolderTrainer})
	}
	if statesOff {
		host = addBytes(host, r.OptimizerStates)
	} else {
		parts = append(parts, PhasePart{"optimizer states and master weights", r.OptimizerStates, HolderTrainer})
	}
	if run.reference > 0 {
		parts = append(parts, PhasePart{"reference model", run.reference, HolderReference})
	}
	return parts, addBytes(host, run.step.Host.Total())
}

// logProbPass is the peak of one no-grad forward over batch sequences of
// the plan's length that returns per-token log-probabilities: one block's
// no-grad working set or the logits and their log-softmax, whichever is
// larger (no cache: use_cache=False, grpo_trainer.py l.1504).
func (run *rlRun) logProbPass(batch int) (Bytes, error) {
	t := run.pt.Policy
	t.SeqLen, t.MicroBatch = run.pt.PromptLen+run.pt.CompletionLen, batch
	lp := run.fw.lossOf(run.pt)
	t.LogProbs = &lp
	t = run.pt.packed(t)
	t.Trainable, t.Optimizer, t.OptimizerImpl, t.LoRA, t.Checkpointing = "frozen", "none", "", nil, ""
	r, err := t.resolve()
	if err != nil {
		return 0, fmt.Errorf("log-prob pass (batch %d): %w", batch, err)
	}
	r.frozen = true
	block := buildBlockInference(&r)
	keep := int64(t.SeqLen)
	if lp.Tokens > 0 {
		keep = int64(lp.Tokens) + 1
	}
	v := int64(r.m.Vocab) / int64(r.tp)
	n := mulI64(int64(t.MicroBatch), mulI64(keep, v))
	d := r.ComputeDType
	logits := d.Size(n)
	if lp.LogitsFP32 && d != FP32 {
		logits = addBytes(logits, FP32.Size(n)) // the converted copy beside the model's
		d = FP32
	}
	if lp.TemperatureCopy {
		logits = addBytes(logits, d.Size(n))
	}
	row := d.Size(mulI64(keep, v)) // one row's log_softmax (logsumexp's exp in fp32)
	if lp.Fused {
		row = FP32.Size(mulI64(int64(t.MicroBatch), keep)) // a logsumexp per token
	}
	// The decoder's forward references inputs_embeds until it returns
	// (LlamaModel.forward and its kin), beside every block's work.
	embeds := r.ComputeDType.Size(mulI64(int64(t.MicroBatch)*int64(t.SeqLen), int64(r.m.Hidden)))
	if k := int64(lp.HiddenChunks); k > 0 {
		// One chunk of one row at a time: the output projection's and its
		// fp32 cast, beside the hidden states the model returned.
		c := mulI64((keep+k-1)/k, v)
		logits, row = addBytes(r.ComputeDType.Size(c), FP32.Size(c)), FP32.Size(c)
		embeds = addBytes(embeds, embeds)
	}
	return addBytes(embeds, max(block, addBytes(logits, row))), nil
}

// estimate closes the run: the bounding phase and transition.
func (run *rlRun) estimate() PostTrainingEstimate {
	e := run.est
	var phase, trans Bytes
	for _, p := range e.Phases {
		if p.Transition && p.DeviceUsed > trans {
			trans, e.BoundTransition = p.DeviceUsed, p.Name
		}
		if p.DeviceUsed > phase {
			phase, e.Bound = p.DeviceUsed, p.Name
		}
	}
	return e
}

// engineAt sizes the rollout engine on this GPU: its carve (vLLM) or pool
// (SGLang) with the trainer's memory at the engine's start (atStart)
// already on the device. It sets the engine's awake, generating and asleep
// footprints for the sleep mode sleep.
func (run *rlRun) engineAt(atStart Bytes, sleep string) error {
	ro := run.pt.Rollout
	m := run.pt.Policy.Model
	in := Inference{Model: m, Weights: Quant{DType: BF16}}
	if run.engineWeights.DType != DTypeUnset {
		in.Weights = run.engineWeights
	}
	free := max(0, run.g.Total()-run.g.Context-run.engineCtx-run.otherCtx-atStart) // never a negative size, on a card too small for the trainer
	switch ro.Engine {
	case "vllm":
		v := VLLM{Version: ro.Version, GPUMemoryUtilization: ro.GPUMemoryUtilization, TP: ro.TP, MaxNumSeqs: ro.MaxNumSeqs,
			MaxNumBatchedTokens: ro.MaxNumBatchedTokens, MaxModelLen: run.pt.PromptLen + run.pt.CompletionLen, CUDAGraphMemory: ro.CUDAGraphMemory,
			heldAtStart: run.engineCtx + run.otherCtx + atStart}
		c, err := v.Carve(in, run.g)
		if err != nil {
			return fmt.Errorf("post_training.rollout: %w", err)
		}
		if c.Requested > free && !c.ExtensibleKVCache { // 0.34's extensible cache does not refuse it (v1/worker/utils.py:783-797)
			// gpu_worker.py init_device: the free memory at start, which the
			// trainer's tensors already take, must hold the share asked.
			c.Err = fmt.Sprintf("ValueError: Free memory on device (%.2f/%.2f GiB) on startup is less than desired GPU memory utilization (%v, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
				float64(free)/float64(GiB), float64(run.g.Total())/float64(GiB), ro.GPUMemoryUtilization, float64(c.Requested)/float64(GiB))
		}
		run.est.VLLM = &c
		run.setEngine(c.Err, c.Weights, c.KVCache.Available, c.Activation, c.CUDAGraphs, "vLLM", sleep)
	case "sglang":
		s := SGLang{Version: ro.Version, MemFractionStatic: ro.GPUMemoryUtilization, TP: ro.TP}
		pool, err := s.KVPool(m, free, run.weights)
		if err != nil {
			return fmt.Errorf("post_training.rollout: %w", err)
		}
		run.est.SGLang = &pool
		run.setEngine(pool.Err, pool.Weights, pool.Rest, 0, ro.CUDAGraphMemory, "SGLang", sleep)
	}
	return nil
}

// setEngine records the engine's footprints: awake it holds its weights,
// its KV cache and its CUDA graphs, generating its activations too; asleep
// at level 1 its weights wait in host memory, at level 2 they are dropped
// (vLLM's sleep, CuMemAllocator pools "weights" and "kv_cache"), and only
// the CUDA graphs stay.
func (run *rlRun) setEngine(err string, weights, kv, act, graphs Bytes, name, sleep string) {
	if err != "" {
		run.est.Starts, run.est.Err = false, err
	}
	run.awake = addBytes(addBytes(weights, kv), graphs)
	run.generating = addBytes(run.awake, act)
	run.engineParts = []PhasePart{{name + " weights", weights, HolderEngine}, {name + " KV cache", kv, HolderEngine}, {name + " CUDA graphs", graphs, HolderEngine}}
	run.engineName = name
	run.asleep = run.awake
	if sleep == SleepLevel1 || sleep == SleepLevel2 {
		run.asleep = graphs
	}
	if sleep == SleepLevel1 {
		run.engineHost = weights
	}
}

// engineState is what the engine holds in a phase.
type engineState int

const (
	engineAwake       engineState = iota // weights, KV cache and CUDA graphs
	engineAsleep                         // what its sleep level leaves
	engineWeightsOnly                    // woken for the weight sync, the cache not yet
	engineGenerating                     // awake, with its activations
)

// engineWith returns the engine's parts in a phase: asleep, with its
// weights only (woken for the sync), awake, or generating.
func (run *rlRun) engineWith(state engineState) (Bytes, []PhasePart) {
	ps := run.engineParts
	switch state {
	case engineAsleep:
		if run.asleep == run.awake {
			return run.awake, ps
		}
		return run.asleep, ps[2:]
	case engineWeightsOnly:
		return addBytes(ps[0].Bytes, ps[2].Bytes), []PhasePart{ps[0], ps[2]}
	case engineGenerating:
		act := run.generating - run.awake
		return run.generating, append(append([]PhasePart(nil), ps...), PhasePart{run.engineName + " activations (generating)", act, HolderEngine})
	}
	return run.awake, ps
}
