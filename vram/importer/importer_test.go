package importer

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio/budget"
	"github.com/vramlab/vramlab/vram/internal/hostile"
)

// importCase is a published config and what its import must say.
type importCase struct {
	file string
	opt  Options
	kind Kind
	// want are plan fields as importFields names them.
	want map[string]string
	// notModelled and mapped are substrings those lists must hold.
	notModelled, mapped []string
}

var importCases = []importCase{
	{file: "hf_trainer/trl__clis_grpo.sh", kind: KindHFArgs,
		want: map[string]string{"pt.algorithm": "grpo", "pt.framework": "trl", "pt.completion": "512", "pt.micro": "8", "pt.engine": "generate"}},
	// The same launch under older TRL releases: 0.25's GRPOConfig defaults
	// to 256-token completions and truncates prompts to 512; 1.9 keeps 256
	// and truncates nothing (vram.TRLReleaseFor).
	{file: "hf_trainer/trl__clis_grpo.sh", kind: KindHFArgs, opt: Options{Versions: vram.Versions{TRL: "0.25.0"}},
		want:   map[string]string{"pt.algorithm": "grpo", "pt.completion": "256", "pt.prompt": "512"},
		mapped: []string{"max_completion_length unset → 256, TRL 0.25.0's default", "TRL 0.25.0 truncates prompts to max_prompt_length's default, 512 tokens"}},
	{file: "hf_trainer/trl__clis_grpo.sh", kind: KindHFArgs, opt: Options{Versions: vram.Versions{TRL: "1.9.0"}},
		want:   map[string]string{"pt.completion": "256"},
		mapped: []string{"max_completion_length unset → 256, TRL 1.9.0's default"}},
	{file: "hf_trainer/trl__clis_dpo.sh", kind: KindHFArgs,
		want: map[string]string{"pt.algorithm": "dpo", "pt.prompt": "512", "pt.completion": "512", "pt.micro": "8"}},
	{file: "verl/grpo_trainer__run_qwen2-7b.sh", kind: KindVerl, opt: Options{Model: "qwen2.5-7b"},
		want: map[string]string{"pt.algorithm": "grpo", "pt.framework": "verl", "pt.prompt": "512", "pt.completion": "1024", "pt.generations": "5",
			"pt.reference": "model", "pt.micro": "40", "pt.log_prob_micro": "40", "pt.dp": "8", "pt.engine": "vllm", "pt.util": "0.6", "pt.tp": "2",
			"pt.param_offload": "false"},
		mapped: []string{"FSDP over 8 GPUs"}},
	{file: "verl/tuning__qwen2-7b_grpo_2_h800_fsdp_vllm.sh", kind: KindVerl, opt: Options{Model: "qwen2.5-7b"},
		want: map[string]string{"pt.prompt": "1024", "pt.completion": "1024", "pt.micro": "16", "pt.dp": "2", "pt.param_offload": "true", "pt.optimizer_offload": "true"}},
	// verl's YAML configs with the overrides their launch scripts pass
	// (examples/split_placement/run_deepseek7b_llm.sh and
	// examples/sglang_multiturn/run_qwen2.5-3b_gsm8k_multiturn.sh @ b178a3cd).
	{file: "verl/split_placement__ppo_trainer_split.yaml", kind: KindVerl, opt: Options{Model: "llama-2-7b", Overrides: []string{
		"algorithm.adv_estimator=gae", "data.train_batch_size=1024", "data.max_prompt_length=512", "data.max_response_length=512",
		"data.filter_overlong_prompts=True", "data.truncation='error'", "actor_rollout_ref.model.path=deepseek-ai/deepseek-llm-7b-chat",
		"actor_rollout_ref.actor.optim.lr=1e-6", "actor_rollout_ref.actor.ppo_mini_batch_size=256", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
		"actor_rollout_ref.actor.fsdp_config.param_offload=False", "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
		"actor_rollout_ref.actor.use_kl_loss=False", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
		"actor_rollout_ref.rollout.tensor_model_parallel_size=4", "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
		"critic.optim.lr=1e-5", "critic.model.path=deepseek-ai/deepseek-llm-7b-chat", "critic.model.enable_gradient_checkpointing=False",
		"critic.ppo_micro_batch_size_per_gpu=8", "critic.model.fsdp_config.param_offload=False", "critic.model.fsdp_config.optimizer_offload=False",
		"algorithm.use_kl_in_reward=False", "trainer.critic_warmup=0", "trainer.project_name='verl_example_gsm8k'",
		"trainer.experiment_name='deepseek_llm_7b_function_rm'", "trainer.n_gpus_per_node=8", "trainer.nnodes=1", "trainer.save_freq=-1", "trainer.total_epochs=15"}},
		want: map[string]string{"pt.algorithm": "ppo", "pt.framework": "verl", "pt.prompt": "512", "pt.completion": "512", "pt.micro": "8",
			"pt.log_prob_micro": "8", "pt.dp": "8", "pt.engine": "vllm", "pt.util": "0.4", "pt.tp": "4", "pt.reference": ""},
		mapped: []string{"keys at verl's own defaults", "keys that follow others", "defaults [ppo_trainer _self_]"}},
	{file: "verl/sglang_multiturn__gsm8k_multiturn_grpo.yaml", kind: KindVerl, opt: Options{Model: "qwen2.5-1.5b", Overrides: []string{
		"algorithm.adv_estimator=grpo", "data.train_batch_size=256", "data.max_prompt_length=1024", "data.max_response_length=1024",
		"data.filter_overlong_prompts=True", "data.truncation='error'", "data.return_raw_chat=True", "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
		"actor_rollout_ref.actor.optim.lr=1e-6", "actor_rollout_ref.model.use_remove_padding=True", "actor_rollout_ref.actor.ppo_mini_batch_size=256",
		"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32", "actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.actor.kl_loss_coef=0.001",
		"actor_rollout_ref.actor.kl_loss_type=low_var_kl", "actor_rollout_ref.actor.entropy_coeff=0", "actor_rollout_ref.model.enable_gradient_checkpointing=True",
		"actor_rollout_ref.actor.fsdp_config.param_offload=False", "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
		"global_profiler.tool=torch_memory", "global_profiler.save_path=./mem_snapshots", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32",
		"actor_rollout_ref.rollout.tensor_model_parallel_size=1", "actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.rollout.gpu_memory_utilization=0.85",
		"actor_rollout_ref.rollout.multi_stage_wake_up=True", "actor_rollout_ref.rollout.n=16", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32",
		"actor_rollout_ref.ref.fsdp_config.param_offload=True", "actor_rollout_ref.rollout.over_sample_rate=0.1", "actor_rollout_ref.rollout.mode=async",
		"algorithm.use_kl_in_reward=False", "trainer.critic_warmup=0", "trainer.n_gpus_per_node=8", "trainer.nnodes=1", "trainer.save_freq=-1",
		"trainer.test_freq=20", "trainer.val_before_train=True", "trainer.total_epochs=15"}},
		want: map[string]string{"pt.algorithm": "grpo", "pt.prompt": "1024", "pt.completion": "1024", "pt.generations": "16", "pt.micro": "32",
			"pt.engine": "sglang", "pt.util": "0.85", "pt.tp": "1", "pt.reference": "model"},
		notModelled: []string{"multi_stage_wake_up = true: the engine's weights and KV cache are planned to wake together", "multi_turn.enable = true"}},
	{file: "axolotl/llama-3__qlora.yml", kind: KindAxolotl,
		want: map[string]string{"model": "meta-llama/Meta-Llama-3-8B", "micro": "2", "seq": "4096", "trainable": "lora", "lora.rank": "32",
			"base": "nf4", "ckpt": "full", "precision": "bf16", "optimizer": "paged_adamw"}},
	{file: "axolotl/qwen3__qlora-fsdp.yaml", kind: KindAxolotl, opt: Options{GPUs: 2},
		want: map[string]string{"trainable": "lora", "base": "nf4", "fsdp": "full_shard", "fsdp_version": "1", "dp": "2", "offload": "optimizer+params"}},
	{file: "axolotl/llama-3__fft-8b.yaml", kind: KindAxolotl,
		want: map[string]string{"trainable": "full", "seq": "8192", "micro": "1", "optimizer": "paged_adamw_8bit", "ckpt": "full"}},
	{file: "llamafactory/train_lora__qwen3_lora_sft.yaml", kind: KindLLaMAFactory,
		want: map[string]string{"model": "Qwen/Qwen3-4B", "micro": "1", "seq": "2048", "trainable": "lora", "lora.rank": "8", "lora.targets": "all_linear", "ckpt": "full"}},
	{file: "llamafactory/train_qlora__llama3_lora_sft_gptq.yaml", kind: KindLLaMAFactory,
		want: map[string]string{"trainable": "lora", "base": "int4"}},
	{file: "llamafactory/v1__train_lora__train_lora_sft.yaml", kind: KindLLaMAFactory,
		want: map[string]string{"trainable": "lora"}},
	{file: "llamafactory/train_lora__qwen3_lora_sft_ds3.yaml", kind: KindLLaMAFactory, opt: Options{GPUs: 4},
		want: map[string]string{"zero": "3", "dp": "4", "trainable": "lora"}},
	{file: "torchtune/llama3_1__8B_lora_single_device.yaml", kind: KindTorchtune, opt: Options{Overrides: []string{"tokenizer.max_seq_len=2048"}},
		want: map[string]string{"model": "meta-llama/Llama-3.1-8B", "seq": "2048", "trainable": "lora", "lora.rank": "8", "framework": "torchtune"}},
	{file: "torchtune/llama3_1__8B_qlora_single_device.yaml", kind: KindTorchtune, opt: Options{Overrides: []string{"tokenizer.max_seq_len=4096", "batch_size=4"}},
		want: map[string]string{"seq": "4096", "micro": "4", "base": "nf4"}},
	{file: "torchtune/llama3_1__8B_lora_single_device.yaml", kind: KindTorchtune,
		opt:  Options{Overrides: []string{"tokenizer.max_seq_len=2048", "enable_activation_checkpointing=True", "enable_activation_offloading=True"}},
		want: map[string]string{"ckpt": "full", "act_offload": "true"}},
	{file: "torchtune/qwen2_5__7B_lora_single_device.yaml", kind: KindTorchtune, opt: Options{Overrides: []string{"tokenizer.max_seq_len=1024"}},
		want: map[string]string{"model": "Qwen/Qwen2.5-7B", "trainable": "lora"}},
	{file: "torchtitan/llama3_8b.toml", kind: KindTorchtitan,
		want: map[string]string{"model": "meta-llama/Llama-3.1-8B", "micro": "1", "seq": "8192", "ckpt": "selective", "sac": "op", "dp": "8", "fsdp": "full_shard", "fsdp_version": "2", "precision": "fp32", "compute": "bf16"}},
	{file: "torchtitan/qwen3_32b.toml", kind: KindTorchtitan, opt: Options{GPUs: 16},
		want: map[string]string{"model": "Qwen/Qwen3-32B", "ckpt": "full", "dp": "16"}},
	{file: "torchtitan/llama3_405b.toml", kind: KindTorchtitan, opt: Options{GPUs: 64},
		want: map[string]string{"tp": "8", "dp": "8", "float8": "tensorwise", "float8_all_gather": "true"}},
	{file: "torchtitan/llama3/config_registry.py", kind: KindTorchtitanPy, opt: Options{Entry: "llama3_8b", GPUs: 8},
		want: map[string]string{"model": "meta-llama/Llama-3.1-8B", "micro": "1", "seq": "8192", "ckpt": "selective", "sac": "op", "dp": "8", "fsdp": "full_shard",
			"fsdp_version": "2", "precision": "fp32", "compute": "bf16", "loss": "chunked_head", "loss_chunks": "8", "keep_grads": "true", "optimizer": "adamw"},
		notModelled: []string{"attn_backend = flex", "CUDA graph's private memory pool"}},
	{file: "torchtitan/llama3/config_registry.py", kind: KindTorchtitanPy, opt: Options{Entry: "llama3_70b", GPUs: 8},
		want:   map[string]string{"model": "meta-llama/Llama-3.1-70B", "micro": "8", "seq": "8192", "ckpt": "full", "tp": "8", "dp": "1", "fsdp": "full_shard"},
		mapped: []string{"FSDP2 at shard degree 1"}},
	{file: "torchtitan/llama3/config_registry.py", kind: KindTorchtitanPy, opt: Options{Entry: "llama3_405b", GPUs: 64},
		want: map[string]string{"model": "meta-llama/Llama-3.1-405B", "micro": "2", "tp": "8", "dp": "8", "float8": "rowwise", "async_tp": "true", "ckpt": "full"}},
	{file: "torchtitan/llama3/config_registry.py", kind: KindTorchtitanPy, opt: Options{Entry: "llama3_debugmodel_float8_emulate_lora", Model: "llama-3.2-1b", GPUs: 2},
		want: map[string]string{"trainable": "lora", "lora.rank": "8", "lora.targets": "q_proj,k_proj,v_proj,o_proj", "float8": "rowwise", "micro": "8", "seq": "2048"}},
	{file: "torchtitan/qwen3/config_registry.py", kind: KindTorchtitanPy, opt: Options{Entry: "qwen3_32b", GPUs: 16},
		want: map[string]string{"model": "Qwen/Qwen3-32B", "ckpt": "full", "dp": "16"}},
	{file: "torchtitan/deepseek_v3/config_registry.py", kind: KindTorchtitanPy, opt: Options{Entry: "deepseek_v3_671b_float8", GPUs: 64},
		want:        map[string]string{"model": "deepseek-ai/DeepSeek-V3", "micro": "4", "seq": "4096", "ep": "2", "dp": "64", "float8": "rowwise", "keep_grads": ""},
		notModelled: []string{"Float8GroupedExpertsConverter"}},
	{file: "torchtitan/gpt_oss/config_registry.py", kind: KindTorchtitanPy, opt: Options{Entry: "gpt_oss_20b", GPUs: 8},
		want: map[string]string{"model": "openai/gpt-oss-20b", "ckpt": "full", "seq": "8192"}, notModelled: []string{"attn_backend = varlen"}},
	{file: "hf_trainer/peft_integration_qlora.sh", kind: KindHFArgs,
		want: map[string]string{"model": "meta-llama/Llama-2-7b-hf", "micro": "1", "seq": "1024", "trainable": "lora", "lora.rank": "32", "base": "nf4", "grad_accum": "16"}},
	{file: "hf_trainer/sft_py_full_training.sh", kind: KindHFArgs,
		want: map[string]string{"model": "Qwen/Qwen2-0.5B", "micro": "2", "trainable": "full", "precision": "amp_bf16"}},
	{file: "hf_trainer/clis_trl_sft_basic.sh", kind: KindHFArgs,
		want: map[string]string{"micro": "8", "seq": "1024", "ckpt": "full"}},
	{file: "hf_trainer/distributing_training_alst_ulysses.sh", kind: KindHFArgs,
		want:        map[string]string{"seq": "4096", "precision": "bf16", "attention": "flash2"},
		notModelled: []string{"launch.config_file"}},
	{file: "megatron/gpt3__train_gpt3_175b_distributed.sh", kind: KindMegatron, opt: Options{GPUs: 1024},
		// 96 × (12h² + 13h) + 51,200 × h word and 2,048 × h position rows + the final norm's 2h.
		want: map[string]string{"tp": "8", "pp": "16", "dp": "8", "precision": "fp16", "params": "174615846912", "framework": "megatron", "vocab": "51200"}},
	{file: "megatron/llama__train_llama3_8b_h100_fp8.sh", kind: KindMegatron,
		want:        map[string]string{"dp": "8", "zero": "1", "seq": "8192", "precision": "bf16", "grads": "bf16", "params": "8030261248", "kv_heads": "8"},
		notModelled: []string{"fp8_format"}},
	{file: "deepspeed/axolotl__zero3_bf16.json", kind: KindDeepSpeed, opt: Options{Model: "llama-3.1-8b", GPUs: 8},
		want: map[string]string{"zero": "3", "precision": "mixed_bf16", "dp": "8", "ds.max_live": "0"}},
	{file: "deepspeed/transformers__ds_config_zero3.json", kind: KindDeepSpeed, opt: Options{Model: "llama-3.1-8b", GPUs: 2},
		want: map[string]string{"zero": "3", "offload": "optimizer+params"}},
	{file: "deepspeed/llamafactory__ds_z0_config.json", kind: KindDeepSpeed, opt: Options{Model: "llama-3.1-8b", GPUs: 2},
		want: map[string]string{"zero": "0"}},
	{file: "accelerate/accelerate__fsdp.yaml", kind: KindAccelerate, opt: Options{Model: "llama-3.2-1b", Overrides: []string{"per_device_train_batch_size=2", "max_length=2048"}},
		want: map[string]string{"dp": "2", "fsdp": "full_shard", "fsdp_version": "1", "precision": "amp_bf16", "micro": "2", "seq": "2048"}},
	{file: "accelerate/trl__fsdp2.yaml", kind: KindAccelerate, opt: Options{Model: "llama-3.2-1b"},
		want: map[string]string{"dp": "8", "fsdp_version": "2", "reshard": "true"}},
	{file: "accelerate/trl__single_gpu.yaml", kind: KindAccelerate, opt: Options{Model: "llama-3.2-1b"},
		want: map[string]string{"dp": "1", "fsdp": ""}},
	{file: "accelerate/accelerate__deepspeed.yaml", kind: KindAccelerate, opt: Options{Model: "llama-3.2-1b"},
		want: map[string]string{"dp": "2"}, notModelled: []string{"zero_stage1_config.json"}},
	{file: "vllm/vllm-recipes__qwen3-32b_tpu_v6e.sh", kind: KindVLLM,
		want: map[string]string{"model": "Qwen/Qwen3-32B", "vllm.tp": "4", "vllm.util": "0.98", "vllm.max_model_len": "4096", "vllm.max_num_seqs": "256", "vllm.batched": "2048"}},
	{file: "vllm/vllm-recipes__Llama-3.1-8B-Instruct.yaml", kind: KindVLLM, opt: Options{Overrides: []string{"variant=awq_int4"}},
		want: map[string]string{"weights": "int4"}},
	{file: "vllm/vllm__quickstart_qwen2.5-1.5b.sh", kind: KindVLLM,
		want: map[string]string{"model": "Qwen/Qwen2.5-1.5B", "vllm.tp": "1"}},
	{file: "vllm/vllm-recipes__llama3.1-8b_eagle3.sh", kind: KindVLLM, notModelled: []string{"speculative-config"}},
	{file: "sglang/sglang__server_arguments_tp2.sh", kind: KindSGLang,
		want: map[string]string{"model": "meta-llama/Meta-Llama-3-8B", "sglang.tp": "2"}},
	{file: "sglang/sglang__server_arguments_config_file.sh", kind: KindSGLang,
		want: map[string]string{"model": "meta-llama/Meta-Llama-3-8B", "sglang.tp": "2"}},
	{file: "sglang/sglang__server_arguments_mem_fraction.sh", kind: KindSGLang,
		want: map[string]string{"sglang.mem": "0.7"}},
	{file: "llama.cpp/llamacpp__readme_parallel.sh", kind: KindLlamaCpp, opt: Options{Model: "llama-3.1-8b"},
		mapped: []string{"4096 cells per stream × 4 streams"}},
	{file: "llama.cpp/llamacpp__server_readme_docker_cuda.sh", kind: KindLlamaCpp, opt: Options{Model: "llama-2-7b"},
		mapped: []string{"512 cells per stream × 1 streams"}},
}

