package vram

import (
	"fmt"
	"sort"
	"strings"
)

// AdviceKind is what an Advice changes. Advise sets it; Flags says the
// change in a framework's own settings, for a launch gate that prints
// what to pass instead of prose.
type AdviceKind uint8

const (
	AdviceUnknown AdviceKind = iota
	AdviceSelective
	AdviceFullCheckpointing
	AdviceFusedAttention
	AdviceFusedLoss
	AdviceFusedOptimizer
	Advice8BitAdamW
	AdviceAdafactor
	AdviceAutocast
	AdvicePureBF16
	AdviceLoRA
	AdviceQLoRA
	AdviceZeRO
	AdviceMoreGPUs
	AdviceOffloadOptimizer
	AdviceSmallerMicroBatch
	AdviceShorterSequences
)

var adviceNames = [...]string{"unknown", "selective_recompute", "full_checkpointing", "fused_attention", "fused_loss",
	"fused_optimizer", "adamw_8bit", "adafactor", "autocast_bf16", "pure_bf16", "lora", "qlora", "zero_stage",
	"more_gpus", "offload_optimizer", "smaller_micro_batch", "shorter_sequences"}

func (k AdviceKind) String() string {
	if int(k) < len(adviceNames) {
		return adviceNames[k]
	}
	return fmt.Sprintf("advice(%d)", k)
}

