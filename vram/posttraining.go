package vram

import (
	"errors"
	"fmt"
	"math"
)

// Post-training — GRPO, RLOO, PPO, DPO — as one step on each GPU: a
// sequence of phases (the rollout engine generating, the no-grad
// log-probability passes, the training step) and the transitions between
// them (the weight sync into the engine), each with what PyTorch's
// allocator and the engine hold and what nvidia-smi shows. The policy's
// training step is the engine's own (Training.Estimate and Replay); the
// rollout engine's memory is its carve (VLLM.Carve, SGLang.KVPool). A
// framework's order of phases, its defaults and its refusals live in its
// declaration (posttrain_trl.go, posttrain_verl.go).

// PostTraining is one post-training run on one kind of GPU.
type PostTraining struct {
	// Algorithm: grpo, rloo, ppo (a value model trains beside the policy)
	// or dpo (preference pairs, no rollout).
	Algorithm string `json:"algorithm"`
	// Framework whose defaults and phase order apply: trl, verl,
	// openrlhf or unsloth (GRPO with fast_inference).
	Framework string `json:"framework"`
	// Policy is the policy's training step as the trainer runs it:
	// precision, optimizer, checkpointing, LoRA, parallelism;
	// micro_batch is its per_device_train_batch_size (TRL) or
	// ppo_micro_batch_size_per_gpu (verl). seq_len is left unset: it is
	// the prompt and the completion.
	Policy Training `json:"policy"`
	// PromptLen and CompletionLen are the tokens of each prompt and each
	// completion (DPO: of the prompt and of the longer answer).
	PromptLen     int `json:"prompt_len"`
	CompletionLen int `json:"completion_len"`
	// Generations is the completions per prompt (TRL num_generations,
	// verl rollout.n).
	Generations int `json:"generations_per_prompt,omitempty"`
	// Reference: "model" (a frozen copy of the policy), "adapter" (LoRA:
	// the policy with its adapter off), "precomputed" (DPO's
	// precompute_ref_log_probs) or "none" (no KL term: TRL's beta = 0).
	// Unset: what the framework does for the algorithm.
	Reference string `json:"reference,omitempty"`
	// LogProbMicroBatch is the sequences per no-grad log-probability pass
	// (verl's log_prob_micro_batch_size_per_gpu; for TRL's DPO with a
	// precomputed reference, precompute_ref_batch_size, in pairs); TRL's
	// other passes use the policy's micro-batch.
	LogProbMicroBatch int `json:"log_prob_micro_batch,omitempty"`
	// PackedLen is the mean tokens of a sequence (prompt and completion)
	// when the trainer removes the padding and packs a micro-batch's
	// sequences into one row (verl's use_remove_padding, on by default:
	// hf_model.yaml l.40, with flash attention's variable-length kernels):
	// the training step and the log-prob passes then hold micro_batch ×
	// packed_len tokens. Unset: every sequence at its full length, the
	// most a micro-batch can hold.
	PackedLen int `json:"packed_len,omitempty"`
	// ParamOffload and OptimizerOffload move the policy's parameters and
	// optimizer states to host memory between its uses (verl's
	// fsdp_config.param_offload and optimizer_offload).
	ParamOffload     bool `json:"param_offload,omitempty"`
	OptimizerOffload bool `json:"optimizer_offload,omitempty"`
	// Rollout is the generation engine; DPO has none.
	Rollout *Rollout `json:"rollout,omitempty"`
	// Torch is the PyTorch release the steps run on, from the plan's
	// versions.torch (Plan.ApplyVersions); empty: the current one.
	Torch string `json:"-"`
	// Critic is PPO's value model: the policy's architecture with a value
	// head instead of the LM head, trained beside it on the same GPUs.
	Critic *Critic `json:"critic,omitempty"`
	// RewardModel: "none" (a rule-based reward, the default: no GPU
	// memory) or "model" (a reward model of the policy's architecture
	// with a score head, scoring on the same GPUs: OpenRLHF's
	// reward_pretrain).
	RewardModel string `json:"reward_model,omitempty"`
}

