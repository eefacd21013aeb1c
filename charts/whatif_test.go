package charts

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

func whatIfPlan() vram.Training {
	return vram.Training{Model: vram.MustPreset("gpt2"), SeqLen: 1024, MicroBatch: 4, Precision: "amp_bf16"}
}

func TestWhatIfControlsChangeThePlan(t *testing.T) {
	w, err := newWhatIf(whatIfPlan(), Controls{Models: []string{"llama-2-7b"}, GPUs: []string{"RTX-4090", "H100-80GB"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.models) != 2 {
		t.Fatalf("models offered %q, want the plan's own and llama-2-7b", w.models)
	}
	cs := w.controls()
	byField := map[string]control{}
	for _, c := range cs {
		byField[c.field] = c
	}
	if sl := byField["seq_len"]; sl.steps[sl.value] != 1024 {
		t.Fatalf("the sequence slider starts at step %d (%d tokens), want 1024", sl.value, sl.steps[sl.value])
	}
	// The micro-batch slider moves in powers of two (a 30 % drag is two
	// steps, not sixteen micro-batches), from the plan's own value.
	if mb := byField["micro_batch"]; !slices.Equal(mb.steps, []int{1, 2, 4, 8, 16, 32, 64}) || mb.steps[mb.value] != whatIfPlan().MicroBatch {
		t.Fatalf("micro-batch steps %v from step %d", mb.steps, mb.value)
	}
	if got := byField["precision"].value; precisions[got] != "amp_bf16" {
		t.Fatalf("the precision select starts at %q", precisions[got])
	}
	before := w.render()
	steps := []struct {
		field string
		v     int
		check func(vram.Training) bool
	}{
		{"micro_batch", 3, func(p vram.Training) bool { return p.MicroBatch == 8 }},
		{"seq_len", 2, func(p vram.Training) bool { return p.SeqLen == 512 }},
		{"grad_checkpointing", 3, func(p vram.Training) bool { return p.Checkpointing == "full" }},
		{"grad_checkpointing", 2, func(p vram.Training) bool { return p.Checkpointing == "op" }},
		{"optimizer", 1, func(p vram.Training) bool { return p.Optimizer == "adamw_8bit" }},
		{"precision", 3, func(p vram.Training) bool { return p.Precision == "bf16" }},
		{"model", 1, func(p vram.Training) bool { return p.Model.Name == vram.MustPreset("llama-2-7b").Name }},
		{"model", 0, func(p vram.Training) bool { return p.Model.Name == vram.MustPreset("gpt2").Name }},
	}
	for _, s := range steps {
		if err := w.set(byField[s.field], s.v); err != nil {
			t.Fatalf("%s=%d: %v", s.field, s.v, err)
		}
		if !s.check(w.plan) {
			t.Fatalf("%s=%d did not reach the plan: %+v", s.field, s.v, w.plan)
		}
	}
	if err := w.set(byField["gpu"], 1); err != nil || w.gpus[w.gpu].Name != "H100-80GB" {
		t.Fatalf("gpu select: %v, %s", err, w.gpus[w.gpu].Name)
	}
	after := w.render()
	if after == before || !strings.Contains(after, "verdict on H100-80GB</td><td style=\"text-align:left;padding:3px 10px;border-bottom:1px solid #eee\">fits") || !strings.Contains(after, "micro-batch 8") {
		t.Fatalf("the result did not follow the controls:\n%s", after)
	}
	est, err := w.plan.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(after, est.Peak.Total().Format(vram.GiB, 2)) {
		t.Fatalf("the result does not show the plan's allocated peak %v", est.Peak.Total())
	}
	if err := w.set(byField["optimizer"], 99); err == nil {
		t.Fatal("an out-of-range choice was accepted")
	}
}

// TestSteppedKeepsThePlansValue: a plan's value off the steps is one of
// them, in order, and the slider starts there.
func TestSteppedKeepsThePlansValue(t *testing.T) {
	for _, tc := range []struct {
		own  int
		want []int
	}{
		{4, []int{1, 2, 4, 8}},
		{6, []int{1, 2, 4, 6, 8}},
		{100, []int{1, 2, 4, 8, 100}},
	} {
		c := stepped("micro_batch", "micro-batch", []int{1, 2, 4, 8}, tc.own)
		if !slices.Equal(c.steps, tc.want) || c.steps[c.value] != tc.own {
			t.Errorf("own %d: steps %v from %d", tc.own, c.steps, c.value)
		}
	}
	w, err := newWhatIf(whatIfPlan(), Controls{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.set(stepped("micro_batch", "micro-batch", microBatches, 2), 7); err == nil {
		t.Error("a step past the slider's end was accepted")
	}
}

func TestWhatIfRejectsBadControls(t *testing.T) {
	for _, tc := range []struct {
		plan vram.Training
		c    Controls
		want string
	}{
		{whatIfPlan(), Controls{Models: []string{"llama-2-7bb"}}, `charts.Controls.Models: unknown model preset "llama-2-7bb"; did you mean`},
		{whatIfPlan(), Controls{GPUs: []string{"A100-90GB"}}, "charts.Controls.GPUs"},
		{whatIfPlan(), Controls{Headroom: 1}, "charts.Controls.Headroom"},
		{vram.Training{Model: vram.FromPreset("gtp2"), SeqLen: 8, MicroBatch: 1}, Controls{}, `did you mean "gpt2"`},
	} {
		if _, err := newWhatIf(tc.plan, tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.c, err, tc.want)
		}
	}
}

func TestWhatIfEscapesNames(t *testing.T) {
	p := whatIfPlan()
	p.Model.Name = `<img src=x onerror=alert(1)>`
	w, err := newWhatIf(p, Controls{})
	if err != nil {
		t.Fatal(err)
	}
	out := w.render()
	if strings.Contains(out, "<img") {
		t.Fatalf("a model name became markup:\n%s", out)
	}
	if !strings.Contains(out, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Fatalf("the model name is missing from the result")
	}
}

func TestWhatIfInvalidCombinationSaysWhy(t *testing.T) {
	w, err := newWhatIf(whatIfPlan(), Controls{})
	if err != nil {
		t.Fatal(err)
	}
	w.plan.MicroBatch = 0
	if out := w.render(); !strings.Contains(out, "not a valid plan") || !strings.Contains(out, "micro_batch") {
		t.Fatalf("an invalid plan rendered as:\n%s", out)
	}
}

// TestRemembered: where a what-if ended is what the cells below read,
// for the plan it started from; a second what-if from there continues the
// record; an edited base plan, another notebook or a damaged record
// leaves the plan as written.
func TestRemembered(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("JPY_SESSION_NAME", "/nb/20-what-if-playground.ipynb")
	base := whatIfPlan()
	if p, g := Remembered(base, "RTX-4090"); g != "RTX-4090" || p.MicroBatch != base.MicroBatch {
		t.Fatalf("nothing remembered yet, got %+v on %s", p, g)
	}
	session := func(start vram.Training, gpu string, moves map[string]int) (vram.Training, string) {
		w, err := newWhatIf(start, Controls{Models: []string{"llama-2-7b"}, GPUs: []string{gpu, "H100-80GB"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range w.controls() {
			if v, ok := moves[c.field]; ok {
				if err := w.set(c, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		remember(w.start, w.gpus[0].Name, w.changed, w.plan, w.gpus[w.gpu].Name)
		if code := w.asCode(); len(moves) > 0 && code == "// nothing changed" {
			t.Errorf("asCode after %v: %s", moves, code)
		}
		return w.plan, w.gpus[w.gpu].Name
	}
	// micro-batch step 3 (8), the second GPU.
	end, gpu := session(base, "RTX-4090", map[string]int{"micro_batch": 3, "gpu": 1})
	p, g := Remembered(base, "RTX-4090")
	if p.MicroBatch != 8 || g != "H100-80GB" || fingerprint(p, g) != fingerprint(end, gpu) {
		t.Fatalf("remembered %+v on %s, the what-if ended at %+v on %s", p, g, end, gpu)
	}
	// A second what-if from there: full checkpointing (step 3) and llama-2-7b.
	end2, gpu2 := session(p, g, map[string]int{"grad_checkpointing": 3, "model": 1})
	p2, g2 := Remembered(base, "RTX-4090")
	if p2.MicroBatch != 8 || p2.Checkpointing != "full" || p2.Model.Name != end2.Model.Name || g2 != gpu2 {
		t.Fatalf("the second what-if: remembered %+v on %s, ended at %+v on %s", p2, g2, end2, gpu2)
	}
	// Another base, another GPU, another notebook: the plan as written.
	edited := base
	edited.SeqLen = 512
	if p, _ := Remembered(edited, "RTX-4090"); p.SeqLen != 512 || p.MicroBatch != base.MicroBatch {
		t.Errorf("an edited base took the record: %+v", p)
	}
	if _, g := Remembered(base, "L4"); g != "L4" {
		t.Errorf("another GPU took the record: %s", g)
	}
	t.Setenv("JPY_SESSION_NAME", "/nb/other.ipynb")
	if p, _ := Remembered(base, "RTX-4090"); p.MicroBatch != base.MicroBatch {
		t.Errorf("another notebook took the record: %+v", p)
	}
	t.Setenv("JPY_SESSION_NAME", "/nb/20-what-if-playground.ipynb")
	for _, junk := range []string{"{", `{"From":"` + fingerprint(base, "RTX-4090") + `","Set":[["micro_batch","-3"]]}`, strings.Repeat("x", maxMemory+10)} {
		if err := os.WriteFile(memoryFile(), []byte(junk), 0o600); err != nil {
			t.Fatal(err)
		}
		if p, g := Remembered(base, "RTX-4090"); p.MicroBatch != base.MicroBatch || g != "RTX-4090" {
			t.Errorf("a damaged record %.40q gave %+v on %s", junk, p, g)
		}
	}
}