// MarshalText writes the kind's name in JSON.
func (k AdviceKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Flags says the advice as the plan's framework takes it: the command-line
// flags of the HF Trainer's TrainingArguments (transformers 4.57.6
// training_args.py; TRL's for adapters), torchtune's recipe overrides
// (key=value, as `tune run` takes them), torchtitan's job config
// (--section.key, torchtitan/config/job_config.py) or DeepSpeed's config
// keys. Empty when the framework has no setting for it.
// A combination's changes are said one after another, "; " between; it is
// empty when the framework has no setting for one of them.
func (a Advice) Flags(framework Framework) string {
	return a.SayEach(func(k AdviceKind) string { return frameworkFlags(framework, k, a.Plan) })
}

// SayEach says every change of the advice with say, joined; empty when one
// has no words.
func (a Advice) SayEach(say func(AdviceKind) string) string {
	var out []string
	for _, k := range a.changes() {
		s := say(k)
		if s == "" {
			return ""
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

func frameworkFlags(framework Framework, k AdviceKind, t Training) string {
	switch framework {
	case FrameworkHFTrainer, FrameworkAccelerate, "":
		return hfTrainerFlags(k, t)
	case FrameworkTorchtune:
		return torchtuneFlags(k, t)
	case FrameworkTorchtitan:
		return torchtitanFlags(k, t)
	case FrameworkDeepSpeed:
		if s := deepspeedKeys(k, t); s != "" {
			return s
		}
		return hfTrainerFlags(k, t)
	}
	return ""
}

// hfTrainerFlags are TrainingArguments' flags (--name value).
func hfTrainerFlags(k AdviceKind, t Training) string {
	switch k {
	case AdviceFullCheckpointing:
		return "--gradient_checkpointing true"
	case AdviceFusedAttention:
		return `--attn_implementation sdpa (TRL's model argument; from_pretrained(attn_implementation="sdpa") in code)`
	case AdviceFusedLoss:
		return "--use_liger_kernel true"
	case AdviceFusedOptimizer:
		return "--optim adamw_torch_fused"
	case Advice8BitAdamW:
		return "--optim adamw_bnb_8bit"
	case AdviceAdafactor:
		return "--optim adafactor"
	case AdviceAutocast:
		return "--bf16 true"
	case AdvicePureBF16:
		return `--torch_dtype bfloat16 (TRL's model argument; from_pretrained(torch_dtype=torch.bfloat16) in code)`
	case AdviceLoRA:
		return "--use_peft --lora_r 16 --lora_target_modules all-linear (TRL)"
	case AdviceQLoRA:
		return "--use_peft --lora_r 16 --lora_target_modules all-linear --load_in_4bit --bnb_4bit_quant_type nf4 --use_bnb_nested_quant (TRL)"
	case AdviceZeRO:
		return fmt.Sprintf(`--deepspeed ds_config.json with "zero_optimization": {"stage": %d}`, t.Parallel.ZeRO)
	case AdviceMoreGPUs:
		return fmt.Sprintf(`torchrun --nproc_per_node %d … --fsdp "full_shard auto_wrap"`, t.Parallel.DP)
	case AdviceOffloadOptimizer:
		return `--deepspeed ds_config.json with "zero_optimization": {"offload_optimizer": {"device": "cpu"}}`
	case AdviceSmallerMicroBatch:
		return fmt.Sprintf("--per_device_train_batch_size %d --gradient_accumulation_steps %d", t.MicroBatch, max(1, t.GradAccum))
	case AdviceShorterSequences:
		return fmt.Sprintf("--max_length %d (TRL's SFTConfig; truncate your data to it otherwise)", t.SeqLen)
	}
	return ""
}

// torchtuneFlags are recipe config overrides (torchtune's recipes:
// enable_activation_checkpointing, batch_size, gradient_accumulation_steps,
// tokenizer.max_seq_len, optimizer._component_, fsdp_cpu_offload, dtype).
func torchtuneFlags(k AdviceKind, t Training) string {
	switch k {
	case AdviceFullCheckpointing:
		return "enable_activation_checkpointing=True"
	case AdviceFusedLoss:
		return "loss._component_=torchtune.modules.loss.CEWithChunkedOutputLoss"
	case AdviceFusedOptimizer:
		return "optimizer.fused=True"
	case Advice8BitAdamW:
		return "optimizer._component_=bitsandbytes.optim.PagedAdamW8bit"
	case AdviceAutocast, AdvicePureBF16:
		return "dtype=bf16"
	case AdviceLoRA:
		return "tune run lora_finetune_single_device (or lora_finetune_distributed) with the model's lora_* builder, lora_rank=16"
	case AdviceQLoRA:
		return "tune run lora_finetune_single_device with the model's qlora_* builder, lora_rank=16"
	case AdviceMoreGPUs:
		recipe := "full_finetune_distributed"
		if t.Trainable == "lora" {
			recipe = "lora_finetune_distributed"
		}
		return fmt.Sprintf("tune run --nproc_per_node %d %s", t.Parallel.DP, recipe)
	case AdviceOffloadOptimizer:
		return "fsdp_cpu_offload=True (the distributed recipes; parameters and gradients go to the CPU too)"
	case AdviceSmallerMicroBatch:
		return fmt.Sprintf("batch_size=%d gradient_accumulation_steps=%d", t.MicroBatch, max(1, t.GradAccum))
	case AdviceShorterSequences:
		return fmt.Sprintf("tokenizer.max_seq_len=%d", t.SeqLen)
	}
	return ""
}

// torchtitanFlags are job-config overrides (--section.key value).
func torchtitanFlags(k AdviceKind, t Training) string {
	switch k {
	case AdviceSelective:
		return "--activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option " + orDefault(t.SelectiveACOption, torchtitanACDefault)
	case AdviceFullCheckpointing:
		return "--activation_checkpoint.mode full"
	case AdviceFusedOptimizer:
		return "--optimizer.implementation fused"
	case AdvicePureBF16:
		return "--training.dtype bfloat16"
	case AdviceMoreGPUs:
		return fmt.Sprintf("--parallelism.data_parallel_shard_degree %d (torchrun --nproc_per_node %d)", t.Parallel.DP, t.Parallel.GPUs())
	case AdviceOffloadOptimizer:
		return "--training.enable_cpu_offload (FSDP2's CPUOffloadPolicy: parameters and gradients too)"
	case AdviceSmallerMicroBatch:
		return fmt.Sprintf("--training.local_batch_size %d (keep --training.global_batch_size: it accumulates %d steps)", t.MicroBatch, max(1, t.GradAccum))
	case AdviceShorterSequences:
		return fmt.Sprintf("--training.seq_len %d", t.SeqLen)
	}
	return ""
}

// deepspeedKeys are DeepSpeed config keys (DeepSpeedZeroConfig).
func deepspeedKeys(k AdviceKind, t Training) string {
	switch k {
	case AdviceZeRO:
		return fmt.Sprintf(`"zero_optimization": {"stage": %d}`, t.Parallel.ZeRO)
	case AdviceOffloadOptimizer:
		return `"zero_optimization": {"offload_optimizer": {"device": "cpu"}}`
	case AdviceSmallerMicroBatch:
		return fmt.Sprintf(`"train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": %d`, t.MicroBatch, max(1, t.GradAccum))
	}
	return ""
}

// ServingAdvice is one change to a vLLM launch, or a combination, that
// would make it start and hold its requests, in vLLM's flags.
type ServingAdvice struct {
	Flag    string    `json:"flag"`   // e.g. "--max-model-len 98304"; a combination's flags one after another
	Why     string    `json:"why"`    // what it changes
	Carve   VLLMCarve `json:"carve"`  // the launch with the change
	Starts  bool      `json:"starts"` // vLLM would start with it
	Price   int       `json:"price"`  // what it costs the serving (summed)
	members []string  // the single changes combined
}

// servingCand is one change Advise tries on a launch.
type servingCand struct {
	flag, why, group string
	price            int
	members          []string
	edit             func(*VLLM)
}

// Advise lists changes to the launch (vLLM's own remedies: a shorter
// --max-model-len, where its error estimates one; an fp8 KV cache; a
// higher --gpu-memory-utilization; fewer --max-num-seqs, which shrinks the
// profile's sampler warm-up; more tensor-parallel GPUs), each carved on g;
// where none starts alone, two and then three of different kinds at once.
// Those that start come first, the cheapest for the serving first.
func (v VLLM) Advise(in Inference, g GPU) ([]ServingAdvice, error) {
	base, err := v.Carve(in, g)
	if err != nil {
		return nil, err
	}
	cands := v.servingCandidates(in, base)
	out := v.tryServing(in, g, cands, false)
	starting := func() bool {
		for _, a := range out {
			if a.Starts {
				return true
			}
		}
		return false
	}
	for n := 2; n <= 3 && !starting(); n++ {
		out = append(out, v.tryServing(in, g, servingCombinations(cands, n), true)...)
	}
	out = minimal(out, func(a ServingAdvice) ([]string, bool) { return a.members, a.Starts })
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Starts != out[j].Starts {
			return out[i].Starts
		}
		return out[i].Starts && out[i].Price < out[j].Price
	})
	return out, nil
}

// servingCandidates are the single changes that apply to the launch.
func (v VLLM) servingCandidates(in Inference, base VLLMCarve) []servingCand {
	var cs []servingCand
	if n := base.KVCache.EstimatedMaxModelLen; !base.KVCache.Fits && n > 0 {
		cs = append(cs, servingCand{fmt.Sprintf("--max-model-len %d", n), "the longest request the cache holds (vLLM's own estimate)", "max_model_len", 6, nil, func(x *VLLM) { x.MaxModelLen = n }})
	}
	if x := v.KVCacheDType; x == DTypeUnset || x == BF16 || x == FP16 {
		cs = append(cs, servingCand{"--kv-cache-dtype fp8", "halves the KV cache's bytes per token", "kv_dtype", 2, nil, func(x *VLLM) { x.KVCacheDType = FP8E4M3 }})
	}
	if u := v.GPUMemoryUtilization; u < 0.95 && !(u == 0 && base.ExtensibleKVCache) { // 0.34's default, 1.0, is above it
		cs = append(cs, servingCand{"--gpu-memory-utilization 0.95", "gives vLLM more of the card (leave room for other processes)", "util", 1, nil, func(x *VLLM) { x.GPUMemoryUtilization = 0.95 }})
	}
	if base.ProfileSeqs > 64 {
		n := base.ProfileSeqs / 4
		cs = append(cs, servingCand{fmt.Sprintf("--max-num-seqs %d", n), "a smaller profile-run sampler warm-up (and fewer concurrent requests)", "max_num_seqs", 3, nil, func(x *VLLM) { x.MaxNumSeqs = n }})
	}
	tp := max(1, v.TP)
	m := in.Model.Normalize()
	for _, more := range []struct {
		times, price int
		words        string
	}{{2, 8, "twice"}, {4, 9, "four times"}, {8, 10, "eight times"}} {
		if k := more.times * tp; m.Heads%k == 0 && k <= 64 {
			cs = append(cs, servingCand{fmt.Sprintf("--tensor-parallel-size %d", k), "shards the weights and the KV heads over " + more.words + " the GPUs", "tp", more.price, nil, func(x *VLLM) { x.TP = k }})
		}
	}
	return cs
}

// servingCombinations are the n-change combinations of different kinds.
func servingCombinations(cands []servingCand, n int) []servingCand {
	var out []servingCand
	for _, idx := range combinationsOf(len(cands), n, func(i, j int) bool { return cands[i].group == cands[j].group }) {
		var c servingCand
		var flags, whys []string
		var edits []func(*VLLM)
		for _, i := range idx {
			x := cands[i]
			flags, whys, edits = append(flags, x.flag), append(whys, x.why), append(edits, x.edit)
			c.price += x.price
			c.members = append(c.members, x.flag)
		}
		c.flag, c.why = strings.Join(flags, " "), strings.Join(whys, "; ")
		c.edit = func(v *VLLM) {
			for _, e := range edits {
				e(v)
			}
		}
		out = append(out, c)
	}
	return out
}

// tryServing carves each candidate (with onlyStarts, keeping those that
// start).
func (v VLLM) tryServing(in Inference, g GPU, cands []servingCand, onlyStarts bool) []ServingAdvice {
	tried := make([]*ServingAdvice, len(cands))
	forEach(len(cands), func(i int) {
		nv := v
		cands[i].edit(&nv)
		carve, err := nv.Carve(in, g)
		if err != nil || onlyStarts && !carve.Starts {
			return
		}
		members := cands[i].members
		if members == nil {
			members = []string{cands[i].flag}
		}
		tried[i] = &ServingAdvice{Flag: cands[i].flag, Why: cands[i].why, Carve: carve, Starts: carve.Starts, Price: cands[i].price, members: members}
	})
	var out []ServingAdvice
	for _, a := range tried {
		if a != nil {
			out = append(out, *a)
		}
	}
	return out
}