// TestImportPublishedConfigs reads each project's own example configs
// (testdata/configs, with their sources) and checks the plan field by
// field; the whole of each import — mapped, not modelled, ignored,
// assumed, the plan and its estimate — is pinned in import.golden.
func TestImportPublishedConfigs(t *testing.T) {
	var golden strings.Builder
	for _, c := range importCases {
		imp, err := Read(filepath.Join("testdata", "configs", c.file), c.opt)
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if imp.Kind != c.kind {
			t.Errorf("%s: kind %s, want %s", c.file, imp.Kind, c.kind)
		}
		got := importFields(imp.Plan)
		for k, want := range c.want {
			if got[k] != want {
				t.Errorf("%s: %s = %q, want %q", c.file, k, got[k], want)
			}
		}
		for _, sub := range c.notModelled {
			if !strings.Contains(strings.Join(imp.NotModelled, "\n"), sub) {
				t.Errorf("%s: not modelled %q missing from %q", c.file, sub, imp.NotModelled)
			}
		}
		for _, sub := range c.mapped {
			if !strings.Contains(strings.Join(imp.Mapped, "\n"), sub) {
				t.Errorf("%s: mapped %q missing from %q", c.file, sub, imp.Mapped)
			}
		}
		golden.WriteString(renderImport(c, imp))
	}
	checkGolden(t, filepath.Join("testdata", "configs", "import.golden"), golden.String())
}

