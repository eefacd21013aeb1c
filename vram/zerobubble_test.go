package vram

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The engine's zero-bubble orders (ZB-V and the interleaved ZB-1P) are
// torch.distributed.pipelining's, action for action
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
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Orders) < 10 || len(f.Interleaved) < 10 {
		t.Fatalf("only %d ZB-V and %d interleaved orders", len(f.Orders), len(f.Interleaved))
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
