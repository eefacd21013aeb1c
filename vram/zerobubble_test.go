package vram

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The engine's ZB-V order is torch.distributed.pipelining's, action for
// action (testdata/pipeline/zbv-orders.json, from measure.py zbv).
func TestZBVOrderMatchesPyTorch(t *testing.T) {
	b, err := os.ReadFile("testdata/pipeline/zbv-orders.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Orders []struct {
			PP, Microbatches, Rank int
			Actions                string
		}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Orders) < 10 {
		t.Fatalf("only %d orders", len(f.Orders))
	}
	for _, o := range f.Orders {
		var got []string
		for _, a := range zbvOrder(o.Rank, o.PP, o.Microbatches) {
			got = append(got, fmt.Sprintf("%d%c", a.chunk, a.kind))
		}
		if g := strings.Join(got, " "); g != o.Actions {
			t.Errorf("pp %d, %d microbatches, rank %d:\n got  %s\n want %s", o.PP, o.Microbatches, o.Rank, g, o.Actions)
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