// Critic is PPO's value model as verl's critic worker runs it.
type Critic struct {
	// MicroBatch is the sequences per training micro-batch
	// (critic.ppo_micro_batch_size_per_gpu); ForwardMicroBatch per no-grad
	// value pass (critic.forward_micro_batch_size_per_gpu, default the
	// former).
	MicroBatch        int `json:"micro_batch"`
	ForwardMicroBatch int `json:"forward_micro_batch,omitempty"`
	// ParamOffload and OptimizerOffload move its parameters and optimizer
	// states to host memory between uses (critic.model.fsdp_config.*).
	ParamOffload     bool `json:"param_offload,omitempty"`
	OptimizerOffload bool `json:"optimizer_offload,omitempty"`
}

// Rollout is the engine that generates the completions, colocated with
// the trainer on the same GPUs.
type Rollout struct {
	// Engine: vllm, sglang, or generate (transformers' generate inside
	// the trainer).
	Engine string `json:"engine"`
	// Version is the engine's release (a plan's versions.vllm or
	// versions.sglang); empty is the current one.
	Version string `json:"-"`
	// Placement: "colocate" (default: on the trainer's GPUs) or
	// "separate" (on GPUs of its own, as TRL's vllm_mode "server" runs
	// `trl vllm-serve`): the plan's GPUs then hold the trainer alone, and
	// the engine is a serving plan of its own.
	Placement string `json:"placement,omitempty"`
	// GPUMemoryUtilization is the engine's share in its own meaning: a
	// fraction of the GPU's total memory for vLLM, of the free memory at
	// its start for SGLang (mem_fraction_static) and for Unsloth's
	// from_pretrained. Unset: the framework's.
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization,omitempty" zero:"leaves the engine no memory: vLLM refuses it (its CacheConfig takes a fraction greater than 0) and SGLang stops with \"Not enough memory\""`
	// Sleep: whether the engine releases its memory outside generation —
	// "none", "level1" (vLLM: weights to host memory, cache dropped) or
	// "level2" (both dropped); for Unsloth either is its standby (the
	// cache dropped, the shared weights kept). Unset: the framework's.
	Sleep string `json:"sleep,omitempty"`
	TP    int    `json:"tensor_parallel_size,omitempty"`
	// MaxNumSeqs and MaxNumBatchedTokens are the engine's scheduler limits
	// (unset: as the framework launches it).
	MaxNumSeqs          int `json:"max_num_seqs,omitempty"`
	MaxNumBatchedTokens int `json:"max_num_batched_tokens,omitempty"`
	// CUDAGraphMemory is the engine's CUDA-graph pool, outside its share
	// (a measurement: the log's "Graph capturing finished … took"); zero
	// counts none.
	CUDAGraphMemory Bytes `json:"cuda_graph_memory,omitempty"`
}

// Sleep modes.
const (
	SleepNone   = "none"
	SleepLevel1 = "level1"
	SleepLevel2 = "level2"
)

// Phase is one phase of a post-training step on one GPU, or a transition
// between phases.
type Phase struct {
	Name       string `json:"name"`
	Transition bool   `json:"transition,omitempty"`
	// Allocated and Reserved are the trainer process's PyTorch allocator
	// (torch.cuda.memory_allocated / memory_reserved at the phase's peak),
	// which counts the engine's tensors only where the engine runs in the
	// same process without its own memory pool.
	Allocated Bytes `json:"allocated"`
	Reserved  Bytes `json:"reserved"`
	// Engine is what the rollout engine holds on this GPU in the phase.
	Engine Bytes `json:"engine"`
	// DeviceUsed is what nvidia-smi shows: the trainer's reserved memory,
	// the engine's, the CUDA contexts and NCCL's buffers.
	DeviceUsed Bytes `json:"device_used"`
	// Host is the host memory the phase holds for this GPU (offloaded
	// states, an engine's weights asleep at level 1).
	Host Bytes `json:"host"`
	// Live says what holds the memory, largest first.
	Live []PhasePart `json:"live"`
}

// PhasePart is one holder of memory in a phase.
type PhasePart struct {
	What   string `json:"what"`
	Bytes  Bytes  `json:"bytes"`
	Holder Holder `json:"holder"`
}

// Holder is whose memory a phase part is.
type Holder string

// The holders, in the order charts stack them.
const (
	HolderTrainer   Holder = "trainer"   // the policy's parameters and optimizer states, its training step
	HolderReference Holder = "reference" // the reference model
	HolderPass      Holder = "pass"      // working memory: a no-grad pass, generate's cache, the sync's buffers
	HolderCache     Holder = "cache"     // PyTorch's cache, reserved and not allocated
	HolderEngine    Holder = "engine"    // the rollout engine: weights, KV cache, CUDA graphs, activations
	HolderRuntime   Holder = "runtime"   // CUDA contexts and NCCL's buffers
)

// Holders lists them in stacking order.
var Holders = []Holder{HolderTrainer, HolderReference, HolderPass, HolderCache, HolderEngine, HolderRuntime}

// By is the phase's bytes held by h.
func (p Phase) By(h Holder) Bytes {
	var b Bytes
	for _, q := range p.Live {
		if q.Holder == h {
			b += q.Bytes
		}
	}
	return b
}

// PostTrainingEstimate is a post-training step on one GPU.
type PostTrainingEstimate struct {
	GPU string `json:"gpu"`
	// Setup names the plan in a line (algorithm · framework · policy ·
	// rollout), as resolved: what a chart of it is titled with.
	Setup  string  `json:"setup"`
	Phases []Phase `json:"phases"`
	// Bound is the phase with the most device memory; BoundTransition
	// the transition with the most (empty without one).
	Bound           string `json:"bound"`
	BoundTransition string `json:"bound_transition,omitempty"`
	// Starts is false when the engine would not start; Err says why in
	// its words.
	Starts bool   `json:"starts"`
	Err    string `json:"error,omitempty"`
	// Training is the policy's training step (one micro-batch of prompt
	// and completion tokens).
	Training TrainingEstimate `json:"training"`
	// Rollout is the engine's carve on this GPU (vLLM), or SGLang's pool.
	VLLM   *VLLMCarve    `json:"vllm,omitempty"`
	SGLang *SGLangKVPool `json:"sglang,omitempty"`
	Notes  []string      `json:"notes,omitempty"`
}

// Peak is the most device memory of any phase.
func (e PostTrainingEstimate) Peak() Phase {
	var best Phase
	for _, p := range e.Phases {
		if p.DeviceUsed > best.DeviceUsed {
			best = p
		}
	}
	return best
}

// Host is the most host memory of any phase.
func (e PostTrainingEstimate) Host() Bytes {
	var h Bytes
	for _, p := range e.Phases {
		h = max(h, p.Host)
	}
	return h
}

// Resolved is the plan with the framework's defaults filled in (the
// settings its estimate uses).
func (pt PostTraining) Resolved() (PostTraining, error) { return pt.resolve() }

// TrainingStep is the policy's training step as the estimate runs it: one
// micro-batch of prompt and completion tokens, the framework's defaults
// and its log-probability loss.
func (pt PostTraining) TrainingStep() (Training, error) {
	pt, err := pt.resolve()
	if err != nil {
		return Training{}, err
	}
	return pt.trainingStep()
}

// Validate checks the plan's fields and the framework's refusals.
func (pt PostTraining) Validate() error {
	_, err := pt.resolve()
	return err
}

// resolve fills the framework's defaults and checks the plan.
func (pt PostTraining) resolve() (PostTraining, error) {
	if err := oneOf("post_training.algorithm", pt.Algorithm, algorithms...); err != nil {
		return pt, err
	}
	fw, ok := rlFrameworks[pt.Framework]
	if !ok {
		return pt, oneOf("post_training.framework", pt.Framework, rlFrameworkNames()...)
	}
	if pt.Algorithm == "dpo" && pt.Rollout != nil {
		return pt, errors.New("post_training.rollout: DPO trains on preference pairs and generates nothing; remove the rollout")
	}
	if pt.Algorithm != "dpo" && pt.Rollout == nil {
		return pt, fmt.Errorf("post_training.rollout: %s generates its completions; name the engine (vllm, sglang or generate)", pt.Algorithm)
	}
	if r := pt.Rollout; r != nil {
		if err := r.check(); err != nil {
			return pt, err
		}
		ro := *r
		pt.Rollout = &ro // the framework's defaults go into a copy
	}
	if pt.Reference != "" {
		if err := oneOf("post_training.reference", pt.Reference, references...); err != nil {
			return pt, err
		}
	}
	if pt.RewardModel != "" {
		if err := oneOf("post_training.reward_model", pt.RewardModel, "none", "model"); err != nil {
			return pt, err
		}
	}
	if pt.RewardModel == "model" && pt.Framework != "openrlhf" {
		return pt, fmt.Errorf(`post_training.reward_model "model": a reward model on the GPU is planned with OpenRLHF; %s's plans score with rule-based rewards (no GPU memory)`, pt.Framework)
	}
	if err := fw.resolve(&pt); err != nil {
		return pt, fmt.Errorf("post_training (%s %s): %w", fw.name, fw.release, err)
	}
	if pt.PromptLen < 1 || pt.PromptLen > MaxTokens {
		return pt, fieldRange("post_training.prompt_len", pt.PromptLen, 1, MaxTokens)
	}
	if pt.CompletionLen < 1 || pt.CompletionLen > MaxTokens-pt.PromptLen {
		return pt, fieldRange("post_training.completion_len", pt.CompletionLen, 1, MaxTokens-pt.PromptLen)
	}
	if pt.Policy.SeqLen != 0 {
		return pt, errors.New("post_training.policy.seq_len: the sequence is the prompt and the completion (prompt_len + completion_len); leave it unset")
	}
	if pt.PackedLen < 0 || pt.PackedLen > pt.PromptLen+pt.CompletionLen {
		return pt, fieldRange("post_training.packed_len", pt.PackedLen, 0, pt.PromptLen+pt.CompletionLen)
	}
	if pt.Generations < 0 || pt.LogProbMicroBatch < 0 {
		return pt, errors.New("post_training: generations_per_prompt and log_prob_micro_batch must be ≥ 0")
	}
	if pt.Reference == "adapter" && pt.Policy.LoRA == nil {
		return pt, errors.New(`post_training.reference "adapter" disables the policy's LoRA adapter; the policy has none`)
	}
	if pt.Reference == "precomputed" && pt.Algorithm != "dpo" {
		return pt, errors.New(`post_training.reference "precomputed" is DPO's precompute_ref_log_probs; an online algorithm scores each step's new completions`)
	}
	step, err := pt.trainingStep()
	if err != nil {
		return pt, err
	}
	if err := step.Validate(); err != nil {
		return pt, fmt.Errorf("post_training.policy: %w", err)
	}
	return pt, nil
}

