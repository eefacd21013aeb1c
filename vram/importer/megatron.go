package importer

import (
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// Megatron-LM's arguments (`torchrun … pretrain_gpt.py --num-layers 32
// …`, as its examples/*.sh launch it; NVIDIA/Megatron-LM @ d98e8a6,
// megatron/training/arguments.py "MA", megatron/core/transformer/
// transformer_config.py "TC", megatron/core/model_parallel_config.py
// "MPC"). The model is given by its shape: --num-layers, --hidden-size,
// --num-attention-heads, --ffn-hidden-size (4 × hidden, or
// int(8·hidden/3 / 64)·64 with --swiglu, MA:1320-1329), --kv-channels
// (hidden / heads, MA:1331), --group-query-attention with
// --num-query-groups, --normalization (LayerNorm, TC:256),
// --disable-bias-linear (biases on, TC:212), --untie-embeddings-and-
// output-weights (tied by default, MA:2460), --position-embedding-type
// (learned_absolute, MA:2397), the vocabulary padded to a multiple of
// --make-vocab-size-divisible-by (128, MA:2441) × TP
// (core/tokenizers/utils/build_tokenizer.py:133), and MoE's
// --num-experts, --moe-router-topk (2, TC:760), --moe-ffn-hidden-size.
// Training: --micro-batch-size, --seq-length, --bf16/--fp16 (16-bit
// parameters, fp32 main parameters and, with bf16, fp32 main gradients:
// MA:1216), --use-distributed-optimizer (the main parameters and the
// optimizer states sharded over data parallelism, ZeRO-1),
// --recompute-granularity/-method/-num-layers (TC:532-551),
// --recompute-activations (selective, MA:608), the parallel degrees and
// --sequence-parallel (MPC:55-127).

var megatronIrrelevant = prefixes("launch.", "train_iters", "train_samples", "lr", "min_lr", "decoupled_", "weight_decay", "adam_",
	"clip_grad", "init_method_std", "log_", "save", "load", "eval_", "tensorboard", "wandb", "data_", "split", "vocab_file",
	"merge_file", "tokenizer_model", "tiktoken_", "mock_data", "num_workers", "exit_", "manual_gc", "seed", "step_batch_size_schedule",
	"global_batch_size", "lr_", "attention_dropout", "hidden_dropout", "no_create_attention_mask_in_dataloader", "no_mmap_bin_files",
	"use_mcore_models", "rotary_base", "rotary_percent", "rope_scaling", "apply_layernorm_1p", "distributed_backend", "use_flash_attn",
	"attention_backend", "overlap_grad_reduce", "overlap_param_gather", "cross_entropy_loss_fusion", "calculate_per_token_loss",
	"ckpt_", "dist_ckpt_", "timing_log", "no_load_", "finetune", "use_checkpoint_", "transformer_impl", "grad_reduce_in_bf16",
	"position_embedding_type", "max_position_embeddings", "empty_unused_memory_level", "fp8_amax_", "disable_bias_linear", "profile",
	"distributed_timeout_minutes", "log_throughput",
	"swiglu", "group_query_attention", "untie_embeddings_and_output_weights")

func isMegatronCommand(w []string) bool {
	for _, x := range w {
		if strings.Contains(x, "pretrain_gpt") || strings.Contains(x, "pretrain_mamba") || x == "--num-layers" || x == "--hidden-size" {
			return true
		}
	}
	return false
}

func importMegatron(r *configReader, opt Options) (trainerImport, error) {
	ti := trainerImport{t: vram.Training{Framework: vram.FrameworkMegatron, Optimizer: "adamw", Precision: "fp32", MicroBatch: 1}}
	t := &ti.t
	r.get("launch.program")
	if err := megatronParallel(r, t, opt); err != nil {
		return ti, err
	}
	if opt.Model == "" {
		m, err := megatronModel(r, t.Parallel.TP)
		if err != nil {
			return ti, err
		}
		ti.model = &m
	}
	for _, step := range []func(*configReader, *vram.Training) error{megatronTraining, megatronRecompute} {
		if err := step(r, t); err != nil {
			return ti, err
		}
	}
	r.finish(megatronIrrelevant)
	return ti, nil
}

// megatronModel builds the architecture the shape arguments describe.
func megatronModel(r *configReader, tp int) (vram.Model, error) {
	m := vram.Model{Name: "Megatron-LM GPT", Norm: "layernorm", MLP: "gelu", Bias: vram.BiasAll, Position: "rope"}
	m.Family = "llama" // Megatron-LM writes Llama-architecture GPTs
	for _, f := range []struct {
		key string
		dst *int
	}{{"num_layers", &m.Layers}, {"hidden_size", &m.Hidden}, {"num_attention_heads", &m.Heads}} {
		n, ok, err := r.int(f.key, 1, 1<<20)
		if err != nil {
			return m, err
		}
		if !ok {
			return m, fmt.Errorf("--%s: Megatron-LM needs it (the model is given by its shape), or give -model", strings.ReplaceAll(f.key, "_", "-"))
		}
		*f.dst = n
	}
	if err := megatronShape(r, &m); err != nil {
		return m, err
	}
	if err := megatronVocab(r, &m, tp); err != nil {
		return m, err
	}
	if err := megatronMoE(r, &m); err != nil {
		return m, err
	}
	moe := ""
	if m.Experts > 0 {
		moe = fmt.Sprintf(", %d experts of FFN %d (top %d)", m.Experts, m.ExpertFFN, m.ExpertsPerToken)
	}
	r.mapped("model: %d layers × hidden %d, %d heads (%d key/value), FFN %d%s, %s, %s, vocabulary %d (padded), %s embeddings",
		m.Layers, m.Hidden, m.Heads, m.KVHeads, m.FFN, moe, m.Norm, m.MLP, m.Vocab, map[bool]string{true: "tied", false: "untied"}[m.TiedEmbeddings])
	return m, nil
}

func megatronShape(r *configReader, m *vram.Model) error {
	swiglu, _, err := r.bool("swiglu")
	if err != nil {
		return err
	}
	if swiglu {
		m.MLP = "swiglu"
	}
	ffn, ok, err := r.int("ffn_hidden_size", 1, 1<<24)
	switch {
	case err != nil:
		return err
	case ok:
		m.FFN = ffn
	case swiglu:
		m.FFN = int(float64(4*m.Hidden)*2/3) / 64 * 64
	default:
		m.FFN = 4 * m.Hidden
	}
	if kv, ok, err := r.int("kv_channels", 1, 1<<16); err != nil {
		return err
	} else if ok && kv*m.Heads != m.Hidden {
		m.HeadDim = kv
	}
	m.KVHeads = m.Heads
	if gqa, _, err := r.bool("group_query_attention"); err != nil {
		return err
	} else if gqa {
		g, ok, err := r.int("num_query_groups", 1, m.Heads)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("--group-query-attention: give --num-query-groups")
		}
		m.KVHeads = g
	}
	if norm, _, err := r.str("normalization"); err != nil {
		return err
	} else if strings.EqualFold(norm, "RMSNorm") {
		m.Norm = "rmsnorm"
	}
	if nb, _, err := r.bool("disable_bias_linear"); err != nil {
		return err
	} else if nb {
		m.Bias = vram.BiasNone
	}
	untie, _, err := r.bool("untie_embeddings_and_output_weights")
	if err != nil {
		return err
	}
	m.TiedEmbeddings = !untie
	pos, _, _ := r.str("position_embedding_type")
	switch pos {
	case "rope", "yarn", "mrope":
	case "", "learned_absolute":
		// LanguageModelEmbedding (megatron/core/models/common/embeddings/
		// language_model_embedding.py): a position table of
		// max_position_embeddings rows, added to the word embeddings.
		m.Position = "learned"
	case "none":
		m.Position = "none"
	default:
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("position_embedding_type %s: estimated as rope (no parameters)", pos))
	}
	if err := r.intInto(&m.MaxPosition, "max_position_embeddings", 1, vram.MaxTokens); err != nil {
		return err
	}
	if m.Position == "learned" && m.MaxPosition == 0 {
		// validate_args' required arguments (megatron/training/arguments.py).
		return fmt.Errorf("--max-position-embeddings: Megatron-LM needs it (the learned_absolute position table has that many rows), or give -model")
	}
	return nil
}

