package importer

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/internal/pyconf"
	"github.com/vramlab/vramlab/vram/internal/strictjson"
)

// torchtitan's Python configs (pytorch/torchtitan @ b5bcd76c,
// 2026-08-21): a config_registry.py of functions returning Trainer.Config,
// launched as `-m torchtitan.train --module llama3 --config llama3_8b`
// (run_train.sh:29-47). python.go evaluates the chosen function; this
// file maps what it returns, by the config classes' defaults: "CFG" is
// torchtitan/config/configs.py, "TR" torchtitan/trainer.py, "AC"
// torchtitan/distributed/activation_checkpoint.py, "LOSS"
// torchtitan/components/loss.py.
//
// One micro-batch on a rank is one row of num_tokens_per_microbatch_per_dp_rank
// tokens (CFG:37, 16384), documents packed into it and attention kept
// within each (block-causal masks from positions, TR:715-723), a document
// at most max_context_length tokens (CFG:51, 2048): the engine takes it as
// rows of max_context_length, the same tokens. FSDP2 wraps the model at
// any shard degree (llama3/parallelize.py:57-78), so compute runs in
// mixed_precision_param (CFG:94, bfloat16) over training.dtype storage
// (CFG:87, float32).

// torchtitanPyIrrelevant are the Trainer.Config fields without a bearing
// on GPU memory.
var torchtitanPyIrrelevant = prefixes("hf_assets_path", "profiler", "metrics", "lr_scheduler", "dataloader", "checkpoint",
	"validator", "comm", "debug.seed", "debug.deterministic", "optimizer.lr", "optimizer.betas", "optimizer.eps",
	"optimizer.weight_decay", "optimizer._class", "training.steps", "training.max_norm", "training.gc_freq", "training.gc_debug",
	"training.mixed_precision_reduce", "training._class", "parallelism._class", "compile._class", "compile.backend",
	"loss.loss_fn.global_vocab_size", "loss.loss_fn._class", "parallelism.spmd_backend", "parallelism.context_parallel_",
	"parallelism.enable_fsdp_symm_mem", "model_spec._class", "_class", "_module", "_function", "_skipped", "tokenizer")

// torchtitanFlavors maps a module's model_registry flavor to the catalog
// (each module's __init__.py flavor table; the dimensions agree).
var torchtitanFlavors = map[string]string{
	"llama3/1B": "meta-llama/Llama-3.2-1B", "llama3/3B": "meta-llama/Llama-3.2-3B",
	"gpt_oss/20b": "openai/gpt-oss-20b", "gpt_oss/120b": "openai/gpt-oss-120b",
	"deepseek_v3/16B": "deepseek-ai/DeepSeek-V2-Lite", "deepseek_v3/236B": "deepseek-ai/DeepSeek-V2",
	"deepseek_v3/671B": "deepseek-ai/DeepSeek-V3",
}

// torchtitanModules are the short --module names (torchtitan/models/__init__.py:7-18),
// each with its model_registry's attn_backend default (gpt_oss/__init__.py:381-397,
// common/config_utils.py:71-103), written as torchtitan's namespace, not the families'.
var torchtitanModules = moduleTable("llama3:flex qwen3:flex qwen3_5:flex deepseek_v3:flex gpt_oss:varlen kimi_k2_7:flex flux: muse_glimmer:flex")

func moduleTable(s string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(s) {
		mod, attn, _ := strings.Cut(f, ":")
		out[mod] = attn
	}
	return out
}

// isPythonConfig tells a Python module from the other configs.
// Without the .py extension only a module that defines functions and
// names torchtitan's Trainer.Config is one (a launch script with Python in
// a here-document is not).
func isPythonConfig(name string, text string) bool {
	if strings.EqualFold(filepath.Ext(name), ".py") {
		return true
	}
	return !strings.HasPrefix(text, "#!") && strings.Contains(text, "\ndef ") && strings.Contains(text, "Trainer.Config")
}