func (r Rollout) check() error {
	if err := oneOf("post_training.rollout.engine", r.Engine, "vllm", "sglang", "generate"); err != nil {
		return err
	}
	u := r.GPUMemoryUtilization
	if math.IsNaN(u) || u < 0 || u > 1 {
		return fmt.Errorf("post_training.rollout.gpu_memory_utilization must be in (0, 1], got %v", u)
	}
	if r.Sleep != "" {
		if err := oneOf("post_training.rollout.sleep", r.Sleep, SleepNone, SleepLevel1, SleepLevel2); err != nil {
			return err
		}
	}
	if r.Placement != "" {
		if err := oneOf("post_training.rollout.placement", r.Placement, "colocate", "separate"); err != nil {
			return err
		}
		if r.Placement == "separate" && r.Engine == "generate" {
			return errors.New(`post_training.rollout.placement "separate": transformers' generate runs inside the trainer`)
		}
	}
	if r.TP < 0 || r.TP > 1024 || r.MaxNumSeqs < 0 || r.MaxNumBatchedTokens < 0 || r.MaxNumBatchedTokens > MaxTokens {
		return errors.New("post_training.rollout: tensor_parallel_size, max_num_seqs and max_num_batched_tokens must be ≥ 0 (and within bounds)")
	}
	if r.CUDAGraphMemory < 0 || r.CUDAGraphMemory > 1024*GiB {
		return errors.New("post_training.rollout.cuda_graph_memory must be in [0, 1 TiB]")
	}
	if r.Engine == "generate" && (u != 0 || r.Sleep != "" || r.TP != 0 || r.MaxNumSeqs != 0 || r.MaxNumBatchedTokens != 0 || r.CUDAGraphMemory != 0) {
		return errors.New("post_training.rollout: the trainer's own generate takes no engine settings (gpu_memory_utilization, sleep, tensor_parallel_size, max_num_seqs, max_num_batched_tokens, cuda_graph_memory)")
	}
	return nil
}

