package vram

import (
	"fmt"
	"strings"
	"testing"
)

func a100() Budget {
	g, _ := LookupGPU("A100-80GB")
	return Budget{GPU: g, Headroom: 0.05}
}

// The solvers return a value that fits, and the next step does not.
func TestMaxMicroBatch(t *testing.T) {
	tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 2048, Precision: "bf16", Checkpointing: "full",
		LoRA: &LoRA{Rank: 16, Targets: []string{"q_proj", "v_proj"}}}
	b := a100()
	n, err := MaxMicroBatch(tr, b)
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Fatalf("max micro-batch %d", n)
	}
	tr.MicroBatch = n
	if ok, p, _ := fits(tr, b); !ok {
		t.Errorf("micro_batch %d does not fit: %v > %v", n, p, b.Limit())
	}
	tr.MicroBatch = n + 1
	if ok, p, _ := fits(tr, b); ok {
		t.Errorf("micro_batch %d still fits (%v ≤ %v): not the largest", n+1, p, b.Limit())
	}
}

func TestMaxSeqLen(t *testing.T) {
	tr := Training{Model: MustPreset("llama-2-7b"), MicroBatch: 1, Precision: "bf16", Attention: "eager",
		LoRA: &LoRA{Rank: 8, Targets: []string{"q_proj", "v_proj"}}}
	b := a100()
	s, err := MaxSeqLen(tr, b, 128)
	if err != nil {
		t.Fatal(err)
	}
	if s < 128 || s%128 != 0 {
		t.Fatalf("max seq_len %d", s)
	}
	tr.SeqLen = s
	if ok, _, _ := fits(tr, b); !ok {
		t.Errorf("seq_len %d does not fit", s)
	}
	tr.SeqLen = s + 128
	if ok, _, _ := fits(tr, b); ok {
		t.Errorf("seq_len %d still fits", s+128)
	}
}

func TestMinGPUs(t *testing.T) {
	tr := Training{Model: MustPreset("llama-3.1-70b"), SeqLen: 4096, MicroBatch: 1, Precision: "mixed_bf16",
		Checkpointing: "full", Parallel: Parallel{FSDP: "full_shard"}}
	b := a100()
	n, err := MinGPUs(tr, b, 128)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("min GPUs = %d", n)
	}
	tr.Parallel.DP = n
	if ok, _, _ := fits(tr, b); !ok {
		t.Errorf("%d GPUs do not fit", n)
	}
	tr.Parallel.DP = n - 1
	if ok, _, _ := fits(tr, b); ok {
		t.Errorf("%d GPUs already fit", n-1)
	}
	// Without sharding more replicas never help.
	tr.Parallel = Parallel{}
	if n, _ := MinGPUs(tr, b, 16); n != 0 {
		t.Errorf("ZeRO-0 min GPUs = %d, want 0 (never fits)", n)
	}
}