// megatronVocab pads the tokenizer's vocabulary as Megatron does; the
// vocabulary comes from --vocab-size (NullTokenizer and others) or GPT-2's
// BPE (50257).
func megatronVocab(r *configReader, m *vram.Model, tp int) error {
	v, ok, err := r.int("vocab_size", 1, 1<<24)
	if err != nil {
		return err
	}
	tok, _, _ := r.str("tokenizer_type")
	if !ok {
		switch tok {
		case "", "GPT2BPETokenizer":
			v = 50257
		default:
			return fmt.Errorf("--tokenizer-type %s: the vocabulary is the tokenizer's; give --vocab-size N or -model", tok)
		}
	}
	div := 128
	if err := r.intInto(&div, "make_vocab_size_divisible_by", 1, 1<<20); err != nil {
		return err
	}
	multiple := div * max(1, tp)
	m.Vocab = (v + multiple - 1) / multiple * multiple
	return nil
}

func megatronMoE(r *configReader, m *vram.Model) error {
	e, ok, err := r.int("num_experts", 1, 1<<16)
	if err != nil || !ok {
		return err
	}
	m.Family = "mixtral" // with experts
	m.Experts, m.ExpertsPerToken, m.ExpertFFN = e, 2, m.FFN
	if k, ok, err := r.int("moe_router_topk", 1, e); err != nil {
		return err
	} else if ok {
		m.ExpertsPerToken = k
	}
	if f, ok, err := r.int("moe_ffn_hidden_size", 1, 1<<24); err != nil {
		return err
	} else if ok {
		m.ExpertFFN = f
	}
	r.notModelled("moe_shared_expert_intermediate_size", "shared experts are not modelled for a Megatron-LM shape; give -model")
	r.notModelled("moe_layer_freq", "every layer is estimated as MoE")
	return nil
}

