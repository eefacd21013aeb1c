package vram

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The engine's zero-bubble orders (ZB-V, the interleaved ZB-1P and
// DualPipeV) are torch.distributed.pipelining's, action for action
// (testdata/pipeline/zero-bubble-orders.json, from measure.py zbv).
func TestZeroBubbleOrdersMatchPyTorch(t *testing.T) {
	b, err := os.ReadFile("testdata/pipeline/zero-bubble-orders.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Orders []struct {
			PP, Microbatches, Rank int
			Actions                string
		}
		Interleaved []struct {
			PP, Microbatches, Rank int
			VirtualStages          int `json:"virtual_stages"`
			Actions                string
		}
		DualPipeV []struct {
			PP, Microbatches, Rank int
			Actions                string
		}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Orders) < 10 || len(f.Interleaved) < 10 || len(f.DualPipeV) < 10 {
		t.Fatalf("only %d ZB-V, %d interleaved and %d DualPipeV orders", len(f.Orders), len(f.Interleaved), len(f.DualPipeV))
	}
	str := func(ops []zbvAction) string {
		var s []string
		for _, a := range ops {
			s = append(s, fmt.Sprintf("%d%c", a.chunk, a.kind))
		}
		return strings.Join(s, " ")
	}
	for _, o := range f.Orders {
		if g := str(zbvOrder(o.Rank, o.PP, o.Microbatches)); g != o.Actions {
			t.Errorf("zbv pp %d, %d microbatches, rank %d:\n got  %s\n want %s", o.PP, o.Microbatches, o.Rank, g, o.Actions)
		}
	}
	for _, o := range f.DualPipeV {
		if g := str(dualPipeVOrder(o.Rank, o.PP, o.Microbatches)); g != o.Actions {
			t.Errorf("dualpipev pp %d, %d microbatches, rank %d:\n got  %s\n want %s", o.PP, o.Microbatches, o.Rank, g, o.Actions)
		}
	}
	for _, o := range f.Interleaved {
		if g := str(interleavedZBOrder(o.Rank, o.PP, o.VirtualStages, o.Microbatches)); g != o.Actions {
			t.Errorf("interleaved_zb pp %d, v %d, %d microbatches, rank %d:\n got  %s\n want %s", o.PP, o.VirtualStages, o.Microbatches, o.Rank, g, o.Actions)
		}
	}
}

// ZB-V's peak activation memory is 1F1B's first stage's on every rank
// (Qi et al. 2024 §6: pp microbatches of a rank's share), whatever the weight
// gradient keeps, since no W is pending at the end of the warm-up.
func TestZBVInflight(t *testing.T) {
	for _, pp := range []int{2, 4, 8} {
		for r := 0; r < pp; r++ {
			for _, keep := range []float64{0, 0.7} {
				if got := zbvInflight(r, pp, 2*pp, keep); got != float64(pp) {
					t.Errorf("pp %d rank %d keep %.1f: %v microbatches in flight, want %d", pp, r, keep, got, pp)
				}
			}
		}
	}
	tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 8, Precision: "bf16",
		Parallel: Parallel{PP: 4, PPMicrobatches: 8, PPSchedule: "zbv"}}
	r, err := tr.resolve()
	if err != nil {
		t.Fatal(err)
	}
	st := r.stages()
	if !st[0].embed || !st[0].head || st[3].head || st[0].last-st[0].first != 8 {
		t.Errorf("ZB-V puts the embedding and the output on rank 0, two 4-block stages a rank: %+v", st)
	}
	if k := r.zbvKeep(st[0]); k <= 0 || k >= 1 {
		t.Errorf("the weight gradients keep %.2f of a block's saved set", k)
	}
	for _, c := range []struct {
		p    Parallel
		comp bool
		want string
	}{
		{Parallel{PP: 1, PPSchedule: "zbv"}, false, "pp ≥ 2"},
		{Parallel{PP: 4, PPSchedule: "zbv"}, true, "torch.compile"},
		{Parallel{PP: 4, PPSchedule: "zbv", VirtualStages: 3}, false, "virtual_stages"},
	} {
		x := tr
		x.Parallel, x.Compile = c.p, c.comp
		if _, err := x.Estimate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
}

