package vram

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The words a plan's settings take are its framework's: a torchtitan
// plan's grad_checkpointing "selective" is torchtitan's selective
// activation checkpointing (with its selective_ac_option), a Megatron-LM
// plan's is --recompute-granularity selective, and a framework without
// the word refuses it, listing its own. Each word is resolved once, into
// the engine's own setting, and the estimate's notes say what it became.

// checkpointWords are the grad_checkpointing words each framework's
// configs use, with what each means there.
var checkpointWords = map[Framework][]Checkpointing{
	// The engine's own words: the hand-written loop can do any of them.
	FrameworkPlainPyTorch: {CheckpointNone, CheckpointFull, CheckpointSelective, CheckpointOp},
	// gradient_checkpointing=True checkpoints every decoder block
	// (modeling_utils.py gradient_checkpointing_enable).
	FrameworkHFTrainer:  {CheckpointNone, CheckpointFull},
	FrameworkAccelerate: {CheckpointNone, CheckpointFull},
	FrameworkDeepSpeed:  {CheckpointNone, CheckpointFull},
	FrameworkLitGPT:     {CheckpointNone, CheckpointFull},
	FrameworkTorchtune:  {CheckpointNone, CheckpointFull},
	// [activation_checkpoint] mode (torchtitan/config/job_config.py
	// ActivationCheckpoint: "selective", "full", "memory_budget", "none").
	FrameworkTorchtitan: {CheckpointNone, CheckpointFull, CheckpointSelective, CheckpointOp},
	// --recompute-granularity full | selective.
	FrameworkMegatron: {CheckpointNone, CheckpointFull, CheckpointSelective},
}

// torchtitanACDefault is torchtitan's selective_ac_option default: every
// second block (job_config.py ActivationCheckpoint, "2"; its example
// configs set "op").
const torchtitanACDefault = "2"

// resolveCheckpointWords turns the plan's grad_checkpointing word (and
// torchtitan's selective_ac_option) into the engine's setting, noting
// what it resolved to; a word the framework does not have is an error
// listing its words.
func (r *resolved) resolveCheckpointWords(t Training) error {
	word := orDefault(t.Checkpointing, "none")
	words := checkpointWords[r.Framework]
	if word == "memory_budget" && r.Framework == FrameworkTorchtitan {
		return fmt.Errorf(`grad_checkpointing "memory_budget": torchtitan's memory-budget mode leaves what to recompute to the compiler's partitioner (activation_memory_budget); it is not modelled: use "full", "selective" (with selective_ac_option "op" or a block frequency) or "none"`)
	}
	if len(words) > 0 && !slices.Contains(words, word) {
		ws := make([]string, len(words))
		for i, w := range words {
			ws[i] = string(w)
		}
		return fmt.Errorf("grad_checkpointing %q: %s has no such activation checkpointing; its words are %s", word, r.Framework, strings.Join(ws, ", "))
	}
	if t.SelectiveACOption != "" && (r.Framework != FrameworkTorchtitan || word != "selective") {
		return fmt.Errorf(`selective_ac_option applies to torchtitan's grad_checkpointing "selective" (framework torchtitan), not %s's %q`, r.Framework, word)
	}
	switch {
	case r.Framework == FrameworkTorchtitan && word == "selective":
		return r.torchtitanSelective(orDefault(t.SelectiveACOption, torchtitanACDefault), t.SelectiveACOption == "")
	case r.Framework == FrameworkMegatron && word == "selective":
		r.notes = append(r.notes, `grad_checkpointing "selective": Megatron-LM's --recompute-granularity selective, recomputing the core attention (recompute_modules' default ["core_attn"]; Korthikanti et al. 2022 §4.2)`)
	case word == "selective":
		r.notes = append(r.notes, `grad_checkpointing "selective": the attention internals recomputed, as Megatron-LM's selective recompute (Korthikanti et al. 2022 §4.2)`)
	}
	return nil
}

// torchtitanSelective resolves torchtitan's selective activation
// checkpointing (torchtitan/distributed/activation_checkpoint.py):
// selective_ac_option "op" is op-level SAC (the outputs of every other
// matmul and of the attention kernels saved, the rest recomputed), an
// integer N wraps every N-th block in a full checkpoint, counting from 1
// (_apply_layer_sac: _layer_sac_count % N == 0; 0 and 1 wrap every block).
func (r *resolved) torchtitanSelective(option string, defaulted bool) error {
	why := ""
	if defaulted {
		why = " (torchtitan's default selective_ac_option)"
	}
	if option == "op" {
		r.Checkpointing = CheckpointOp
		r.notes = append(r.notes, `grad_checkpointing "selective": torchtitan's op-level selective activation checkpointing (selective_ac_option "op"): every other matmul's output and the attention kernels' outputs saved, the rest recomputed`)
		return nil
	}
	n, err := strconv.Atoi(option)
	if err != nil || n < 0 || n > r.m.Layers || strings.TrimSpace(option) != option {
		return fmt.Errorf(`selective_ac_option %q: torchtitan takes "op" or a block frequency, an integer in [0, layers = %d]`, option, r.m.Layers)
	}
	r.Checkpointing, r.CheckpointEvery, r.ckptOffset = "full", max(1, n), 1
	r.notes = append(r.notes, fmt.Sprintf(`grad_checkpointing "selective": torchtitan's layer-level selective checkpointing, every %s block wrapped in a full checkpoint (selective_ac_option %q%s); the others keep all their activations`, ordinal(max(1, n)), option, why))
	return nil
}

func ordinal(n int) string {
	switch n {
	case 1:
		return ""
	case 2:
		return "second"
	case 3:
		return "third"
	}
	return fmt.Sprintf("%d-th", n)
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
