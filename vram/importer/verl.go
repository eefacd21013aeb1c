package importer

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/internal/strictjson"
	"github.com/vramlab/vramlab/vram/internal/yaml"
)

// verl's main_ppo as users launch it: `python3 -m verl.trainer.main_ppo
// key=value …` (Hydra overrides of verl/trainer/config/ppo_trainer.yaml,
// verl b178a3cd) in a launch script, or a YAML of the same keys. It
// becomes a post-training plan whose framework is verl (posttrain_verl.go
// holds verl's defaults for what the overrides leave unset).

// isVerlCommand reports whether a command runs verl's PPO trainer.
func isVerlCommand(words []string) bool {
	for _, w := range words {
		if w == "verl.trainer.main_ppo" || strings.HasSuffix(w, "verl/trainer/main_ppo.py") {
			return true
		}
	}
	return false
}

// verlTree reads the Hydra overrides after the module: key=value,
// +key=value (add) and ++key=value (add or override) set a key, ~key
// removes it; a flag (--config-name …, --config-path=…) is kept under
// "launch." with its value.
func verlTree(words []string) map[string]any {
	tree := map[string]any{}
	start := 0
	for i, w := range words {
		if w == "verl.trainer.main_ppo" || strings.HasSuffix(w, "main_ppo.py") {
			start = i + 1
		}
	}
	rest := words[start:]
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		switch {
		case strings.HasPrefix(w, "~"):
			delete(tree, strings.TrimPrefix(w, "~"))
		case strings.HasPrefix(w, "-"):
			flag, val, ok := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if !ok && i+1 < len(rest) && !strings.HasPrefix(rest[i+1], "-") && !strings.Contains(rest[i+1], "=") {
				val, ok = rest[i+1], true
				i++
			}
			tree["launch."+flag] = map[bool]any{true: strings.Trim(val, `'"`), false: true}[ok]
		default:
			k, v, ok := strings.Cut(strings.TrimLeft(w, "+"), "=")
			if ok && k != "" {
				tree[k] = yaml.Scalar(strings.Trim(v, `'"`))
			}
		}
	}
	return tree
}

// verlPrimaryConfig puts the YAML a command names (Hydra's --config-path
// and --config-name) beneath its overrides: a here-document of the script,
// else the file beside the script, in its config folder, or at the path as
// written relative to the script's folder. Not found, it is said.
func verlPrimaryConfig(tree map[string]any, opt *Options) (map[string]any, error) {
	name, _ := tree["launch.config-name"].(string)
	if name == "" {
		return unflatten(tree), nil
	}
	file := strings.TrimSuffix(name, ".yaml") + ".yaml"
	dir, _ := tree["launch.config-path"].(string)
	for _, prefix := range []string{"$(pwd)/", "${PWD}/", "$PWD/"} {
		dir = strings.TrimPrefix(dir, prefix)
	}
	var data []byte
	var looked []string
	if b, ok := opt.files[file]; ok {
		data = b
	}
	outside := ""
	for _, p := range []string{filepath.Join(dir, file), file, filepath.Join("config", file)} {
		if data != nil || opt.Dir == "" {
			break
		}
		if filepath.IsAbs(p) {
			looked = append(looked, p)
		} else {
			looked = append(looked, filepath.Join(opt.Dir, p))
		}
		b, err := opt.readFile(p)
		switch {
		case err == nil:
			data = b
		case strings.Contains(err.Error(), "outside the config's folder"):
			outside = "; a folder outside the script's is read only when told to read anywhere (the CLI's -read-anywhere)"
		}
	}
	if data == nil {
		tree["launch.unread"] = fmt.Sprintf("--config-name %s: the YAML it names was not found (looked in %s%s): give it as the file, with the script's key=value overrides after it", name, strings.Join(looked, ", "), outside)
		return unflatten(tree), nil
	}
	v, err := yaml.Parse(data)
	if err != nil {
		return nil, namedFileErr("--config-name", file, err)
	}
	base, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: a config is a mapping of keys, this one is %s", file, strictjson.Kind(v))
	}
	over := unflatten(tree)
	merge(base, over) // the command line's overrides win
	return base, nil
}

