package importer

import (
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// TRL's post-training trainers from their command line (`trl grpo …`,
// `trl dpo …`, `trl rloo …`, TRL's scripts grpo.py / dpo.py / rloo.py, or
// TrainingArguments JSON with their keys): the TrainingArguments part is
// read as for any HF trainer (hfargs.go) and becomes the policy;
// GRPOConfig's, RLOOConfig's and DPOConfig's own keys (TRL 1.10.0) make
// the post-training plan around it.

// trlPostAlgorithm is the post-training trainer the config runs, or "".
func trlPostAlgorithm(r *configReader) string {
	prog, _ := r.flat["launch.program"].(string)
	for _, a := range []string{"grpo", "rloo", "dpo"} {
		if strings.Contains(prog, "trl "+a) || strings.HasSuffix(prog, a+".py") || strings.Contains(prog, "/"+a+".py") || strings.HasSuffix(prog, "trl.scripts."+a) {
			return a
		}
	}
	switch {
	case r.has("num_generations") || r.has("use_vllm"):
		return "grpo"
	case r.has("precompute_ref_log_probs"):
		return "dpo"
	}
	return ""
}

// trlPostKeys reads the trainer's own keys into a post-training plan
// around the policy t (whose sequence is then the prompt and completion),
// what they leave unset as TRL's release (empty: the current) defaults it.
func trlPostKeys(r *configReader, algo string, t *vram.Training, release string) (*vram.PostTraining, error) {
	pt := &vram.PostTraining{Algorithm: algo, Framework: "trl"}
	if algo == "dpo" {
		// DPO truncates prompt + completion to max_length (1024,
		// dpo_config.py l.188-201); the split does not change its memory.
		pt.PromptLen, pt.CompletionLen = t.SeqLen/2, t.SeqLen-t.SeqLen/2
		r.imp.Assumed = append(r.imp.Assumed, fmt.Sprintf("prompt and answer %d + %d of max_length %d (DPO's memory follows the total)", pt.PromptLen, pt.CompletionLen, t.SeqLen))
		if pre, _, err := r.bool("precompute_ref_log_probs"); err != nil {
			return nil, err
		} else if pre {
			pt.Reference = "precomputed"
			// The precompute pass's batch (dpo_trainer.py l.989): the
			// training batch unless precompute_ref_batch_size is given.
			if err := r.intInto(&pt.LogProbMicroBatch, "precompute_ref_batch_size", 1, vram.MaxTokens); err != nil {
				return nil, err
			}
		}
		r.ignore("beta")
		t.SeqLen = 0
		return pt, nil
	}
	rel, modelled, err := vram.TRLReleaseFor(release)
	if err != nil {
		return nil, err
	}
	trlRelease := modelled.Release
	if modelled.Asked != "" {
		trlRelease = modelled.Asked // the row's defaults hold for it (the answer's releases say which row)
	}
	// The release's GRPOConfig defaults (vram.TRLReleaseFor cites them).
	pt.PromptLen, pt.CompletionLen = 512, rel.CompletionLen
	if err := r.intInto(&pt.CompletionLen, "max_completion_length", 1, vram.MaxTokens); err != nil {
		return nil, err
	}
	switch n, ok, err := r.int("max_prompt_length", 1, vram.MaxTokens); {
	case err != nil:
		return nil, err
	case ok:
		pt.PromptLen = n
	case rel.PromptLen > 0:
		pt.PromptLen = rel.PromptLen
		r.mapped("TRL %s truncates prompts to max_prompt_length's default, %d tokens", trlRelease, rel.PromptLen)
	default:
		r.imp.Assumed = append(r.imp.Assumed, fmt.Sprintf("prompts of 512 tokens (GRPO in TRL %s does not truncate prompts: give the plan's prompt_len for your data)", trlRelease))
	}
	if !r.has("max_completion_length") {
		r.mapped("max_completion_length unset → %d, TRL %s's default", rel.CompletionLen, trlRelease)
	}
	if err := r.intInto(&pt.Generations, "num_generations", 1, 1<<16); err != nil {
		return nil, err
	}
	beta, ok, err := r.floatInOK("beta", 0, 1e6)
	if err != nil {
		return nil, err
	}
	if ok && beta > 0 {
		pt.Reference = "model" // the adapter under PEFT (posttraining.go resolve)
		if t.LoRA != nil {
			pt.Reference = "adapter"
		}
		r.mapped("beta %v → a reference for the KL term", beta)
	} else if ok {
		pt.Reference = "none"
	}
	ro, err := trlRolloutKeys(r)
	if err != nil {
		return nil, err
	}
	pt.Rollout = &ro
	t.SeqLen = 0
	return pt, nil
}

// trlRolloutKeys reads the generation backend: vLLM (use_vllm, colocate or
// server) or transformers' generate.
func trlRolloutKeys(r *configReader) (vram.Rollout, error) {
	ro := vram.Rollout{Engine: "generate"}
	use, _, err := r.bool("use_vllm")
	if err != nil || !use {
		return ro, err
	}
	ro.Engine = "vllm"
	mode, _, err := r.str("vllm_mode")
	if err != nil {
		return ro, err
	}
	switch mode {
	case "", "colocate":
	case "server":
		ro.Placement = "separate"
	default:
		return ro, fmt.Errorf("vllm_mode %q: want colocate or server (grpo_config.py l.584-585)", mode)
	}
	if ro.GPUMemoryUtilization, err = r.fraction("vllm_gpu_memory_utilization", "is refused by vLLM, which TRL passes it to (vLLM's CacheConfig takes a fraction greater than 0)"); err != nil {
		return ro, err
	}
	if err := r.intInto(&ro.TP, "vllm_tensor_parallel_size", 1, 1024); err != nil {
		return ro, err
	}
	if sleep, _, err := r.bool("vllm_enable_sleep_mode"); err != nil {
		return ro, err
	} else if sleep {
		ro.Sleep = vram.SleepLevel2
	}
	r.notModelled("steps_per_generation", "the generation batch is per_device_train_batch_size × gradient_accumulation_steps rows (its default)")
	r.notModelled("generation_batch_size", "the generation batch is per_device_train_batch_size × gradient_accumulation_steps rows (its default)")
	r.notModelled("vllm_max_model_length", "vLLM's max_model_len is the prompt and the completion")
	return ro, nil
}

// trlPostIrrelevant are the trainers' keys that do not change GPU memory:
// the loss's coefficients and clipping, sampling, rewards and logging.
var trlPostIrrelevant = prefixes("loss_type", "epsilon", "delta", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
	"reward_", "scale_rewards", "num_iterations", "importance_sampling", "mask_truncated", "log_completions", "num_completions_to_print",
	"wandb_log", "sync_ref_model", "ref_model_", "disable_dropout", "generation_kwargs", "cache_implementation", "vllm_server_",
	"vllm_importance_sampling", "top_entropy_quantile", "f_divergence", "label_smoothing", "rpo_alpha", "ld_alpha", "use_weighting",
	"truncation_mode", "vllm_model_impl", "vllm_guided_decoding", "shuffle_dataset")