// torchtitanPyTree evaluates the config function opt.Entry of a
// config_registry.py (the only one there is when unnamed) into the tree
// the importer reads, with the module (from the file's folder or the
// function's name) and what the evaluation passed over.
func torchtitanPyTree(data []byte, opt Options) (map[string]any, error) {
	m, err := pyconf.Parse(data)
	if err != nil {
		return nil, err
	}
	var configs []string
	for _, f := range m.Functions() {
		if len(f.Params) == 0 && !strings.HasPrefix(f.Name, "_") && strings.HasSuffix(f.Returns, "Config") {
			configs = append(configs, f.Name)
		}
	}
	name := opt.Entry
	switch {
	case name == "" && len(configs) == 1:
		name = configs[0]
	case name == "" && len(configs) == 0:
		return nil, fmt.Errorf("no config function (def NAME() -> Trainer.Config) in the module")
	case name == "":
		return nil, fmt.Errorf("the module defines %d configs (%s): name one with -config, as torchtitan's --config", len(configs), strings.Join(configs, ", "))
	case !m.Has(name):
		return nil, fmt.Errorf("-config %s: the module has no function %s (its configs: %s)", name, name, strings.Join(configs, ", "))
	}
	v, skipped, err := m.Run(name)
	if err != nil {
		return nil, err
	}
	tree, ok := v.(map[string]any)
	if !ok || !strings.HasSuffix(fmt.Sprint(tree["_class"]), "Config") {
		what := strictjson.Kind(v)
		if c, isCall := tree["_class"].(string); isCall {
			what = c + "(…)"
		}
		return nil, fmt.Errorf("%s returns %s, not a Trainer.Config (the importer reads torchtitan's Trainer configs)", name, what)
	}
	tree["_function"] = name
	tree["_module"] = torchtitanModule(filepath.Base(opt.Dir), name)
	if len(skipped) > 0 {
		notes := make([]any, len(skipped))
		for i, s := range skipped {
			notes[i] = s
		}
		tree["_skipped"] = notes
	}
	return tree, nil
}

// torchtitanModule is the --module a registry belongs to: its folder's
// name, else the config function's prefix.
func torchtitanModule(dir, function string) string {
	if _, ok := torchtitanModules[dir]; ok {
		return dir
	}
	best := ""
	for mod := range torchtitanModules {
		if strings.HasPrefix(function, mod+"_") && len(mod) > len(best) {
			best = mod
		}
	}
	return best
}

func importTorchtitanPy(r *configReader, opt Options) (trainerImport, error) {
	ti := trainerImport{t: vram.Training{Framework: vram.FrameworkTorchtitan, Optimizer: "adamw", OptimizerImpl: "fused",
		Checkpointing: vram.CheckpointSelective, SelectiveACOption: "op", Loss: "chunked_head"}}
	t := &ti.t
	for k := range r.flat { // the evaluator's own keys: the classes are read where they matter
		if k == "_class" || k == "_module" || k == "_function" || k == "_skipped" || strings.HasSuffix(k, "._class") || strings.HasSuffix(k, "._args") {
			r.used[k] = true
		}
	}
	fn, _, _ := r.str("_function")
	r.mapped("the config function %s", fn)
	if notes, ok := r.get("_skipped"); ok {
		for _, n := range notes.([]any) {
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("%s: not evaluated (the importer reads straight-line config functions)", n))
		}
	}
	var err error
	if ti.modelID, err = titanPyModel(r, t, opt); err != nil {
		return ti, err
	}
	for _, step := range []func(*configReader, *vram.Training) error{titanPyTraining, titanPyCheckpointing, titanPyLoss, titanPyOptimizer} {
		if err := step(r, t); err != nil {
			return ti, err
		}
	}
	if err := titanParallel(r, t, opt); err != nil {
		return ti, err
	}
	if err := titanPyPipeline(r, t); err != nil {
		return ti, err
	}
	if err := titanPyConverters(r, t); err != nil {
		return ti, err
	}
	r.finish(torchtitanPyIrrelevant)
	return ti, nil
}