// trainingStep is the policy's training step: one micro-batch of prompt
// and completion, the framework's log-probability loss.
func (pt PostTraining) trainingStep() (Training, error) {
	t := pt.Policy
	t.SeqLen = pt.PromptLen + pt.CompletionLen
	fw := rlFrameworks[pt.Framework]
	lp := fw.lossOf(pt)
	t.LogProbs = &lp
	if pt.Algorithm == "dpo" {
		// chosen and rejected in one forward of 2 × micro_batch rows
		// (dpo_trainer.py l.153-213; OpenRLHF's concatenated_forward alike).
		t.MicroBatch *= 2
	}
	return pt.packed(t), nil
}

// packed is t with a micro-batch's sequences packed into one row of their
// real tokens, attended by flash attention's variable-length kernels.
func (pt PostTraining) packed(t Training) Training {
	if pt.PackedLen == 0 {
		return t
	}
	t.SeqLen, t.MicroBatch = t.MicroBatch*pt.PackedLen, 1
	t.Attention = "flash2"
	return t
}

// Estimate predicts each phase of one post-training step on g.
func (pt PostTraining) Estimate(g GPU) (_ PostTrainingEstimate, err error) {
	defer recoverOverflow(&err)
	pt, err = pt.resolve()
	if err != nil {
		return PostTrainingEstimate{}, err
	}
	run, err := newRLRun(pt, g)
	if err != nil {
		return PostTrainingEstimate{}, err
	}
	rlFrameworks[pt.Framework].phases(run)
	return run.estimate(), nil
}

// MaxCompletionLen is the longest completion (at the plan's other
// settings) whose every phase fits the budget; 0 when none does.
func (pt PostTraining) MaxCompletionLen(b Budget) (int, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	ok := func(n int) bool {
		q := pt
		q.CompletionLen = n
		e, err := q.Estimate(b.GPU)
		return err == nil && e.Starts && e.Peak().DeviceUsed <= b.Limit()
	}
	if _, err := pt.resolve(); err != nil {
		return 0, err
	}
	limit := MaxTokens - pt.PromptLen
	if mp := pt.Policy.Model.MaxPosition; mp > 0 {
		limit = min(limit, mp-pt.PromptLen)
	}
	return largest(limit, ok), nil
}

var (
	algorithms = enum("algorithm", "grpo", "rloo", "ppo", "dpo")
	references = enum("reference", "model", "adapter", "precomputed", "none")
)
