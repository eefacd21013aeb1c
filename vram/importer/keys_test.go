package importer

import (
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// TestKeysTorchtitanPy: a plan from a torchtitan Python config is
// advised in the overrides its CLI takes (tyro: --section.key value, the
// checkpointing class a subcommand), in tokens per micro-batch.
func TestKeysTorchtitanPy(t *testing.T) {
	mb := vram.Training{MicroBatch: 2, GradAccum: 4, SeqLen: 4096, Framework: vram.FrameworkTorchtitan, Parallel: vram.Parallel{DP: 16, TP: 2}}
	for kind, want := range map[vram.AdviceKind]string{
		vram.AdviceFullCheckpointing: "activation-checkpoint:full",
		vram.AdviceSmallerMicroBatch: "--training.num_tokens_per_microbatch_per_dp_rank 8192 (keep --training.num_tokens_per_train_step: it accumulates 4 steps)",
		vram.AdviceShorterSequences:  "--training.max_context_length 4096 --training.num_tokens_per_microbatch_per_dp_rank 8192",
		vram.AdviceMoreGPUs:          "--parallelism.data_parallel_shard_degree 16 (NGPU=32 ./run_train.sh)",
		vram.AdviceLoRA:              "converters=[LoRAConverter.Config(rank=16)] in the config function's model_registry(…)",
		vram.AdviceQLoRA:             "",
	} {
		if got := Keys(vram.Advice{Kind: kind, Plan: mb}, KindTorchtitanPy); !strings.HasPrefix(got, want) || (got == "") != (want == "") {
			t.Errorf("%v: %q, want %q", kind, got, want)
		}
	}
}

// TestKeysCombination: a Qwen3-8B QLoRA axolotl config no single change
// makes fit on an RTX 4090 is advised a combination that fits, each of its
// changes said in axolotl's keys.
func TestKeysCombination(t *testing.T) {
	axolotl := "base_model: Qwen/Qwen3-8B\nload_in_4bit: true\nadapter: qlora\nlora_r: 32\nlora_target_linear: true\n" +
		"sequence_len: 8192\nmicro_batch_size: 4\ngradient_accumulation_steps: 2\nbf16: true\noptimizer: adamw_torch\nflash_attention: true\n"
	imp, err := Import("qlora.yml", []byte(axolotl), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := vram.Budget{GPU: mustGPU(t, "RTX-4090"), Headroom: vram.DefaultHeadroom}
	as, err := vram.Advise(*imp.Plan.Training, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if len(a.Kinds) < 2 && a.Fits {
			t.Fatalf("%q fits alone: not a case for combinations", a.Change)
		}
	}
	first := as[0]
	if !first.Fits || len(first.Kinds) < 2 {
		t.Fatalf("first advice %q (fits %v, %d changes), want a combination that fits", first.Change, first.Fits, len(first.Kinds))
	}
	if keys := Keys(first, KindAxolotl); keys == "" || strings.Count(keys, "; ") != len(first.Kinds)-1 {
		t.Errorf("%q said as %q: want each change in axolotl's keys", first.Change, keys)
	}
}

// TestIsPlan: a plan of any kind is a plan, a trainer's config is not.
func TestIsPlan(t *testing.T) {
	for data, want := range map[string]bool{
		`{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "grpo", "framework": "trl", "prompt_len": 128, "completion_len": 256}}`: true,
		`{"model": "llama-3-8b", "train": {"seq_len": 4096, "micro_batch": 1}}`:                                                           true,
		`{"model_name_or_path": "Qwen/Qwen2.5-0.5B", "per_device_train_batch_size": 2}`:                                                   false,
	} {
		if got := IsPlan([]byte(data)); got != want {
			t.Errorf("IsPlan(%s) = %v, want %v", data, got, want)
		}
	}
}

// TestTRLServerPlacement: with vLLM on GPUs of its own the trainer's GPUs
// hold no engine, and TRL's command line says so (vllm_mode server).
func TestTRLServerPlacement(t *testing.T) {
	cmd := "trl grpo --model_name_or_path Qwen/Qwen2.5-0.5B --use_vllm --vllm_mode server --num_generations 4 --max_completion_length 256 --beta 0.04"
	imp, err := Import("grpo.sh", []byte(cmd), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pt := imp.Plan.PostTraining
	if pt == nil || pt.Rollout.Placement != "separate" || pt.Generations != 4 || pt.CompletionLen != 256 || pt.Reference != "model" {
		t.Fatalf("plan %+v", pt)
	}
	e, err := pt.Estimate(mustGPU(t, "H100-80GB"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range e.Phases {
		if p.Engine != 0 {
			t.Errorf("%s: engine %v on the trainer's GPU", p.Name, p.Engine)
		}
	}
	if e.VLLM != nil || !strings.Contains(strings.Join(e.Notes, " "), "serving plan") {
		t.Errorf("carve %v, notes %q", e.VLLM, e.Notes)
	}
}

func mustGPU(t *testing.T, name string) vram.GPU {
	t.Helper()
	g, err := vram.LookupGPU(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