// titanPyModel reads model_spec = model_registry(flavor, …): the catalog
// model, and the keywords that change memory and are not modelled.
func titanPyModel(r *configReader, t *vram.Training, opt Options) (string, error) {
	mod, _, _ := r.str("_module")
	flavor := ""
	if args, ok := r.get("model_spec._args"); ok {
		if a, _ := args.([]any); len(a) > 0 {
			flavor, _ = a[0].(string)
		}
	}
	if f, ok, err := r.str("model_spec.flavor"); err != nil {
		return "", err
	} else if ok {
		flavor = f
	}
	key := mod + "/" + flavor
	id := torchtitanModels[key]
	if id == "" {
		id = torchtitanFlavors[key]
	}
	if id == "" && opt.Model == "" {
		return "", fmt.Errorf("model_spec: model_registry(%q) of the %s module is not in the importer's table; give -model (a catalog name or config.json)", flavor, orDefault(mod, "(unknown)"))
	}
	r.mapped("model_registry(%q) of %s → %s", flavor, orDefault(mod, "(unknown module)"), orDefault(id, "(from -model)"))
	if key == "deepseek_v3/16B" {
		r.imp.Assumed = append(r.imp.Assumed, "deepseek_v3 16B has DeepSeek-V2-Lite's shape (deepseek_v3/__init__.py:389)")
	}
	backend := orDefault(torchtitanModules[mod], "flex") // the module's model_registry default
	if b, ok, err := r.str("model_spec.attn_backend"); err != nil {
		return "", err
	} else if ok {
		backend = b
	}
	r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("model_spec.attn_backend = %s: %s attention over packed documents is estimated as SDPA's fused kernel", backend, backend))
	r.notModelled("model_spec.tp_gemm_backend", "the dist_gemm fused TP collectives are estimated as plain TP")
	if b, _, _ := r.str("model_spec.moe_comm_backend"); b != "" && b != "standard" {
		r.notModelled("model_spec.moe_comm_backend", "estimated with the standard all-to-all's buffers")
	} else {
		r.ignore("model_spec.moe_comm_backend")
	}
	if n, _, err := r.int("model_spec.num_mtp_layers", 0, 1<<10); err != nil {
		return "", err
	} else if n > 0 {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("model_spec.num_mtp_layers = %d: multi-token-prediction layers are not trained by the estimate", n))
	}
	r.notModelled("model_spec.non_blocking_capacity_factor", "HybridEP's capacity buffers are not modelled")
	return id, nil
}

// titanPyTraining reads [training]: the micro-batch's tokens, the dtypes.
func titanPyTraining(r *configReader, t *vram.Training) error {
	tokens, ctx := 16384, 2048 // CFG:37, CFG:51
	if err := r.intInto(&tokens, "training.num_tokens_per_microbatch_per_dp_rank", 1, vram.MaxTokens); err != nil {
		return err
	}
	if err := r.intInto(&ctx, "training.max_context_length", 1, vram.MaxTokens); err != nil {
		return err
	}
	if tokens%ctx == 0 {
		t.MicroBatch, t.SeqLen = tokens/ctx, ctx
	} else {
		t.MicroBatch, t.SeqLen = 1, tokens
		r.imp.Assumed = append(r.imp.Assumed, fmt.Sprintf("%d tokens are not whole rows of %d: one row of %d", tokens, ctx, tokens))
	}
	r.mapped("num_tokens_per_microbatch_per_dp_rank %d, max_context_length %d (packed) → micro_batch %d × seq_len %d", tokens, ctx, t.MicroBatch, t.SeqLen)
	if err := titanDTypes(r, t); err != nil {
		return err
	}
	return titanCompile(r, t)
}