const (
	verlKeyActor   = "actor_rollout_ref.actor."
	verlKeyRollout = "actor_rollout_ref.rollout."
	verlKeyModel   = "actor_rollout_ref.model."
)

// importVerl maps verl's keys to a post-training plan.
func importVerl(r *configReader, opt Options) error {
	pt := vram.PostTraining{Framework: "verl", PromptLen: 512, CompletionLen: 512} // data.max_*_length (legacy_data.yaml l.35-39)
	if err := verlAlgorithm(r, &pt); err != nil {
		return err
	}
	for _, f := range []struct {
		dst    *int
		key    string
		lo, hi int
	}{{&pt.PromptLen, "data.max_prompt_length", 1, vram.MaxTokens}, {&pt.CompletionLen, "data.max_response_length", 1, vram.MaxTokens},
		{&pt.Generations, verlKeyRollout + "n", 1, 1 << 16}} {
		if err := r.intInto(f.dst, f.key, f.lo, f.hi); err != nil {
			return err
		}
	}
	if err := verlPolicy(r, &pt, opt); err != nil {
		return err
	}
	if err := verlLogProbs(r, &pt); err != nil {
		return err
	}
	if pt.Algorithm == "ppo" {
		c, err := verlCriticOf(r)
		if err != nil {
			return err
		}
		pt.Critic = c
	}
	ro, err := verlEngine(r)
	if err != nil {
		return err
	}
	pt.Rollout = &ro
	modelID, _, err := r.str(verlKeyModel + "path")
	if err != nil {
		return err
	}
	m, ref, _, err := importModel(modelID, opt)
	if err != nil {
		return err
	}
	pt.Policy.Model = m
	if to := orDefault(ref, m.Name); to != modelID {
		r.mapped("model %s → %s", orDefault(modelID, "(from -model)"), to)
	}
	r.dropVerlDefaults()
	if err := verlNotModelled(r); err != nil {
		return err
	}
	r.finish(verlIrrelevant)
	if err := pt.Validate(); err != nil {
		return err
	}
	r.imp.Assumed = append(r.imp.Assumed, "every sequence at its full length (prompt + response): use_remove_padding packs only the real tokens, so this is the longest a micro-batch gets (a plan's post_training.packed_len gives your data's mean length)")
	r.imp.Plan = vram.Plan{Model: m, ModelRef: orDefault(ref, modelID), PostTraining: &pt, GPU: opt.GPU}
	return nil
}

// verlAlgorithm reads the advantage estimator and the KL terms: GAE trains
// a critic (PPO); every other estimator is critic-free as GRPO is
// (trainer/ppo/utils.py need_critic l.86-97); a KL loss or a KL in the
// reward needs the reference (l.72-76).
func verlAlgorithm(r *configReader, pt *vram.PostTraining) error {
	est, _, err := r.str("algorithm.adv_estimator")
	if err != nil {
		return err
	}
	switch est {
	case "", "gae":
		pt.Algorithm = "ppo" // adv_estimator: gae (ppo_trainer.yaml l.81)
	case "grpo", "rloo":
		pt.Algorithm = est
	default:
		pt.Algorithm = "grpo"
		r.mapped("algorithm.adv_estimator %s → algorithm grpo (critic-free: the same phases)", est)
	}
	kl, _, err := r.bool(verlKeyActor + "use_kl_loss")
	if err != nil {
		return err
	}
	inReward, _, err := r.bool("algorithm.use_kl_in_reward")
	if err != nil {
		return err
	}
	if kl || inReward {
		pt.Reference = "model"
		r.mapped("use_kl_loss / use_kl_in_reward → reference model")
	}
	return nil
}