func megatronTraining(r *configReader, t *vram.Training) error {
	if err := r.intInto(&t.MicroBatch, "micro_batch_size", 1, vram.MaxTokens); err != nil {
		return err
	}
	seq, ok, err := r.int("seq_length", 1, vram.MaxTokens)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("--seq-length: Megatron-LM needs it")
	}
	t.SeqLen = seq
	r.mapped("--micro-batch-size %d × --seq-length %d", t.MicroBatch, t.SeqLen)
	for _, key := range []string{"fp16", "bf16"} {
		p := key
		if b, _, err := r.bool(key); err != nil {
			return err
		} else if b {
			t.Precision = p
			r.mapped("--%s → %s parameters, fp32 main parameters in the optimizer", key, p)
		}
	}
	if g, _, err := r.bool("grad_reduce_in_bf16"); err != nil {
		return err
	} else if g && t.Precision == "bf16" {
		// accumulate_allreduce_grads_in_fp32 stays off (MA:1213): the
		// grad buffer keeps the parameters' bf16.
		t.GradsDType = vram.BF16
		r.mapped("--grad-reduce-in-bf16 → bf16 main gradients")
	}
	if f, ok, _ := r.str("fp8_format"); ok {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("fp8_format %s: Transformer Engine's FP8 (its fp8 copies of the inputs the linears save) is not modelled: estimated in %s", f, t.Precision))
		r.notModelled("fp8_param_gather", "fp8 parameters (a quarter of fp32's bytes) are not modelled: estimated in "+t.Precision)
	}
	if d, _, err := r.bool("use_distributed_optimizer"); err != nil {
		return err
	} else if d && t.Parallel.DP > 1 {
		t.Parallel.ZeRO = 1
		r.mapped("--use-distributed-optimizer → main parameters and optimizer states sharded over data parallel %d (ZeRO-1)", t.Parallel.DP)
	}
	if o, _, _ := r.str("optimizer"); o != "" && o != "adam" {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("optimizer %s: estimated with Adam's states", o))
	}
	return nil
}