// titanPyCheckpointing reads activation_checkpoint: SelectiveAC.Config
// by default (TR:108-110), op-level (AC:209-287); FullAC recomputes each
// block; None is none. A CLI override names the tyro subcommand.
func titanPyCheckpointing(r *configReader, t *vram.Training) error {
	cls := "SelectiveAC.Config"
	if v, present := r.flat["activation_checkpoint"]; present {
		r.used["activation_checkpoint"] = true
		switch s := v.(type) {
		case nil:
			cls = "None"
		case string: // activation_checkpoint=full, tyro's subcommand
			cls = map[string]string{"selective": "SelectiveAC.Config", "full": "FullAC.Config", "none": "None", "memory-budget": "MemoryBudgetAC.Config"}[s]
			if cls == "" {
				return fmt.Errorf("activation_checkpoint %q: want selective, full, memory-budget or none", s)
			}
		}
	} else if c, ok, _ := r.str("activation_checkpoint._class"); ok {
		cls = c
	}
	switch cls {
	case "SelectiveAC.Config":
		t.Checkpointing, t.SelectiveACOption = vram.CheckpointSelective, "op"
	case "FullAC.Config":
		t.Checkpointing, t.SelectiveACOption = vram.CheckpointFull, ""
	case "None":
		t.Checkpointing, t.SelectiveACOption = vram.CheckpointNone, ""
	case "MemoryBudgetAC.Config":
		return fmt.Errorf("activation_checkpoint MemoryBudgetAC: the compiler's partitioner chooses what to recompute under activation_memory_budget; it is not modelled: use FullAC, SelectiveAC or None")
	default:
		return fmt.Errorf("activation_checkpoint %s: not one of torchtitan's FullAC, SelectiveAC, MemoryBudgetAC or None", cls)
	}
	r.ignorePrefix("activation_checkpoint.")
	r.mapped("activation_checkpoint %s → %s%s", cls, t.Checkpointing, map[bool]string{true: " (op-level: every other matmul's output and the attention kernels' kept)"}[t.SelectiveACOption == "op"])
	return nil
}

// titanPyLoss reads loss: ChunkedLossWrapper (every shipped config's)
// runs the output projection and the loss chunk by chunk, each chunk's
// backward at once (LOSS:542-711, num_chunks 8); CrossEntropyLoss alone
// upcasts the whole logits (LOSS:57-62).
func titanPyLoss(r *configReader, t *vram.Training) error {
	cls, _, _ := r.str("loss._class")
	inner := "loss.loss_fn._class"
	switch cls {
	case "ChunkedLossWrapper.Config":
		t.Loss, t.LossChunks = "chunked_head", 8
		if err := r.intInto(&t.LossChunks, "loss.num_chunks", 1, 1<<16); err != nil {
			return err
		}
		r.mapped("ChunkedLossWrapper, %d chunks → loss chunked_head (the head and loss per chunk, each chunk's backward at once)", t.LossChunks)
	case "CrossEntropyLoss.Config":
		t.Loss, inner = "", "loss._class"
		r.mapped("CrossEntropyLoss → cross_entropy (the logits upcast to fp32)")
	default:
		return fmt.Errorf("loss %s: the importer reads ChunkedLossWrapper and CrossEntropyLoss", orDefault(cls, "(none: Trainer.Config's BaseLoss)"))
	}
	if c, _, _ := r.str(inner); c != "" && c != "CrossEntropyLoss.Config" {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("%s = %s: estimated as cross-entropy", inner, c))
	}
	r.ignorePrefix("loss.")
	return nil
}

// titanPyOptimizer reads optimizer: default_adamw (AdamW, optimizer.py:378-399)
// and the container's implementation (titanOptimizerImpl).
func titanPyOptimizer(r *configReader, t *vram.Training) error {
	if cls, _, _ := r.str("optimizer._class"); cls != "" && cls != "default_adamw" && cls != "OptimizersContainer.Config" {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("optimizer = %s(…): estimated with AdamW's states", cls))
	}
	if name, _, _ := r.str("optimizer.optimizer_name"); name != "" && name != "AdamW" && name != "Adam" {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("optimizer.optimizer_name = %s: estimated with AdamW's states", name))
	}
	impl, err := titanOptimizerImpl(r, t)
	if err != nil {
		return err
	}
	r.mapped("optimizer AdamW, %s", impl)
	r.ignorePrefix("optimizer.")
	return nil
}

