package vram

import (
	"os"
	"strings"
	"testing"
)

// TestFrameworkCheckpointWords: grad_checkpointing means what the plan's
// framework means by it — torchtitan's "selective" with its
// selective_ac_option ("2" by default: every second block, counted from 1;
// "op": op-level SAC; N: every N-th block), Megatron-LM's the core
// attention's recompute — and a framework without the word refuses it,
// listing its own.
func TestFrameworkCheckpointWords(t *testing.T) {
	base := Training{Model: MustPreset("llama-3.2-1b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16"}
	resolve := func(edit func(*Training)) (resolved, error) {
		tr := base
		edit(&tr)
		return tr.resolve()
	}
	r, err := resolve(func(t *Training) { t.Framework, t.Checkpointing = "torchtitan", "selective" })
	if err != nil {
		t.Fatal(err)
	}
	for l := 0; l < r.m.Layers; l++ {
		if r.checkpointed(l) != (l%2 == 1) {
			t.Errorf("torchtitan selective (default \"2\"): block %d checkpointed %v (torchtitan wraps the 2nd, 4th, … block)", l, r.checkpointed(l))
		}
	}
	if n := strings.Join(r.notes, " "); !strings.Contains(n, `every second block wrapped in a full checkpoint (selective_ac_option "2" (torchtitan's default selective_ac_option))`) {
		t.Errorf("notes %q", r.notes)
	}
	r, _ = resolve(func(t *Training) { t.Framework, t.Checkpointing, t.SelectiveACOption = "torchtitan", "selective", "3" })
	for l := 0; l < r.m.Layers; l++ {
		if r.checkpointed(l) != ((l+1)%3 == 0) {
			t.Errorf("selective_ac_option 3: block %d checkpointed %v", l, r.checkpointed(l))
		}
	}
	est := func(edit func(*Training)) TrainingEstimate {
		tr := base
		edit(&tr)
		e, err := tr.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	op := est(func(t *Training) { t.Framework, t.Checkpointing, t.SelectiveACOption = "torchtitan", "selective", "op" })
	if op.Peak != est(func(t *Training) { t.Framework, t.Checkpointing = "torchtitan", "op" }).Peak || !strings.Contains(strings.Join(op.Notes, " "), "op-level selective activation checkpointing") {
		t.Errorf("selective_ac_option op is op-level SAC: %v, notes %q", op.Peak.Total(), op.Notes)
	}
	if mg := est(func(t *Training) { t.Framework, t.Checkpointing = "megatron", "selective" }); !strings.Contains(strings.Join(mg.Notes, " "), "--recompute-granularity selective") {
		t.Errorf("megatron selective notes %q", mg.Notes)
	}
	for _, c := range []struct {
		edit func(*Training)
		want string
	}{
		{func(t *Training) { t.Framework, t.Checkpointing = "hf_trainer", "selective" }, `grad_checkpointing "selective": hf_trainer has no such activation checkpointing; its words are none, full`},
		{func(t *Training) { t.Framework, t.Checkpointing = "deepspeed", "op" }, "deepspeed has no such"},
		{func(t *Training) { t.Framework, t.Checkpointing = "torchtitan", "memory_budget" }, "not modelled"},
		{func(t *Training) { t.Checkpointing, t.SelectiveACOption = "selective", "op" }, "selective_ac_option applies to torchtitan"},
		{func(t *Training) {
			t.Framework, t.Checkpointing, t.SelectiveACOption = "torchtitan", "selective", "every"
		}, `selective_ac_option "every": torchtitan takes "op" or a block frequency`},
		{func(t *Training) { t.Framework, t.Checkpointing, t.SelectiveACOption = "torchtitan", "full", "op" }, "selective_ac_option applies"},
	} {
		if _, err := resolve(c.edit); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}

// TestLibraryRefusesAttention: an attention implementation the pinned
// transformers refuses by name (T5 and GPT-J have no SDPA) is an error
// with its reason; unset, the plan runs what transformers picks.
func TestLibraryRefusesAttention(t *testing.T) {
	for _, preset := range []string{"flan-t5-base", "gpt-j-6b"} {
		tr := Training{Model: MustPreset(preset), SeqLen: 128, MicroBatch: 1, Attention: "sdpa"}
		if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), "does not support an attention implementation through torch.nn.functional.scaled_dot_product_attention") {
			t.Errorf("%s with sdpa: %v", preset, err)
		}
		tr.Attention = ""
		if e, err := tr.Estimate(); err != nil || !strings.Contains(strings.Join(e.Notes, " "), "runs eager") {
			t.Errorf("%s, attention unset: %v, %q", preset, err, e.Notes)
		}
	}
}

// TestFrameworkWordsInReadme: vram/README.md's table of the words each framework's
// plans accept lists exactly checkpointWords.
func TestFrameworkWordsInReadme(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) == 5 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
		}
	}
	for fw, words := range checkpointWords {
		var want []string
		for _, w := range words {
			want = append(want, "`"+string(w)+"`")
		}
		if got := rows[string(fw)]; got != strings.Join(want, ", ") {
			t.Errorf("vram/README.md lists %s's grad_checkpointing words as %q, the engine's are %q", fw, got, strings.Join(want, ", "))
		}
	}
}