// The article's 7B fp32 AdamW plan does not fit an A100 80G; the advisor
// finds changes that make it fit and puts them first.
func TestAdvise(t *testing.T) {
	tr := Training{Model: MustPreset("llama-2-7b"), SeqLen: 2048, MicroBatch: 1, Precision: "fp32", Optimizer: "adamw"}
	b := a100()
	if ok, _, _ := fits(tr, b); ok {
		t.Fatal("the 7B fp32 AdamW plan should not fit an A100 80GB")
	}
	adv, err := Advise(tr, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(adv) < 5 || !adv[0].Fits {
		t.Fatalf("advice %+v: want several, fitting ones first", adv)
	}
	seen := map[string]bool{}
	for i, a := range adv {
		if a.Saves <= 0 || a.Cost == "" {
			t.Errorf("advice %q saves %v, cost %q", a.Change, a.Saves, a.Cost)
		}
		if ok, p, _ := fits(a.Plan, b); ok != a.Fits || p != a.Need {
			t.Errorf("advice %q: fits=%v need=%v, but its plan gives %v %v", a.Change, a.Fits, a.Need, ok, p)
		}
		if i > 0 && !a.Fits && !adv[i-1].Fits && a.Saves > adv[i-1].Saves {
			t.Errorf("advice that does not fit not ranked by saving: %q after %q", a.Change, adv[i-1].Change)
		}
		if i > 0 && a.Fits && adv[i-1].Fits && a.moreGPUs() == adv[i-1].moreGPUs() && a.Price < adv[i-1].Price {
			t.Errorf("advice that fits not ranked by price: %q (%d) after %q (%d)", a.Change, a.Price, adv[i-1].Change, adv[i-1].Price)
		}
		if a.Saves*100 < tr.mustPeak(t) {
			t.Errorf("%q saves %v, under 1 %% of the peak", a.Change, a.Saves)
		}
		if i > 0 && a.Fits && adv[i-1].Kind == AdviceMoreGPUs && a.Kind != AdviceMoreGPUs {
			t.Errorf("%q on the plan's own GPU ranked after %q", a.Change, adv[i-1].Change)
		}
		seen[strings.Fields(a.Change)[0]] = true
	}
	for _, want := range []string{"8-bit", "LoRA", "QLoRA", "Adafactor"} {
		if !seen[want] {
			t.Errorf("no %q advice among %d", want, len(adv))
		}
	}
}

// mustPeak is the plan's allocated peak.
func (t Training) mustPeak(tb testing.TB) Bytes {
	est, err := t.Estimate()
	if err != nil {
		tb.Fatal(err)
	}
	return est.Peak.Total()
}

func TestSweep(t *testing.T) {
	tr := Training{Model: MustPreset("gpt2"), SeqLen: 512, MicroBatch: 1}
	pts, err := Sweep(tr, "micro_batch", []string{"1", "2", "4", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 4 || pts[3].Err == "" {
		t.Fatalf("points %+v", pts)
	}
	for i, want := range []bool{true, false, false, false} {
		if pts[i].Current != want {
			t.Errorf("point %s: current %v, want %v (the plan has micro_batch 1)", pts[i].Value, pts[i].Current, want)
		}
	}
	if pts, _ := Sweep(Training{Model: MustPreset("gpt2"), SeqLen: 512, MicroBatch: 1, Precision: "bf16"}, "precision", []string{"fp32", "bf16"}); !pts[1].Current || pts[0].Current {
		t.Errorf("precision sweep marks %+v as the plan", pts)
	}
	for i := 1; i < 3; i++ {
		if pts[i].Peak.Total() < pts[i-1].Peak.Total() {
			t.Errorf("peak falls with batch: %v → %v", pts[i-1].Peak.Total(), pts[i].Peak.Total())
		}
	}
	bad := tr
	bad.Model = FromPreset("llama-3-8bb") // a typo: every point fails
	if pts, err := Sweep(bad, "micro_batch", []string{"1", "2"}); err == nil || !strings.Contains(err.Error(), "no value gives a valid plan") || !strings.Contains(err.Error(), "llama-3-8b") || len(pts) != 2 {
		t.Errorf("invalid plan: %d points, %v", len(pts), err)
	}
	g, _ := LookupGPU("A100-80GB")
	if n, err := MaxMicroBatch(bad, Budget{GPU: g}); err == nil || n != 0 {
		t.Errorf("solver on an invalid plan: %d, %v", n, err)
	}
	if n, err := MaxSeqLen(bad, Budget{GPU: g}, 256); err == nil || n != 0 {
		t.Errorf("sequence solver on an invalid plan: %d, %v", n, err)
	}
	if _, err := Sweep(tr, "micro_batch", nil); err == nil {
		t.Error("no values: no error")
	}
	if _, err := Sweep(tr, "colour", []string{"1"}); err == nil || !strings.Contains(err.Error(), "unknown sweep field") {
		t.Errorf("unknown field: %v", err)
	}
	for _, f := range SweepFields {
		if _, err := tr.Set(f, "1"); err != nil && strings.Contains(err.Error(), "unknown") {
			t.Errorf("Set(%q): %v", f, err)
		}
	}
}

// TestAdviseOwnHardwareFirst: for a plan on one 24 GB card the first
// suggestions are changes that fit on that card; twice the GPUs comes
// after them even when it saves more.
func TestAdviseOwnHardwareFirst(t *testing.T) {
	g, err := LookupGPU("RTX-4090")
	if err != nil {
		t.Fatal(err)
	}
	tr := Training{Model: MustPreset("llama-3.2-1b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16", Optimizer: "adamw"}
	b := Budget{GPU: g, Headroom: DefaultHeadroom}
	adv, err := Advise(tr, b)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, a := range adv {
		kinds = append(kinds, fmt.Sprintf("%s fits=%v saves=%v", a.Kind, a.Fits, a.Saves))
	}
	if len(adv) == 0 || adv[0].Kind == AdviceMoreGPUs || !adv[0].Fits {
		t.Fatalf("advice %v: want first a change that fits the one card", kinds)
	}
	more := -1
	for i, a := range adv {
		if a.Kind == AdviceMoreGPUs {
			more = i
		}
	}
	if more < 0 {
		t.Fatal("no 'twice the GPUs' advice to rank")
	}
	for _, a := range adv[more+1:] {
		if a.Fits {
			t.Errorf("%q fits on the plan's own card but comes after twice the GPUs", a.Change)
		}
	}
}