// importFields names a plan's settings the import cases check.
var updateGolden = flag.Bool("update", false, "rewrite testdata/configs/import.golden")

func importFields(p vram.Plan) map[string]string {
	f := map[string]string{"model": p.Model.Name, "params": fmt.Sprint(p.Model.ParamCount()), "vocab": fmt.Sprint(p.Model.Vocab),
		"kv_heads": fmt.Sprint(p.Model.KVHeads)}
	if t := p.Training; t != nil {
		f["micro"], f["seq"], f["grad_accum"] = fmt.Sprint(t.MicroBatch), fmt.Sprint(t.SeqLen), fmt.Sprint(max(1, t.GradAccum))
		f["precision"], f["compute"], f["grads"] = t.Precision, dtypeOrEmpty(t.ComputeDType), dtypeOrEmpty(t.GradsDType)
		f["ckpt"], f["sac"], f["trainable"], f["optimizer"] = string(t.Checkpointing), t.SelectiveACOption, orDefault(t.Trainable, "full"), t.Optimizer
		f["framework"], f["attention"], f["base"] = string(t.Framework), t.Attention, dtypeOrEmpty(t.QuantizedBase.DType)
		f["float8"], f["float8_all_gather"] = t.Float8, fmt.Sprint(t.Float8AllGather)
		if t.ActivationOffloading {
			f["act_offload"] = "true"
		}
		if t.Loss != "" {
			f["loss"] = t.Loss
		}
		if t.LossChunks != 0 {
			f["loss_chunks"] = fmt.Sprint(t.LossChunks)
		}
		if t.KeepGrads {
			f["keep_grads"] = "true"
		}
		if t.LoRA != nil {
			f["lora.rank"], f["lora.targets"] = fmt.Sprint(t.LoRA.Rank), strings.Join(t.LoRA.Targets, ",")
		}
		p := t.Parallel
		f["dp"], f["tp"], f["pp"], f["zero"] = fmt.Sprint(max(1, p.DP)), fmt.Sprint(max(1, p.TP)), fmt.Sprint(max(1, p.PP)), fmt.Sprint(p.ZeRO)
		f["fsdp"], f["fsdp_version"], f["offload"] = p.FSDP, fmt.Sprint(p.FSDPVersion), p.CPUOffload
		if p.EP > 1 {
			f["ep"] = fmt.Sprint(p.EP)
		}
		if p.AsyncTP {
			f["async_tp"] = "true"
		}
		if p.ReshardAfterForward != nil {
			f["reshard"] = fmt.Sprint(*p.ReshardAfterForward)
		}
		if p.DeepSpeed != nil {
			f["ds.max_live"] = fmt.Sprint(max(0, int64(p.DeepSpeed.MaxLiveParameters)))
		}
	}
	if in := p.Inference; in != nil {
		f["weights"] = dtypeOrEmpty(in.Weights.DType)
	}
	if pt := p.PostTraining; pt != nil {
		f["pt.algorithm"], f["pt.framework"], f["pt.prompt"], f["pt.completion"] = pt.Algorithm, pt.Framework, fmt.Sprint(pt.PromptLen), fmt.Sprint(pt.CompletionLen)
		f["pt.generations"], f["pt.reference"], f["pt.micro"], f["pt.log_prob_micro"] = fmt.Sprint(pt.Generations), pt.Reference, fmt.Sprint(pt.Policy.MicroBatch), fmt.Sprint(pt.LogProbMicroBatch)
		f["pt.dp"], f["pt.param_offload"], f["pt.optimizer_offload"] = fmt.Sprint(pt.Policy.Parallel.DP), fmt.Sprint(pt.ParamOffload), fmt.Sprint(pt.OptimizerOffload)
		if r := pt.Rollout; r != nil {
			f["pt.engine"], f["pt.util"], f["pt.tp"] = r.Engine, fmt.Sprint(r.GPUMemoryUtilization), fmt.Sprint(r.TP)
		}
	}
	if v := p.VLLM; v != nil {
		f["vllm.tp"], f["vllm.util"], f["vllm.max_model_len"] = fmt.Sprint(max(1, v.TP)), fmt.Sprint(v.GPUMemoryUtilization), fmt.Sprint(v.MaxModelLen)
		f["vllm.max_num_seqs"], f["vllm.batched"] = fmt.Sprint(v.MaxNumSeqs), fmt.Sprint(v.MaxNumBatchedTokens)
	}
	if s := p.SGLang; s != nil {
		f["sglang.tp"], f["sglang.mem"] = fmt.Sprint(max(1, s.TP)), fmt.Sprint(s.MemFractionStatic)
	}
	return f
}

