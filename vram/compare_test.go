package vram

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestComparePlans: three example plans on three GPUs. Each verdict follows
// the device-used figure, a larger GPU fits whatever a smaller one does,
// the pick is the plan with the highest throughput bound among those that
// fit (then the most tokens a step),
// and a plan that cannot be estimated is reported, not dropped.
func TestComparePlans(t *testing.T) {
	var names []string
	var plans []Plan
	for _, f := range []string{"llama3-8b-lora", "llama3-8b-qlora", "llama2-7b-full-fp32"} {
		p, err := ReadPlan(filepath.Join("..", "examples", "plans", f+".json"))
		if err != nil {
			t.Fatal(err)
		}
		names, plans = append(names, f), append(plans, p)
	}
	broken := plans[0]
	tr := *broken.Training
	tr.SeqLen = -1
	broken.Training = &tr
	names, plans = append(names, "broken"), append(plans, broken)

	cmp, err := ComparePlans(names, plans, []string{"RTX-4090", "A100-40GB", "H100-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cmp.Plans) != 4 || len(cmp.GPUs) != 3 {
		t.Fatalf("%d plans on %d GPUs", len(cmp.Plans), len(cmp.GPUs))
	}
	if b := cmp.Plans[3]; b.Err == "" || !strings.Contains(b.Err, "seq_len") {
		t.Errorf("broken plan: %+v", b)
	}
	for i, p := range cmp.Plans[:3] {
		if p.Err != "" {
			t.Fatalf("%s: %s", p.Name, p.Err)
		}
		if !(p.Allocated > 0 && p.Reserved >= p.Allocated) {
			t.Errorf("%s: allocated %v, reserved %v", p.Name, p.Allocated, p.Reserved)
		}
		for k, g := range cmp.GPUs {
			if p.DeviceUsed[k] <= p.Reserved || p.Fits[k] != (p.DeviceUsed[k] <= Budget{GPU: g.GPU, Headroom: DefaultHeadroom}.Limit()) {
				t.Errorf("%s on %s: device-used %v (reserved %v), fits %v", p.Name, g.GPU.Name, p.DeviceUsed[k], p.Reserved, p.Fits[k])
			}
			if k > 0 && cmp.Plans[i].Fits[k-1] && !p.Fits[k] {
				t.Errorf("%s fits %s but not the larger %s", p.Name, cmp.GPUs[k-1].GPU.Name, g.GPU.Name)
			}
		}
	}
	for k, g := range cmp.GPUs {
		if g.Why == "" {
			t.Errorf("%s: no reason given", g.GPU.Name)
		}
		if g.Best < 0 {
			for _, p := range cmp.Plans {
				if p.Err == "" && p.Fits[k] {
					t.Errorf("%s: nothing picked, yet %s fits", g.GPU.Name, p.Name)
				}
			}
			continue
		}
		best := cmp.Plans[g.Best]
		if !best.Fits[k] || best.Err != "" {
			t.Errorf("%s: picked %s, which does not fit", g.GPU.Name, best.Name)
		}
		for _, p := range cmp.Plans {
			if p.Err != "" || !p.Fits[k] {
				continue
			}
			bb, pb := best.Bounds[k].TokensPerSecond, p.Bounds[k].TokensPerSecond
			if pb > bb && !sameSpeed(pb, bb) || sameSpeed(pb, bb) && p.Tokens > best.Tokens {
				t.Errorf("%s: picked %s (%.0f tokens/s, %d tokens a step) over %s (%.0f, %d)", g.GPU.Name, best.Name, bb, best.Tokens, p.Name, pb, p.Tokens)
			}
		}
		if !strings.Contains(g.Why, "tokens/s") {
			t.Errorf("%s: the reason %q does not give the bound", g.GPU.Name, g.Why)
		}
		if !strings.Contains(g.Why, best.Name) {
			t.Errorf("%s: the reason %q does not name the plan", g.GPU.Name, g.Why)
		}
		// One "to spare" rule: the report's verdict on the same plan and
		// GPU (the budget with DefaultHeadroom) says the same figure.
		v, err := Budget{GPU: g.GPU, Headroom: DefaultHeadroom}.JudgePlan(plans[g.Best])
		if err != nil {
			t.Fatal(err)
		}
		if spare := fmt.Sprintf("%v to spare", v.Limit-v.Need); !strings.Contains(g.Why, spare) || !strings.Contains(v.Why, spare) {
			t.Errorf("%s: the comparison says %q, the verdict %q; want both %q", g.GPU.Name, g.Why, v.Why, spare)
		}
	}
	for _, p := range cmp.Plans[:3] {
		for k, g := range cmp.GPUs {
			if b := p.Bounds[k]; b.TokensPerSecond <= 0 || b.StepFLOPs <= 0 || b.Limit == "" {
				t.Errorf("%s on %s: bound %+v", p.Name, g.GPU.Name, b)
			}
		}
	}
	// A bare capacity has no peaks: no bound, and the pick falls back to
	// the work a step.
	bare, err := ComparePlans(names[:3], plans[:3], []string{"200GB"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bare.Plans {
		if p.Bounds[0] != (Throughput{}) {
			t.Errorf("%s on 200GB: bound %+v", p.Name, p.Bounds[0])
		}
	}
	if g := bare.GPUs[0]; g.Best < 0 || strings.Contains(g.Why, "tokens/s") {
		t.Errorf("200GB: %+v", g)
	}
	if _, err := ComparePlans(names, plans, []string{"no-such-gpu"}); err == nil || !strings.Contains(err.Error(), "no-such-gpu") {
		t.Errorf("unknown GPU: %v", err)
	}
	if _, err := ComparePlans(nil, nil, nil); err == nil {
		t.Error("no plans: no error")
	}
}

func TestGrouped(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 65536: "65,536", -1234567: "-1,234,567", 1 << 62: "4,611,686,018,427,387,904"} {
		if got := Grouped(n); got != want {
			t.Errorf("Grouped(%d) = %q, want %q", n, got, want)
		}
	}
}