// ZB-1P (the interleaved zero-bubble schedule): without deferred weight
// gradients it is 1F1B (pp−k microbatches on rank k); rank k defers k of
// them, so the later ranks hold what their weight gradients keep on top,
// never more than the first rank's pp microbatches (Qi et al. 2024 §3).
func TestInterleavedZBInflight(t *testing.T) {
	for _, pp := range []int{2, 4, 8} {
		for r := 0; r < pp; r++ {
			if got := splitInflight(interleavedZBOrder(r, pp, 1, 2*pp), 1, 0); got != float64(pp-r) {
				t.Errorf("pp %d rank %d, nothing kept for W: %v in flight, want %d", pp, r, got, pp-r)
			}
			for _, v := range []int{1, 2} {
				got := splitInflight(interleavedZBOrder(r, pp, v, 2*pp), v, 0.7)
				if got < float64(pp-r) || got > float64(pp) {
					t.Errorf("pp %d v %d rank %d keep 0.7: %v in flight, want within [%d, %d]", pp, v, r, got, pp-r, pp)
				}
			}
		}
	}
	tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 8, Precision: "bf16",
		Parallel: Parallel{PP: 4, PPMicrobatches: 8, PPSchedule: "interleaved_zb", VirtualStages: 2}}
	if _, err := tr.Estimate(); err != nil {
		t.Fatal(err)
	}
	tr.Parallel.PPMicrobatches = 10 // two rounds of 5
	if _, err := tr.Estimate(); err != nil {
		t.Errorf("10 microbatches in 2 rounds: %v", err)
	}
	tr.Parallel.PPMicrobatches = 11
	if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), "rounds") {
		t.Errorf("11 microbatches over 2 rounds: %v", err)
	}
}

// DualPipeV's steady state pairs each forward with another chunk's full
// backward, forward first, so every rank peaks at 2·pp + 1 chunks in flight
// (pp + ½ microbatches of its share), half a microbatch above ZB-V, whatever
// a split backward keeps for W (no W is pending at the peak).
func TestDualPipeVInflight(t *testing.T) {
	for _, pp := range []int{2, 4, 8} {
		for _, m := range []int{2 * pp, 3 * pp, 4 * pp} {
			for r := 0; r < pp; r++ {
				for _, keep := range []float64{0, 0.4, 1} {
					if got, want := splitInflight(dualPipeVOrder(r, pp, m), 2, keep), float64(pp)+0.5; got != want {
						t.Errorf("pp %d, m %d, rank %d, keep %.1f: %v microbatches in flight, want %v", pp, m, r, keep, got, want)
					}
				}
			}
		}
	}
	// Through a plan: more activations than ZB-V, fewer than GPipe.
	peak := func(schedule Schedule) Bytes {
		tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 8, Precision: "bf16",
			Parallel: Parallel{PP: 4, PPSchedule: schedule, PPMicrobatches: 8}}
		est, err := tr.Estimate()
		if err != nil {
			t.Fatalf("%s: %v", schedule, err)
		}
		return est.Peak.Activations
	}
	if d, z, g := peak("dualpipev"), peak("zbv"), peak("gpipe"); !(z < d && d < g) {
		t.Errorf("activations at the peak: dualpipev %v, zbv %v, gpipe %v", d, z, g)
	}
	for _, c := range []struct{ parallel, want string }{
		{`"pp": 4, "pp_schedule": "dualpipev", "pp_microbatches": 4`, "at least its 2 × pp"},
		{`"pp": 1, "pp_schedule": "dualpipev"`, "needs pp ≥ 2"},
	} {
		p, err := ParsePlan([]byte(`{"model": "llama-3-8b", "train": {"seq_len": 64, "micro_batch": 8, "parallel": {`+c.parallel+`}}}`), t.TempDir())
		if err == nil {
			_, err = p.Training.Estimate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.parallel, err, c.want)
		}
	}
}