func dtypeOrEmpty(d vram.DType) string {
	if d == vram.DTypeUnset {
		return ""
	}
	return d.String()
}

// renderImport writes one import for the golden file.
func renderImport(c importCase, imp Imported) string {
	var b strings.Builder
	args := c.opt.Overrides
	if c.opt.Entry != "" {
		args = append([]string{"-config " + c.opt.Entry}, args...)
	}
	fmt.Fprintf(&b, "== %s %s\n", c.file, strings.Join(args, " "))
	for _, l := range []struct {
		label string
		lines []string
	}{{"mapped", imp.Mapped}, {"not modelled", imp.NotModelled}, {"assumed", imp.Assumed}, {"ignored", imp.Ignored}} {
		for _, x := range l.lines {
			fmt.Fprintf(&b, "%s: %s\n", l.label, x)
		}
	}
	plan, _ := json.Marshal(imp.Plan)
	fmt.Fprintf(&b, "plan: %s\n", plan)
	keys := slices.Sorted(maps.Keys(importFields(imp.Plan)))
	fields := importFields(imp.Plan)
	for _, k := range keys {
		if fields[k] != "" {
			fmt.Fprintf(&b, "  %s=%s", k, fields[k])
		}
	}
	b.WriteString("\n")
	if pt := imp.Plan.PostTraining; pt != nil {
		g, _ := vram.LookupGPU("H100-80GB")
		if e, err := pt.Estimate(g); err != nil {
			fmt.Fprintf(&b, "estimate: %v\n", err)
		} else {
			fmt.Fprintf(&b, "estimate on H100-80GB: bounded by %s, %d on the device\n", e.Bound, int64(e.Peak().DeviceUsed))
		}
	}
	if t := imp.Plan.Training; t != nil {
		if est, err := t.Estimate(); err != nil {
			fmt.Fprintf(&b, "estimate: %v\n", err)
		} else {
			fmt.Fprintf(&b, "estimate: peak %d at %s\n", int64(est.Peak.Total()), est.PeakAt.Name)
		}
	}
	return b.String()
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
		for i := 0; i < max(len(wl), len(gl)); i++ {
			var w, g string
			if i < len(wl) {
				w = wl[i]
			}
			if i < len(gl) {
				g = gl[i]
			}
			if w != g {
				t.Fatalf("%s differs at line %d:\n got  %s\n want %s\n(rerun with -update if the change is meant)", path, i+1, g, w)
			}
		}
	}
}

// TestImportErrors: bad configs are one clear error naming the field.
func TestImportErrors(t *testing.T) {
	for _, c := range []struct {
		name, data string
		opt        Options
		want       string
	}{
		{"bad.toml", "[job]\n[training]\nlocal_batch_size = \"eight\"\n[model]\nname = \"llama3\"\nflavor = \"8B\"\n", Options{}, "training.local_batch_size: want a whole number"},
		{"odd.toml", "[job]\n[training]\n[model]\nname = \"llama3\"\nflavor = \"3B\"\n", Options{}, `flavor "3B" is not in the importer's table; give -model`},
		{"world.toml", "[job]\n[training]\n[model]\nflavor = \"8B\"\n[parallelism]\ntensor_parallel_degree = 3\n", Options{GPUs: 8}, "not a multiple of replicate 1 × TP 3"},
		{"ax.yml", "base_model: meta-llama/Llama-3.2-1B\nmicro_batch_size: -1\nsequence_len: 512\n", Options{}, "micro_batch_size = -1: want a whole number"},
		{"serve.sh", "vllm serve Qwen/Qwen3-8B --tensor-parallel-size two", Options{}, `--tensor-parallel-size "two": want a whole number`},
		{"serve.sh", "vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 1.5", Options{}, `--gpu-memory-utilization "1.5": want a number in [0, 1]`},
		{"quote.sh", "vllm serve 'Qwen/Qwen3-8B", Options{Kind: KindVLLM}, "unterminated ' quote"},
		{"serve.sh", "vllm serve ibm-ai-platform/Bamba-9B --mamba-cache-dtype float16", Options{}, `--mamba-cache-dtype "float16": vLLM takes auto or float32`},
		{"heredoc.sh", "cat > c.yaml << EOF\nmodel-path: x\n", Options{Kind: KindSGLang}, "has no closing EOF line"},
		{"random.yaml", "title: a recipe for soup\nsteps: [boil]\n", Options{}, "not a config the importer knows"},
		{"list.yaml", "- a\n- b\n", Options{}, "a config is a mapping of keys"},
		{"train.sh", "torchrun --nproc_per_node 2 train.py --model_name_or_path meta-llama/Llama-3.2-1B --per_device_train_batch_size 2", Options{}, "give max_length=N"},
		{"accel.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_processes: 2\n", Options{}, "give -model"},
		{"accel.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: TPU\n", Options{Model: "llama-3.2-1b"}, `distributed_type "TPU" is not modelled`},
		{"mg.sh", "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --tensor-model-parallel-size 3", Options{}, "not a multiple of TP 3"},
		{"mg.sh", "torchrun pretrain_gpt.py --hidden-size 64 --num-attention-heads 4 --seq-length 128", Options{}, "--num-layers: Megatron-LM needs it"},
		{"mg.sh", "torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128", Options{}, "--max-position-embeddings: Megatron-LM needs it"},
		{"gptq.yaml", "model_name_or_path: TechxGenus/Meta-Llama-3-8B-Instruct-GPTQ\nstage: sft\nfinetuning_type: full\ncutoff_len: 512\n", Options{}, "pre-quantized checkpoint"},
		{"r.yaml", "meta: {}\nmodel: {model_id: meta-llama/Llama-3.1-8B-Instruct}\nvariants: {default: {}}\n", Options{Overrides: []string{"variant=nvfp5"}}, `variant "nvfp5": the recipe has default`},
		{"unknown.json", `{"model_name_or_path": "org/unknown-model-9b", "per_device_train_batch_size": 1, "max_length": 128}`, Options{}, `the config's model "org/unknown-model-9b" is not in the catalog`},
		{"kind.yaml", "a: 1\n", Options{Kind: "megatron-deepspeed"}, `-from "megatron-deepspeed": want one of`},
	} {
		_, err := Import(c.name, []byte(c.data), c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: error %v, want it to say %q", c.name, c.data, err, c.want)
		}
	}
}