// titanPyPipeline reads what depends on the degrees: the pipeline's
// micro-batches (num_pp_microbatches, CFG:232: each one a micro-batch of
// the configured tokens), gradient accumulation (TR:409-428), async TP
// (compile.enable_async_tensor_parallel, CFG:293-313) and the CUDA graphs
// (disable_cuda_graphs false, CFG:75), refused where torchtitan refuses them.
func titanPyPipeline(r *configReader, t *vram.Training) error {
	p := &t.Parallel
	n := 1
	if err := r.intInto(&n, "parallelism.num_pp_microbatches", 1, vram.MaxTokens); err != nil {
		return err
	}
	if p.PP > 1 {
		t.MicroBatch *= n
		p.PPMicrobatches = n
		r.mapped("num_pp_microbatches %d → %d pipeline micro-batches of %d rows", n, n, t.MicroBatch/n)
	}
	step := -1
	if err := r.intInto(&step, "training.num_tokens_per_train_step", -1, 1<<62); err != nil {
		return err
	}
	if perStep := t.MicroBatch * t.SeqLen * max(1, p.DP); step > 0 {
		if step%perStep != 0 {
			return fmt.Errorf("training.num_tokens_per_train_step %d is not a multiple of %d (the tokens of one micro-batch on every data-parallel rank, trainer.py:409-428)", step, perStep)
		}
		t.GradAccum = step / perStep
		r.mapped("num_tokens_per_train_step %d → gradient accumulation %d", step, t.GradAccum)
	}
	if a, _, err := r.bool("compile.enable_async_tensor_parallel"); err != nil {
		return err
	} else if a {
		p.AsyncTP = true
		r.mapped("compile.enable_async_tensor_parallel → async TP")
	}
	if p.DP <= 1 && p.FSDP == "" {
		// fully_shard wraps the model on a one-rank mesh too
		// (llama3/parallelize.py:57-78): each block's weights are cast
		// to bf16 copies as they run, as under sharding.
		p.FSDP, p.ZeRO, p.FSDPVersion, p.DP, p.ShardDegree = "full_shard", 3, 2, 1, 1
		r.mapped("FSDP2 at shard degree 1 (torchtitan wraps the model at any degree) → fsdp full_shard over 1 rank")
	}
	if sp, ok, err := r.bool("parallelism.enable_sequence_parallel"); err != nil {
		return err
	} else if ok && !sp && p.TP > 1 {
		r.imp.NotModelled = append(r.imp.NotModelled, "parallelism.enable_sequence_parallel = false: torchtitan's TP is estimated with sequence parallelism")
	}
	return titanCUDAGraphs(r, t)
}

// titanCUDAGraphs: with CUDA graphs (the default) the step zeroes the
// gradients in place (zero_grad(set_to_none=False), trainer.py:845), so
// they stay allocated between steps; torchtitan refuses graphs with a
// pipeline or a CPU-syncing expert dispatcher (trainer.py:168-199).
func titanCUDAGraphs(r *configReader, t *vram.Training) error {
	off, _, err := r.bool("training.disable_cuda_graphs")
	if err != nil || off {
		return err
	}
	p := t.Parallel
	if p.PP > 1 {
		return fmt.Errorf("CUDA graphs do not support pipeline parallelism yet. Set --training.disable_cuda_graphs (torchtitan's own refusal, trainer.py:171-175)")
	}
	if b, _, _ := r.str("model_spec.moe_comm_backend"); p.EP > 1 && b != "minimal_async_ep" && !(b == "hybridep" && r.has("model_spec.non_blocking_capacity_factor")) {
		return fmt.Errorf("CUDA graphs support only expert parallel token dispatcher configurations without CPU synchronization. Set HybridEP non_blocking_capacity_factor, or use MinimalAsyncEP, or set --training.disable_cuda_graphs (torchtitan's own refusal, trainer.py:184-197)")
	}
	t.KeepGrads = true
	r.mapped("CUDA graphs on (disable_cuda_graphs false) → keep_grads (gradients zeroed in place, never freed)")
	r.imp.NotModelled = append(r.imp.NotModelled, "training.disable_cuda_graphs = false: the CUDA graph's private memory pool (distributed/cudagraph.py:126-158) is not modelled")
	return nil
}