func megatronRecompute(r *configReader, t *vram.Training) error {
	g, _, err := r.str("recompute_granularity")
	if err != nil {
		return err
	}
	if ra, _, err := r.bool("recompute_activations"); err != nil {
		return err
	} else if ra && g == "" {
		g = "selective"
	}
	switch g {
	case "":
		t.Checkpointing = vram.CheckpointNone
	case "selective":
		t.Checkpointing = vram.CheckpointSelective
	case "full":
		t.Checkpointing = vram.CheckpointFull
		meth, _, err := r.str("recompute_method")
		if err != nil {
			return err
		}
		t.RecomputeMethod = meth
		if err := r.intInto(&t.RecomputeNumLayers, "recompute_num_layers", 1, 1<<20); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--recompute-granularity %q: want full or selective", g)
	}
	r.mapped("recompute %s%s", orDefault(g, "none"), map[bool]string{true: fmt.Sprintf(" (%s, %d layers)", t.RecomputeMethod, t.RecomputeNumLayers)}[t.RecomputeMethod != ""])
	return nil
}

// megatronParallel reads the degrees and the world torchrun launches.
func megatronParallel(r *configReader, t *vram.Training, opt Options) error {
	p := &t.Parallel
	for key, dst := range map[string]*int{"tensor_model_parallel_size": &p.TP, "pipeline_model_parallel_size": &p.PP,
		"context_parallel_size": &p.CP, "expert_model_parallel_size": &p.EP} {
		n, ok, err := r.int(key, 1, 1<<16)
		if err != nil {
			return err
		}
		if ok && n > 1 {
			*dst = n
		}
	}
	if sp, _, err := r.bool("sequence_parallel"); err != nil {
		return err
	} else if sp && p.TP > 1 {
		p.SP = true
	}
	if n, ok, err := r.int("num_layers_per_virtual_pipeline_stage", 1, 1<<20); err != nil {
		return err
	} else if ok && p.PP > 1 {
		layers, _, _ := r.int("num_layers", 1, 1<<20)
		p.VirtualStages, p.PPSchedule = max(1, layers/(p.PP*n)), vram.ScheduleInterleaved1F1B
	}
	world := opt.GPUs
	if world == 0 {
		perNode, _, err := r.int("launch.nproc_per_node", 1, 1<<16)
		if err != nil {
			return err
		}
		nodes, _, err := r.int("launch.nnodes", 1, 1<<16)
		if err != nil {
			return err
		}
		world = max(1, perNode) * max(1, nodes)
	}
	model := max(1, p.TP) * max(1, p.PP) * max(1, p.CP)
	if world%model != 0 {
		return fmt.Errorf("%d GPUs (torchrun's --nproc_per_node × --nnodes, or -gpus): not a multiple of TP %d × PP %d × CP %d; give the launch's world with -gpus", world, max(1, p.TP), max(1, p.PP), max(1, p.CP))
	}
	p.DP = world / model
	r.mapped("%d GPUs → TP %d × PP %d × CP %d × data parallel %d%s%s", world, max(1, p.TP), max(1, p.PP), max(1, p.CP), p.DP,
		map[bool]string{true: ", sequence parallel"}[p.SP], map[bool]string{true: fmt.Sprintf(", experts over EP %d", p.EP)}[p.EP > 1])
	return nil
}