// TestScriptWords: the launch-script reader's shell words, variables,
// arrays, here-documents and docker wrappers.
func TestScriptWords(t *testing.T) {
	for _, c := range []struct{ script, want string }{
		{"export TP=4\nvllm serve m --tensor-parallel-size $TP", "vllm serve m --tensor-parallel-size 4"},
		{"N=${N:-8}\ntorchrun --nproc_per_node ${N} train.py", "torchrun --nproc_per_node 8 train.py"},
		{"A=(\n  --x 1 # one\n  --y 2\n)\nA+=(\"--z 3\")\ntorchrun t.py ${A[@]}", "torchrun t.py --x 1 --y 2 --z 3"},
		{"docker run --gpus all -p 8000:8000 -v ~/.cache:/root/.cache vllm/vllm-openai:latest --model m --max-model-len 4096", "vllm serve --model m --max-model-len 4096"},
		{"docker run -it --rm ghcr.io/ggml-org/llama.cpp:server -m x.gguf -c 512", "llama-server -m x.gguf -c 512"},
		{"mkdir -p out && vllm serve m 2>&1 | tee log.txt", "vllm serve m"},
		{"# comment\n\npython -m sglang.launch_server --model-path m \\\n  --tp 2", "python -m sglang.launch_server --model-path m --tp 2"},
		{"echo $UNSET; vllm serve m --seed $UNSET", "vllm serve m --seed $UNSET"},
	} {
		sc, err := parseScript(c.script)
		if err != nil {
			t.Errorf("%q: %v", c.script, err)
			continue
		}
		got, _, _ := sc.launchCommand()
		if strings.Join(got, " ") != c.want {
			t.Errorf("%q: %q, want %q", c.script, strings.Join(got, " "), c.want)
		}
	}
	sc, err := parseScript("cat > config.yaml << 'EOF'\nmodel-path: m\ntp: 2\nEOF\npython -m sglang.launch_server --config config.yaml\n")
	if err != nil || string(sc.files["config.yaml"]) != "model-path: m\ntp: 2\n" {
		t.Errorf("here-document: %q, %v", sc.files, err)
	}
	// An array doubled past the word limit is an error, not gigabytes.
	if _, err := parseScript("A=(x)\n" + strings.Repeat("A+=(${A[@]})\n", 40)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("doubling array: %v", err)
	}
}