// titanPyConverters reads model_registry's converters: Float8Linear
// (rowwise by default at this commit, quantization/float8.py:56-72) and
// LoRA (components/lora.py:154-164: rank 8, alpha 16, every linear, the
// base frozen, adapters in training.dtype); MX and NVFP4 formats and the
// float8 grouped experts are not modelled.
func titanPyConverters(r *configReader, t *vram.Training) error {
	v, _ := r.get("model_spec.converters")
	list, _ := v.([]any)
	for _, c := range list {
		m, _ := c.(map[string]any)
		cls, _ := m["_class"].(string)
		switch cls {
		case "Float8LinearConverter.Config":
			if err := titanPyFloat8(r, t, m); err != nil {
				return err
			}
		case "LoRAConverter.Config":
			if err := titanPyLoRA(r, t, m); err != nil {
				return err
			}
		default:
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("model_spec.converters %s: estimated in the compute dtype", orDefault(cls, fmt.Sprint(c))))
		}
	}
	return nil
}

func titanPyFloat8(r *configReader, t *vram.Training, m map[string]any) error {
	t.Float8 = "rowwise"
	if rec, ok := m["recipe_name"].(string); ok && rec != "rowwise" {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("Float8LinearConverter recipe_name = %s: estimated as rowwise", rec))
	}
	filter, _ := m["filter_fqns"].([]any)
	keeps := false
	for _, f := range filter {
		keeps = keeps || f == "lm_head" || f == "output"
	}
	if !keeps {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("Float8LinearConverter filter_fqns = %v: the output projection is estimated in bf16, as [\"lm_head\"] keeps it", filter))
	}
	r.mapped("Float8LinearConverter → float8 rowwise")
	return nil
}

// titanLoRATargets maps torchtitan's module names to the engine's.
var titanLoRATargets = map[string][]string{"wq": {"q_proj"}, "wk": {"k_proj"}, "wv": {"v_proj"}, "wkv": {"k_proj", "v_proj"},
	"wqkv": {"q_proj", "k_proj", "v_proj"}, "wo": {"o_proj"}, "w1": {"gate_proj"}, "w3": {"up_proj"}, "w2": {"down_proj"},
	"lm_head": {"lm_head"}, "output": {"lm_head"}}

func titanPyLoRA(r *configReader, t *vram.Training, m map[string]any) error {
	l := &vram.LoRA{Rank: 8, Alpha: 16, DType: vram.FP32}
	if t.Precision == "bf16" {
		l.DType = vram.BF16 // adapters take training.dtype (trainer.py:356-360)
	}
	if n, ok := m["rank"].(int64); ok {
		if n < 1 || n > 1<<16 {
			return fmt.Errorf("LoRAConverter rank = %d: want a whole number in [1, 65536]", n)
		}
		l.Rank = int(n)
	}
	if a, ok := pyconf.Float(m["alpha"]); ok {
		l.Alpha = a
	}
	targets, _ := m["target_modules"].([]any)
	if len(targets) == 0 {
		l.Targets = []string{"all_linear"} // None: every Linear (lora.py:154-164)
	}
	for _, tg := range targets {
		names, ok := titanLoRATargets[fmt.Sprint(tg)]
		if !ok {
			return fmt.Errorf("LoRAConverter target_modules %v: %q is not one of torchtitan's wq, wk, wv, wkv, wqkv, wo, w1, w2, w3, lm_head", targets, tg)
		}
		l.Targets = append(l.Targets, names...)
	}
	t.Trainable, t.LoRA = "lora", l
	r.mapped("LoRAConverter rank %d, alpha %g, %v → LoRA on %s", l.Rank, l.Alpha, orDefault(fmt.Sprint(targets), "every Linear"), strings.Join(l.Targets, ", "))
	return nil
}