// verlPolicy reads the actor's training step: its micro-batch (by tokens
// under use_dynamic_bsz), checkpointing, LoRA, offload, strategy and the
// world size.
func verlPolicy(r *configReader, pt *vram.PostTraining, opt Options) error {
	t := &pt.Policy
	if err := r.intInto(&t.MicroBatch, verlKeyActor+"ppo_micro_batch_size_per_gpu", 1, vram.MaxTokens); err != nil {
		return err
	}
	if dyn, _, err := r.bool(verlKeyActor + "use_dynamic_bsz"); err != nil {
		return err
	} else if dyn {
		tokens := 16384 // ppo_max_token_len_per_gpu (actor.yaml l.33)
		if err := r.intInto(&tokens, verlKeyActor+"ppo_max_token_len_per_gpu", 1, vram.MaxTokens); err != nil {
			return err
		}
		t.MicroBatch = max(1, tokens/(pt.PromptLen+pt.CompletionLen))
		r.mapped("use_dynamic_bsz, ppo_max_token_len_per_gpu %d → micro_batch %d full-length sequences", tokens, t.MicroBatch)
	}
	if ckpt, ok, err := r.bool(verlKeyModel + "enable_gradient_checkpointing"); err != nil {
		return err
	} else if ok && !ckpt {
		t.Checkpointing = vram.CheckpointNone
	}
	if err := verlLoRA(r, t); err != nil {
		return err
	}
	for _, f := range []struct {
		dst *bool
		key string
	}{{&pt.ParamOffload, verlKeyActor + "fsdp_config.param_offload"}, {&pt.OptimizerOffload, verlKeyActor + "fsdp_config.optimizer_offload"}} {
		v, _, err := r.bool(f.key)
		if err != nil {
			return err
		}
		*f.dst = v
	}
	if s, _, err := r.str(verlKeyActor + "strategy"); err != nil {
		return err
	} else if s == "megatron" {
		return errors.New(verlKeyActor + "strategy megatron: verl's Megatron workers are not modelled; plan the FSDP strategy (fsdp or fsdp2)")
	} else if s == "fsdp2" {
		t.Parallel.FSDPVersion = 2
	}
	if d, _, err := r.str(verlKeyActor + "fsdp_config.model_dtype"); err != nil {
		return err
	} else if d == "bf16" || d == "bfloat16" {
		t.Precision = "bf16"
	}
	return verlWorld(r, t, opt)
}

func verlLoRA(r *configReader, t *vram.Training) error {
	rank, _, err := r.int(verlKeyModel+"lora_rank", 0, 1<<16)
	if err != nil || rank == 0 {
		return err
	}
	alpha := 16 // lora_alpha (hf_model.yaml)
	if err := r.intInto(&alpha, verlKeyModel+"lora_alpha", 0, 1<<20); err != nil {
		return err
	}
	targets := []string{"all_linear"} // target_modules: all-linear
	if names, ok, err := r.list(verlKeyModel + "target_modules"); err != nil {
		return err
	} else if ok {
		targets = loraTargets(names)
	}
	t.Trainable, t.LoRA = "lora", peftAdapters(rank, float64(alpha), 0, targets)
	return nil
}

// verlWorld is the world size: trainer.n_gpus_per_node × trainer.nnodes
// (8 × 1 by default, ppo_trainer.yaml), or -gpus.
func verlWorld(r *configReader, t *vram.Training, opt Options) error {
	per, nodes := 8, 1
	if err := r.intInto(&per, "trainer.n_gpus_per_node", 1, 1<<16); err != nil {
		return err
	}
	if err := r.intInto(&nodes, "trainer.nnodes", 1, 1<<16); err != nil {
		return err
	}
	t.Parallel.DP = per * nodes
	if opt.GPUs > 0 {
		t.Parallel.DP = opt.GPUs
	}
	r.mapped("trainer.n_gpus_per_node × trainer.nnodes → FSDP over %d GPUs", t.Parallel.DP)
	return nil
}

// verlLogProbs reads the no-grad passes' micro-batch: the larger of the
// old-policy and the reference passes'.
func verlLogProbs(r *configReader, pt *vram.PostTraining) error {
	for _, k := range []string{verlKeyRollout + "log_prob_micro_batch_size_per_gpu", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"} {
		n, _, err := r.int(k, 1, vram.MaxTokens)
		if err != nil {
			return err
		}
		pt.LogProbMicroBatch = max(pt.LogProbMicroBatch, n)
	}
	r.ignore("actor_rollout_ref.ref.fsdp_config.param_offload") // the reference is CPU-offloaded whatever it says (fsdp_workers.py l.524-526)
	return nil
}