// TestReadBeside: the files a config names are read beside it.
func TestReadBeside(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "fsdp.yaml"), []byte("distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "run.sh"), []byte("accelerate launch --config_file fsdp.yaml train.py --model_name_or_path meta-llama/Llama-3.2-1B --per_device_train_batch_size 2 --max_length 512 --bf16\n"), 0o644)
	imp, err := Read(filepath.Join(dir, "run.sh"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := imp.Plan.Training.Parallel
	if p.FSDP != "full_shard" || p.FSDPVersion != 2 || p.DP != 4 || imp.Plan.Training.Precision != "amp_bf16" {
		t.Errorf("accelerate config beside the command: %+v, precision %s; mapped %q", p, imp.Plan.Training.Precision, imp.Mapped)
	}
}

// FuzzImport: any bytes, as any kind, come back within the budget
// as a plan or an error.
func FuzzImport(f *testing.F) {
	for _, c := range importCases {
		data, err := os.ReadFile(filepath.Join("testdata", "configs", c.file))
		if err == nil {
			f.Add(filepath.Base(c.file), data, uint8(0))
		}
	}
	f.Add("x.sh", []byte("A=(\n$B\n)\ncat <<E >f\nE\nvllm serve ${A[@]} --config f"), uint8(8))
	f.Add("config_registry.py", []byte("from torchtitan.trainer import Trainer\n\ndef llama3_c() -> Trainer.Config:\n    c = Trainer.Config(model_spec=model_registry(\"8B\", "+
		"converters=[LoRAConverter.Config(rank=4)]), loss=ChunkedLossWrapper.Config(num_chunks=4), training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=8 * 2048),"+
		" parallelism=ParallelismConfig(tensor_parallel_degree=2), activation_checkpoint=FullAC.Config())\n    c.training.disable_cuda_graphs = True\n    return c\n"), uint8(0))
	kinds := []Kind{"", KindAxolotl, KindLLaMAFactory, KindTorchtune, KindTorchtitan, KindHFArgs, KindMegatron, KindDeepSpeed,
		KindAccelerate, KindVLLM, KindSGLang, KindLlamaCpp, KindVerl, KindTorchtitanPy}
	dir := f.TempDir()
	for i, s := range hostile.Seeds() { // the third audit's shapes (internal/hostile)
		f.Add([]string{"config_registry.py", "launch.sh", "config.yaml", "config.toml"}[i%4], s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, name string, data []byte, kind uint8) {
		opt := Options{Kind: kinds[int(kind)%len(kinds)], Dir: dir, Model: map[bool]string{true: "llama-3.2-1b"}[kind&16 != 0],
			Entry: map[bool]string{true: "llama3_8b"}[kind&32 != 0]}
		budget.Check(t, len(data), func() { _, _ = Import(name, data, opt) })
	})
}

// TestImportMegatronMoE: Mixtral 8x7B's shape as Megatron-LM arguments
// counts the released checkpoint's 46,702,792,704 parameters, with the
// experts over expert parallelism.
func TestImportMegatronMoE(t *testing.T) {
	cmd := "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 " +
		"--num-attention-heads 32 --group-query-attention --num-query-groups 8 --seq-length 4096 --position-embedding-type rope " +
		"--swiglu --normalization RMSNorm --untie-embeddings-and-output-weights --disable-bias-linear --tokenizer-type HuggingFaceTokenizer " +
		"--vocab-size 32000 --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8 --micro-batch-size 1 --bf16"
	imp, err := Import("mixtral.sh", []byte(cmd), Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, p := imp.Plan.Model, imp.Plan.Training.Parallel
	if n := m.ParamCount(); n != 46702792704 || m.Experts != 8 || m.ExpertsPerToken != 2 || p.EP != 8 || p.DP != 8 {
		t.Errorf("params %d, experts %d top %d, EP %d, DP %d", n, m.Experts, m.ExpertsPerToken, p.EP, p.DP)
	}
}

// TestImportTorchtitanCompile: [compile] components as torchtitan reads
// them (["model", "loss"] unless given).
func TestImportTorchtitanCompile(t *testing.T) {
	no, yes := false, true
	for _, c := range []struct {
		toml    string
		compile bool
		loss    *bool
		err     string
	}{
		{"[compile]\nenable = true\n", true, nil, ""},
		{"[compile]\nenable = true\ncomponents = [\"model\"]\n", true, &no, ""},
		{"[compile]\nenable = true\ncomponents = [\"loss\"]\n", false, &yes, ""},
		{"[compile]\nenable = false\ncomponents = [\"model\", \"loss\"]\n", false, nil, ""},
		{"[training]\ncompile = true\n", true, nil, ""},
		{"[compile]\nenable = true\ncomponents = [\"optimizer\"]\n", false, nil, `unknown component "optimizer"`},
	} {
		im, err := Import("job.toml", []byte("[model]\nname = \"llama3\"\nflavor = \"8B\"\n"+c.toml), Options{Kind: KindTorchtitan})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.toml, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.toml, err)
		}
		tr := im.Plan.Training
		if tr.Compile != c.compile || (tr.CompileLoss == nil) != (c.loss == nil) || c.loss != nil && *tr.CompileLoss != *c.loss {
			t.Errorf("%q: compile %v compile_loss %v, want %v %v", c.toml, tr.Compile, tr.CompileLoss, c.compile, c.loss)
		}
	}
}

// TestImportTorchtitanEarlyStop: [activation_checkpoint] early_stop, an
// option of torchtitan 0.2.x only, reaches the plan with that release, and
// the plan estimates; without it the release stays unnamed (the current).
func TestImportTorchtitanEarlyStop(t *testing.T) {
	for _, v := range []bool{true, false} {
		toml := fmt.Sprintf("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[activation_checkpoint]\nmode = \"full\"\nearly_stop = %v\n", v)
		im, err := Import("job.toml", []byte(toml), Options{Kind: KindTorchtitan})
		if err != nil {
			t.Fatal(err)
		}
		tr := im.Plan.Training
		if tr.CheckpointEarlyStop == nil || *tr.CheckpointEarlyStop != v || tr.Torchtitan != "0.2.2" {
			t.Errorf("early_stop = %v: checkpoint_early_stop %v, torchtitan %q", v, tr.CheckpointEarlyStop, tr.Torchtitan)
		}
		if _, err := tr.Estimate(); err != nil {
			t.Errorf("early_stop = %v: %v", v, err)
		}
	}
	im, err := Import("job.toml", []byte("[model]\nname = \"llama3\"\nflavor = \"8B\"\n"), Options{Kind: KindTorchtitan})
	if err != nil || im.Plan.Training.CheckpointEarlyStop != nil || im.Plan.Training.Torchtitan != "" {
		t.Errorf("no early_stop: %+v, %v", im.Plan.Training, err)
	}
	if _, err := Import("job.toml", []byte("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[activation_checkpoint]\nearly_stop = \"maybe\"\n"), Options{Kind: KindTorchtitan}); err == nil || !strings.Contains(err.Error(), "activation_checkpoint.early_stop") {
		t.Errorf("early_stop = \"maybe\": %v", err)
	}
}

// TestImportZeROInfinity: a DeepSpeed config's NVMe offload devices,
// sub_group_size and max_in_cpu reach the plan (nvme.go).
func TestImportZeROInfinity(t *testing.T) {
	cfg := `{"zero_optimization": {"stage": 3, "sub_group_size": 1e8,
		"offload_optimizer": {"device": "nvme", "nvme_path": "/local_nvme"},
		"offload_param": {"device": "nvme", "nvme_path": "/local_nvme", "max_in_cpu": 2e9}}}`
	im, err := Import("ds.json", []byte(cfg), Options{Kind: KindDeepSpeed, Model: "llama-3.1-8b", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	p := im.Plan.Training.Parallel
	if p.CPUOffload != "optimizer+params" || p.DeepSpeed == nil {
		t.Fatalf("offload %q, deepspeed %+v", p.CPUOffload, p.DeepSpeed)
	}
	if d := *p.DeepSpeed; d.OffloadOptimizerDevice != "nvme" || d.OffloadParamDevice != "nvme" || d.SubGroupSize != 1e8 || d.MaxInCPU != 2e9 {
		t.Errorf("deepspeed %+v", d)
	}
	for _, n := range im.NotModelled {
		if strings.Contains(n, "NVMe") {
			t.Errorf("not modelled: %s", n)
		}
	}
	if _, err := Import("ds.json", []byte(`{"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "max_in_cpu": "lots"}}}`),
		Options{Kind: KindDeepSpeed, Model: "llama-3.1-8b", GPUs: 8}); err == nil || !strings.Contains(err.Error(), "max_in_cpu") {
		t.Errorf("bad max_in_cpu: %v", err)
	}
}

// TestImportServeWithoutCommand: a serving config named by -from whose
// lines hold no command (only a prompt sign, say) is an error that says
// what it wants, not a crash (found by FuzzImport).
func TestImportServeWithoutCommand(t *testing.T) {
	for _, k := range []Kind{KindLlamaCpp, KindVLLM, KindSGLang} {
		_, err := Import("serve.sh", []byte(" \n \n\n\"000\"&\n $"), Options{Kind: k, Model: "llama-3-8b"})
		if err == nil || !strings.Contains(err.Error(), "command") {
			t.Errorf("%s: error %v, want one asking for the command line", k, err)
		}
	}
}

// TestImportVLLMMambaDTypes: --mamba-cache-dtype and --mamba-ssm-cache-dtype
// reach the plan's state pages.
func TestImportVLLMMambaDTypes(t *testing.T) {
	imp, err := Import("serve.sh", []byte("vllm serve ibm-ai-platform/Bamba-9B --max-model-len 4096 --mamba-ssm-cache-dtype float32"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := imp.Plan.VLLM; v == nil || v.MambaCacheDType != vram.DTypeUnset || v.MambaSSMCacheDType != vram.FP32 {
		t.Fatalf("vllm settings %+v", imp.Plan.VLLM)
	}
	if _, err := imp.Plan.VLLM.KVCache(imp.Plan.Model, 10*vram.GiB); err == nil || !strings.Contains(err.Error(), "until v0.23.0") {
		t.Errorf("vLLM 0.33 runs Bamba: %v", err)
	}
	v := *imp.Plan.VLLM
	v.Version = "0.14.1" // the last modelled release that runs Bamba
	c, err := v.KVCache(imp.Plan.Model, 10*vram.GiB)
	// conv (3, 8448) bf16, temporal (128, 64, 128) fp32.
	if want := vram.Bytes(3*8448*2 + 128*64*128*4); err != nil || c.StatePageBytes != want {
		t.Errorf("state page %v, %v; want %v", c.StatePageBytes, err, want)
	}
}

// TestImportVLLMMultimodal: a vision-language launch's multimodal flags
// become the carve's profile settings, in JSON or key=value form; a bad
// value is an error naming the flag.
func TestImportVLLMMultimodal(t *testing.T) {
	for _, c := range []struct {
		cmd    string
		limits map[string]int
		pixels int
		skip   bool
	}{
		{`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 32768 --limit-mm-per-prompt '{"image": 2, "video": 0}' --mm-processor-kwargs '{"max_pixels": 1003520, "min_pixels": 3136}'`,
			map[string]int{"image": 2, "video": 0}, 1003520, false},
		{`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 32768 --limit-mm-per-prompt image=4,video=0`, map[string]int{"image": 4, "video": 0}, 0, false},
		{`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 32768 --skip-mm-profiling`, nil, 0, true},
	} {
		imp, err := Import("serve.sh", []byte(c.cmd), Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.cmd, err)
		}
		v := imp.Plan.VLLM
		if v == nil || !reflect.DeepEqual(v.LimitMMPerPrompt, c.limits) || v.MaxPixels != c.pixels || v.SkipMMProfiling != c.skip {
			t.Errorf("%s: settings %+v", c.cmd, v)
			continue
		}
		g, _ := vram.LookupGPU("H100-80GB")
		carve, err := v.Carve(*imp.Plan.Inference, g)
		if err != nil || (carve.MMProfile == nil) != c.skip {
			t.Errorf("%s: carve %v, profile %+v", c.cmd, err, carve.MMProfile)
		}
	}
	for _, c := range []struct{ cmd, want string }{
		{`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt '{"image": "two"}'`, `--limit-mm-per-prompt`},
		{`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt image:2`, `want modality=count`},
		{`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --mm-processor-kwargs '{"max_pixels": -3}'`, `max_pixels -3`},
		{`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --mm-processor-kwargs 'max_pixels=3'`, `--mm-processor-kwargs`},
		{`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --tensor-parallel-size 2 --mm-encoder-tp-mode dp`, `--mm-encoder-tp-mode "dp": want weights or data`},
	} {
		if _, err := Import("serve.sh", []byte(c.cmd), Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.cmd, err, c.want)
		}
	}
}

// TestImportVLLMEncoderTPMode: --mm-encoder-tp-mode, and the deprecated
// flag that sets data, reach the carve's settings.
func TestImportVLLMEncoderTPMode(t *testing.T) {
	for cmd, want := range map[string]string{
		`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --tensor-parallel-size 2 --mm-encoder-tp-mode data`:                 "data",
		`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --tensor-parallel-size 2 --mm-encoder-tp-mode weights`:              "weights",
		`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --tensor-parallel-size 2 --enable-multimodal-encoder-data-parallel`: "data",
		`vllm serve Qwen/Qwen2.5-VL-7B-Instruct --tensor-parallel-size 2`:                                           "",
	} {
		imp, err := Import("serve.sh", []byte(cmd), Options{})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if v := imp.Plan.VLLM; v == nil || v.MMEncoderTPMode != want {
			t.Errorf("%s: settings %+v, want mode %q", cmd, v, want)
		}
		for _, n := range imp.NotModelled {
			if strings.Contains(n, "encoder") {
				t.Errorf("%s: %q listed as not modelled", cmd, n)
			}
		}
	}
}

// TestImportSGLangHybrid: a launch of Qwen3-Next with its state settings.
func TestImportSGLangHybrid(t *testing.T) {
	imp, err := Import("serve.sh", []byte("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp 4 --max-running-requests 128 --mamba-ssm-dtype bfloat16"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := imp.Plan.SGLang; s == nil || s.TP != 4 || s.MaxRunningRequests != 128 || s.MambaSSMDType != vram.BF16 {
		t.Fatalf("sglang settings %+v", imp.Plan.SGLang)
	}
	if _, err := Import("serve.sh", []byte("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --mamba-ssm-dtype fp8"), Options{}); err == nil || !strings.Contains(err.Error(), "--mamba-ssm-dtype") {
		t.Errorf("bad dtype: %v", err)
	}
}

// TestImportSGLangDefaultInputs: the flags SGLang's default
// mem_fraction_static reads (sglang_defaults.go) reach the plan, 0 turns
// chunking off as SGLang's -1 does, and a bad value names its flag.
func TestImportSGLangDefaultInputs(t *testing.T) {
	cases := []struct {
		args          string
		chunk, graphs int
		multimodal    bool
	}{
		{"--chunked-prefill-size 4096 --cuda-graph-max-bs 64 --enable-multimodal", 4096, 64, true},
		{"--chunked-prefill-size -1 --max-prefill-tokens 8192", -1, 0, false},
		{"--chunked-prefill-size 0 --enable-multimodal false", -1, 0, false},
		{"", 0, 0, false},
	}
	for _, c := range cases {
		imp, err := Import("serve.sh", []byte("python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B "+c.args), Options{})
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		s := imp.Plan.SGLang
		if c.chunk == -1 && strings.Contains(c.args, "max-prefill") && s.MaxPrefillTokens != 8192 {
			t.Errorf("%q: max_prefill_tokens %d", c.args, s.MaxPrefillTokens)
		}
		if s.ChunkedPrefillSize != c.chunk || s.CUDAGraphMaxBS != c.graphs || s.EnableMultimodal != c.multimodal {
			t.Errorf("%q: chunk %d graphs %d multimodal %v, want %d %d %v", c.args, s.ChunkedPrefillSize, s.CUDAGraphMaxBS, s.EnableMultimodal, c.chunk, c.graphs, c.multimodal)
		}
		for _, n := range imp.NotModelled {
			if strings.Contains(n, "chunked") || strings.Contains(n, "cuda-graph") || strings.Contains(n, "multimodal") || strings.Contains(n, "prefill") {
				t.Errorf("%q: %q listed as not modelled", c.args, n)
			}
		}
	}
	// What the default fraction also reads and the carve does not model is
	// said, not silently dropped.
	imp, err := Import("serve.sh", []byte("python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B --speculative-algorithm EAGLE --cuda-graph-bs 1 2 4"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if said := strings.Join(imp.NotModelled, "\n"); strings.Contains(said, "--speculative-algorithm") || !strings.Contains(said, "--cuda-graph-bs") {
		t.Errorf("not modelled: %q", imp.NotModelled)
	}
	if c := imp.Plan.SGLang.Speculative; c == nil || c.Algorithm != "EAGLE" {
		t.Errorf("--speculative-algorithm EAGLE: %+v (sglang.speculative, serve_spec_test.go)", c)
	}
	for _, bad := range []string{"--chunked-prefill-size -5", "--cuda-graph-max-bs 0", "--cuda-graph-max-bs x", "--max-prefill-tokens 0"} {
		_, err := Import("serve.sh", []byte("python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B "+bad), Options{})
		if err == nil || !strings.Contains(err.Error(), strings.Fields(bad)[0]) {
			t.Errorf("%q: %v, want an error naming the flag", bad, err)
		}
	}
}

// TestImportTorchtitanPy: a config_registry.py's function is chosen by
// -config, overrides apply as torchtitan's CLI applies them, and the
// combinations torchtitan refuses are refused in its words.
func TestImportTorchtitanPy(t *testing.T) {
	llama := filepath.Join("testdata", "configs", "torchtitan", "llama3", "config_registry.py")
	qwen := filepath.Join("testdata", "configs", "torchtitan", "qwen3", "config_registry.py")
	for _, c := range []struct {
		file, entry string
		over        []string
		want        map[string]string
		err         string
	}{
		{llama, "", nil, nil, "the module defines 14 configs (llama3_debugmodel, "},
		{llama, "llama3_9b", nil, nil, "-config llama3_9b: the module has no function llama3_9b"},
		{llama, "llama3_8b", []string{"parallelism.pipeline_parallel_degree=2"}, nil, "CUDA graphs do not support pipeline parallelism yet"},
		{llama, "llama3_8b", []string{"parallelism.pipeline_parallel_degree=2", "training.disable_cuda_graphs=true", "parallelism.num_pp_microbatches=4"},
			map[string]string{"pp": "2", "micro": "4", "keep_grads": "", "dp": "4"}, ""},
		{qwen, "qwen3_30b_a3b", []string{"parallelism.expert_parallel_degree=2"}, nil, "CUDA graphs support only expert parallel token dispatcher"},
		{qwen, "qwen3_30b_a3b", []string{"parallelism.expert_parallel_degree=2", "training.disable_cuda_graphs=true"}, map[string]string{"ep": "2"}, ""},
		{llama, "llama3_8b", []string{"activation_checkpoint=memory-budget"}, nil, "MemoryBudgetAC: the compiler's partitioner"},
		{llama, "llama3_8b", []string{"activation_checkpoint=none"}, map[string]string{"ckpt": "none", "sac": ""}, ""},
		{llama, "llama3_8b", []string{"training.num_tokens_per_train_step=12345"}, nil, "num_tokens_per_train_step 12345 is not a multiple of 65536"},
		{llama, "llama3_8b", []string{"training.num_tokens_per_train_step=262144"}, map[string]string{"grad_accum": "4"}, ""},
		{llama, "llama3_8b", []string{"loss.num_chunks=3"}, nil, "ChunkedLossWrapper sequence length must be divisible by num_chunks"},
		{llama, "llama3_debugmodel_ce_loss", []string{"training.max_context_length=1024"}, nil, `model_registry("debugmodel") of the llama3 module is not in the importer's table`},
		{filepath.Join("testdata", "configs", "torchtitan", "llama3_8b.toml"), "llama3_8b", nil, nil, "-config llama3_8b names a function of a torchtitan Python config"},
		{filepath.Join("testdata", "configs", "axolotl", "llama-3__qlora.yml"), "llama3_8b", nil, nil, "-config llama3_8b names a function of a torchtitan Python config; this config is axolotl's"},
	} {
		imp, err := Read(c.file, Options{Entry: c.entry, Overrides: c.over, GPUs: 8})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %v: error %v, want %q", c.entry, c.over, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %v: %v", c.entry, c.over, err)
			continue
		}
		got := importFields(imp.Plan)
		for k, want := range c.want {
			if got[k] != want {
				t.Errorf("%s %v: %s = %q, want %q", c.entry, c.over, k, got[k], want)
			}
		}
	}
}

// TestImportVerlCriticStrategy: a critic on Megatron is refused as the
// actor's is; one on another FSDP version than the actor's is said.
func TestImportVerlCriticStrategy(t *testing.T) {
	script := filepath.Join("testdata", "configs", "verl", "grpo_trainer__run_qwen2-7b.sh")
	for _, c := range []struct {
		over []string
		want string
		err  bool
	}{
		{[]string{"algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=8", "critic.strategy=megatron"}, "critic.strategy megatron: verl's Megatron workers are not modelled", true},
		{[]string{"algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=8", "critic.strategy=fsdp2"}, "critic.strategy = fsdp2: the critic is planned with the actor's strategy fsdp", false},
	} {
		imp, err := Read(script, Options{Model: "qwen2.5-7b", Overrides: c.over})
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = strings.Join(imp.NotModelled, "\n")
		}
		if (err != nil) != c.err || !strings.Contains(got, c.want) {
			t.Errorf("%v: %q (error %v), want %q", c.over, got, err, c.want)
		}
	}
}

// TestImportTorchtitanPySource: what the importer passes over is said,
// and a registry that is not one gets an error naming what it is.
func TestImportTorchtitanPySource(t *testing.T) {
	head := "from torchtitan.trainer import Trainer\n\n"
	for _, c := range []struct{ src, err, note string }{
		{head + "def c() -> Trainer.Config:\n    cfg = Trainer.Config(model_spec=model_registry(\"8B\"), loss=CrossEntropyLoss.Config())\n    if fast:\n        cfg.compile = CompileConfig(enable=True)\n    return cfg\n",
			"", "c, line 5: if: not evaluated"},
		{head + "def c() -> Trainer.Config:\n    return Trainer.Config(model_spec=model_registry(\"8B\", converters=[LoRAConverter.Config(target_modules=[\"wz\"])]), loss=CrossEntropyLoss.Config())\n",
			`"wz" is not one of torchtitan's wq`, ""},
		{head + "def c() -> Trainer.Config:\n    return 3\n", "c returns 3, not a Trainer.Config", ""},
		{head + "def helper(x):\n    return x\n", "no config function", ""},
		{head + "def c() -> Trainer.Config:\n    return Trainer.Config(model_spec=model_registry(\"8B\"), activation_checkpoint=None, loss=CrossEntropyLoss.Config())\n", "", ""},
	} {
		imp, err := Import("config_registry.py", []byte(c.src), Options{Dir: filepath.Join("x", "llama3"), GPUs: 8})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.src, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if c.note != "" && !strings.Contains(strings.Join(imp.NotModelled, "\n"), c.note) {
			t.Errorf("%q: not modelled %q, want %q", c.src, imp.NotModelled, c.note)
		}
	}
	imp, err := Import("config_registry.py", []byte(head+"def c() -> Trainer.Config:\n    return Trainer.Config(model_spec=model_registry(\"8B\"), activation_checkpoint=None, loss=CrossEntropyLoss.Config())\n"),
		Options{Dir: filepath.Join("x", "llama3"), GPUs: 8})
	if err != nil || imp.Plan.Training.Checkpointing != vram.CheckpointNone || imp.Plan.Training.Loss != "" {
		t.Errorf("activation_checkpoint=None, CrossEntropyLoss: %v %+v", err, imp.Plan.Training)
	}
}

// TestIsPythonConfig: a torchtitan config module is told by its .py name
// or by defining functions that return Trainer.Config; a launch script
// with Python in a here-document is still a launch script.
func TestIsPythonConfig(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       bool
	}{
		{"config_registry.py", "x = 1", true},
		{"registry", "from torchtitan.trainer import Trainer\n\ndef c() -> Trainer.Config:\n    return Trainer.Config()", true},
		{"run.sh", "#!/bin/bash\npython - <<EOF\nfrom x import y\n\ndef f(): pass\nEOF\ntorchrun train.py", false},
		{"train.yaml", "# comment\nfrom: x\n", false},
	} {
		if got := isPythonConfig(c.name, c.text); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestImportLaunchersAsLaunchers: accelerate launch, torchrun and
// deepspeed run a module or a script with their own flags before it: the
// world size comes from them, the module is the program (TRL's GRPO with
// its defaults), and no launcher flag is read as a trainer's key.
func TestImportLaunchersAsLaunchers(t *testing.T) {
	for _, c := range []struct {
		line string
		want map[string]string
	}{
		{"accelerate launch --num_processes 1 -m trl.scripts.grpo --model_name_or_path Qwen/Qwen2.5-0.5B --use_vllm true --per_device_train_batch_size 4",
			map[string]string{"pt.algorithm": "grpo", "pt.framework": "trl", "pt.micro": "4", "pt.dp": "1"}},
		{"accelerate launch --config_file none.yaml --num_processes 4 -m trl.scripts.sft --model_name_or_path Qwen/Qwen2.5-0.5B --max_length 1024",
			map[string]string{"dp": "4", "ckpt": "full", "precision": "amp_bf16", "seq": "1024"}},
		{"torchrun --nproc_per_node 8 train.py --model_name_or_path Qwen/Qwen2.5-0.5B --max_length 512", map[string]string{"dp": "8"}},
		{"deepspeed --num_gpus 2 --module trl.scripts.sft --model_name_or_path Qwen/Qwen2.5-0.5B --max_length 512", map[string]string{"dp": "2", "ckpt": "full"}},
		{"python -m trl.scripts.dpo --model_name_or_path Qwen/Qwen2.5-0.5B", map[string]string{"pt.algorithm": "dpo"}},
	} {
		imp, err := Import("launch.sh", []byte(c.line+"\n"), Options{})
		if err != nil {
			t.Errorf("%s: %v", c.line, err)
			continue
		}
		got := importFields(imp.Plan)
		for k, want := range c.want {
			if got[k] != want {
				t.Errorf("%s: %s = %q, want %q", c.line, k, got[k], want)
			}
		}
		all := strings.Join(append(append([]string{}, imp.NotModelled...), imp.Ignored...), "\n")
		for _, leak := range []string{"num_processes", "nproc_per_node", "num_gpus", "launch.m", "= trl.scripts"} {
			if strings.Contains(all, leak) {
				t.Errorf("%s: a launcher flag read as the trainer's: %s", c.line, all)
			}
		}
	}
}

// TestImportTorchtuneBuilderMustMatch: a plain builder with an adapter's
// keys is refused as torchtune refuses it (the builder takes no such
// argument), never planned as a full fine-tune.
func TestImportTorchtuneBuilderMustMatch(t *testing.T) {
	yaml := "model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\n  lora_rank: 16\n  quantize_base: True\n" +
		"tokenizer:\n  _component_: torchtune.models.llama3.llama3_tokenizer\n  max_seq_len: 2048\nbatch_size: 2\ndataset:\n  _component_: torchtune.datasets.alpaca_dataset\n"
	_, err := Import("lora.yaml", []byte(yaml), Options{})
	if err == nil || !strings.Contains(err.Error(), "TypeError: llama3_1_8b() got an unexpected keyword argument 'lora_rank'") || !strings.Contains(err.Error(), "qlora_llama3_1_8b") {
		t.Errorf("%v", err)
	}
}

// TestVLLMServeAuto: --max-model-len auto (vLLM 0.33) and --enforce-eager
// reach the launch.
func TestVLLMServeAuto(t *testing.T) {
	imp, err := Import("serve.sh", []byte("vllm serve meta-llama/Llama-3.1-8B --max-model-len auto --enforce-eager\n"), Options{GPU: "L4"})
	if err != nil {
		t.Fatal(err)
	}
	v := imp.Plan.VLLM
	if v == nil || v.MaxModelLen != vram.AutoMaxModelLen || !v.EnforceEager {
		t.Fatalf("launch %+v", v)
	}
	c, err := v.Carve(*imp.Plan.Inference, mustGPU(t, "L4"))
	if err != nil || c.CUDAGraphs != 0 || c.KVCache.MaxModelLen < 1 || c.KVCache.MaxModelLen >= 131072 || !c.Starts {
		t.Errorf("carve: graphs %v, max_model_len %d, starts %v (%s), %v", c.CUDAGraphs, c.KVCache.MaxModelLen, c.Starts, c.Err, err)
	}
}

// TestHFReentrantKwargs: gradient_checkpointing_kwargs' use_reentrant is
// read from the JSON a command line passes.
func TestHFReentrantKwargs(t *testing.T) {
	for name, c := range map[string]struct{ file, text string }{
		"command line": {"train.sh", `python train.py --model_name_or_path gpt2 --gradient_checkpointing true --gradient_checkpointing_kwargs '{"use_reentrant": false}' --per_device_train_batch_size 2 --max_length 512`},
	} {
		imp, err := Import(c.file, []byte(c.text), Options{Kind: KindHFArgs, Model: "gpt2", Overrides: []string{"max_length=512"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tr := imp.Plan.Training; tr == nil || tr.UseReentrant == nil || *tr.UseReentrant {
			t.Errorf("%s: use_reentrant %v", name, tr.UseReentrant)
		}
	}
}

// TestVLLMUseV1Env: VLLM_USE_V1=1 before `vllm serve` reaches the launch
// (vLLM 0.9.2 to 0.10.1.1 then run a hybrid on V1 instead of refusing it
// as V0), and 0 or unset leaves it off.
func TestVLLMUseV1Env(t *testing.T) {
	for _, c := range []struct {
		line string
		want bool
	}{
		{"VLLM_USE_V1=1 vllm serve ibm-ai-platform/Bamba-9B\n", true},
		{"VLLM_USE_V1=0 vllm serve ibm-ai-platform/Bamba-9B\n", false},
		{"vllm serve ibm-ai-platform/Bamba-9B\n", false},
	} {
		imp, err := Import("serve.sh", []byte(c.line), Options{})
		if err != nil || imp.Plan.VLLM == nil || imp.Plan.VLLM.UseV1 != c.want {
			t.Errorf("%q: %+v, %v; want use_v1 %v", c.line, imp.Plan.VLLM, err, c.want)
		}
	}
}