// verlCriticOf reads PPO's critic: its micro-batches and offload; a
// critic of another model than the policy's is not modelled.
func verlCriticOf(r *configReader) (*vram.Critic, error) {
	c := &vram.Critic{}
	if err := r.intInto(&c.MicroBatch, "critic.ppo_micro_batch_size_per_gpu", 1, vram.MaxTokens); err != nil {
		return nil, err
	}
	if err := r.intInto(&c.ForwardMicroBatch, "critic.forward_micro_batch_size_per_gpu", 1, vram.MaxTokens); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		dst *bool
		key string
	}{{&c.ParamOffload, "critic.model.fsdp_config.param_offload"}, {&c.OptimizerOffload, "critic.model.fsdp_config.optimizer_offload"}} {
		v, _, err := r.bool(f.key)
		if err != nil {
			return nil, err
		}
		*f.dst = v
	}
	if c.MicroBatch == 0 {
		return nil, errors.New("critic.ppo_micro_batch_size_per_gpu: null by default, and verl requires it unless use_dynamic_bsz")
	}
	actor, _, _ := r.str(verlKeyModel + "path")
	if p, ok, err := r.str("critic.model.path"); err != nil {
		return nil, err
	} else if ok && p != actor {
		r.imp.NotModelled = append(r.imp.NotModelled, "critic.model.path = "+p+": the critic is planned as the policy's architecture")
	}
	switch s, _, err := r.str("critic.strategy"); {
	case err != nil:
		return nil, err
	case s == "megatron":
		return nil, errors.New("critic.strategy megatron: verl's Megatron workers are not modelled; plan the FSDP strategy (fsdp or fsdp2)")
	case s != "":
		if a, _, _ := r.str(verlKeyActor + "strategy"); s != orDefault(a, "fsdp") {
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("critic.strategy = %s: the critic is planned with the actor's strategy %s", s, orDefault(a, "fsdp")))
		}
	}
	r.notModelled("critic.model.enable_gradient_checkpointing", "the critic follows the policy's checkpointing")
	r.notModelledPast("critic.ulysses_sequence_parallel_size", 1, "Ulysses sequence parallelism is not modelled")
	r.ignorePrefix("critic.")
	return c, nil
}

// verlEngine reads the rollout engine's settings.
func verlEngine(r *configReader) (vram.Rollout, error) {
	var ro vram.Rollout
	name, ok, err := r.str(verlKeyRollout + "name")
	if err != nil {
		return ro, err
	}
	if !ok {
		return ro, errors.New(verlKeyRollout + "name is ??? in verl's config (it must be given): vllm or sglang")
	}
	if name != "vllm" && name != "sglang" {
		return ro, fmt.Errorf("%sname %s: the planner sizes vllm and sglang rollouts", verlKeyRollout, name)
	}
	ro.Engine = name
	if ro.GPUMemoryUtilization, err = r.fraction(verlKeyRollout+"gpu_memory_utilization", "leaves the rollout engine no memory (vLLM refuses it; SGLang stops with \"Not enough memory\")"); err != nil {
		return ro, err
	}
	for _, f := range []struct {
		dst *int
		key string
	}{{&ro.TP, verlKeyRollout + "tensor_model_parallel_size"}, {&ro.MaxNumSeqs, verlKeyRollout + "max_num_seqs"}, {&ro.MaxNumBatchedTokens, verlKeyRollout + "max_num_batched_tokens"}} {
		if err := r.intInto(f.dst, f.key, 1, vram.MaxTokens); err != nil {
			return ro, err
		}
	}
	if free, ok, err := r.bool(verlKeyRollout + "free_cache_engine"); err != nil {
		return ro, err
	} else if ok && !free {
		ro.Sleep = vram.SleepNone
	}
	return ro, nil
}

// verlNotModelled names the keys that change memory and the plan leaves
// out.
func verlNotModelled(r *configReader) error {
	if s, ok, _ := r.str("launch.unread"); ok {
		r.imp.NotModelled = append(r.imp.NotModelled, s)
	}
	r.notModelledPast(verlKeyActor+"ulysses_sequence_parallel_size", 1, "Ulysses sequence parallelism is not modelled")
	if err := verlHydraDefaults(r); err != nil {
		return err
	}
	if on, _, err := r.bool("reward_model.enable"); err != nil {
		return err
	} else if !on {
		r.ignorePrefix("reward_model.") // a model-based reward only when enabled (main_ppo.py)
	}
	for _, n := range []struct{ key, why string }{
		{verlKeyModel + "enable_activation_offload", "activation offload in verl's actor is not modelled"},
		{verlKeyActor + "entropy_from_logits_with_chunking", "the chunked entropy is not modelled"},
		{verlKeyActor + "entropy_checkpointing", "the entropy's checkpointing is not modelled"},
		{verlKeyRollout + "cudagraph_capture_sizes", "the CUDA-graph pool is not counted (give rollout.cuda_graph_memory in the plan)"},
		{verlKeyRollout + "layered_summon", "LoRA's layered summon of the base weights is not modelled"},
		{verlKeyRollout + "max_model_len", "vLLM's max_model_len is the prompt and the response"},
		{"reward_model", "a reward model is not modelled (a rule-based reward takes no GPU memory)"},
		{verlKeyRollout + "multi_stage_wake_up", "the engine's weights and KV cache are planned to wake together"},
		{verlKeyRollout + "multi_turn", "a multi-turn rollout is planned as one prompt and one response of the data's lengths"},
	} {
		r.notModelled(n.key, n.why)
	}
	if eager, ok, err := r.bool(verlKeyRollout + "enforce_eager"); err != nil {
		return err
	} else if ok && !eager {
		r.imp.NotModelled = append(r.imp.NotModelled, verlKeyRollout+"enforce_eager = false: the CUDA-graph pool is not counted (give rollout.cuda_graph_memory in the plan)")
	}
	return nil
}

// verlHydraDefaults reads a YAML's Hydra defaults list: on verl's
// ppo_trainer (the defaults the importer holds), or another base config,
// which is not modelled.
func verlHydraDefaults(r *configReader) error {
	r.ignorePrefix("hydra.") // Hydra's search path and run directories
	v, ok := r.get("defaults")
	if !ok {
		return nil
	}
	list, _ := v.([]any)
	for _, d := range list {
		switch d {
		case "ppo_trainer", "_self_":
		default:
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("defaults: %v: the importer holds ppo_trainer.yaml's defaults (an FSDP run)", d))
		}
	}
	r.mapped("defaults %v → verl's ppo_trainer defaults beneath this file", list)
	return nil
}

// verlIrrelevant are keys that do not change GPU memory: data files and
// filters, learning rates and schedules, loss coefficients, logging and
// checkpoint cadence, the engine's sampling.
func verlIrrelevant(k string) bool {
	for _, p := range []string{"data.", "trainer.", "algorithm.", "launch.", "custom_reward_function.", "global_profiler.", "ray_kwargs.",
		verlKeyActor + "optim.", verlKeyActor + "kl_loss", verlKeyActor + "entropy_coeff", verlKeyActor + "clip_ratio", verlKeyActor + "loss_agg_mode",
		verlKeyActor + "ppo_mini_batch_size", verlKeyActor + "ppo_epochs", verlKeyActor + "use_torch_compile", verlKeyActor + "grad_clip",
		verlKeyModel + "use_remove_padding", verlKeyModel + "trust_remote_code", verlKeyModel + "use_shm",
		verlKeyRollout + "temperature", verlKeyRollout + "top_p", verlKeyRollout + "top_k", verlKeyRollout + "load_format",
		verlKeyRollout + "enable_chunked_prefill", verlKeyRollout + "enable_prefix_caching", verlKeyRollout + "mode", verlKeyRollout + "val_kwargs",
		verlKeyRollout + "log_prob_max_token_len_per_gpu", "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", "actor_rollout_ref.hybrid_engine"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
