package vram

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// SweepFields are the plan fields Sweep and Set understand.
var SweepFields = []string{"micro_batch", "seq_len", "grad_accum", "dp", "tp", "pp", "zero_stage", "precision",
	"optimizer", "grad_checkpointing", "attention", "lora_rank", "loss"}

// Set returns a copy of t with one field set from its text form.
func (t Training) Set(field, value string) (Training, error) {
	num := func() (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not an integer", field, value)
		}
		return n, nil
	}
	var err error
	var n int
	switch field {
	case "micro_batch":
		n, err = num()
		t.MicroBatch = n
	case "seq_len":
		n, err = num()
		t.SeqLen = n
	case "grad_accum":
		n, err = num()
		t.GradAccum = n
	case "dp", "gpus":
		n, err = num()
		t.Parallel.DP = n
	case "tp":
		n, err = num()
		t.Parallel.TP = n
	case "pp":
		n, err = num()
		t.Parallel.PP = n
	case "zero_stage":
		n, err = num()
		t.Parallel.ZeRO = n
	case "precision":
		t.Precision, t.WeightsDType, t.ComputeDType, t.MasterWeights, t.GradsDType, t.Autocast = value, 0, 0, 0, 0, false
	case "optimizer":
		t.Optimizer, t.OptimizerStateDType = value, 0
	case "grad_checkpointing":
		t.Checkpointing = Checkpointing(value)
	case "attention":
		t.Attention = value
	case "loss":
		t.Loss = value
	case "lora_rank":
		n, err = num()
		if n == 0 {
			t.LoRA, t.Trainable = nil, "full"
			break
		}
		l := LoRA{Rank: n, Targets: []string{"q_proj", "k_proj", "v_proj", "o_proj"}}
		if t.LoRA != nil {
			l = *t.LoRA
			l.Rank = n
		}
		t.LoRA, t.Trainable = &l, "lora"
	default:
		return t, fmt.Errorf("unknown sweep field %q; known: %s", field, strings.Join(SweepFields, ", "))
	}
	return t, err
}

// SweepPoint is one value of a sweep.
type SweepPoint struct {
	Value string    `json:"value"`
	Peak  Breakdown `json:"peak"`  // allocated peak by category
	Where string    `json:"where"` // where the peak happens
	Err   string    `json:"error,omitempty"`
	// Current is set on the point whose value is what the plan already
	// has, so a chart can mark where the plan stands.
	Current bool `json:"current,omitempty"`
}

// Sweep estimates t for each value of field. Invalid values yield a point
// with Err set rather than failing the sweep; an unknown field, no values,
// or no value that gives a valid plan (an invalid plan) is an error, so a
// sweep never comes back empty without saying why.
func Sweep(t Training, field string, values []string) ([]SweepPoint, error) {
	if _, err := t.Set(field, "1"); err != nil && strings.HasPrefix(err.Error(), "unknown sweep field") {
		return nil, err
	}
	out := make([]SweepPoint, len(values))
	forEach(len(values), func(i int) { out[i] = sweepPoint(t, field, values[i]) })
	// A sweep with no valid point would draw an empty chart: say why instead
	// (usually the plan itself is invalid, whatever the swept field).
	for _, p := range out {
		if p.Err == "" {
			return out, nil
		}
	}
	if len(out) == 0 {
		return out, fmt.Errorf("sweep of %s: no values given", field)
	}
	return out, fmt.Errorf("sweep of %s: no value gives a valid plan; at %s: %s", field, out[0].Value, out[0].Err)
}

// sweepPoint is the estimate of t with field set to v.
func sweepPoint(t Training, field, v string) SweepPoint {
	p := SweepPoint{Value: v}
	tt, err := t.Set(field, v)
	if err == nil {
		p.Current = reflect.DeepEqual(tt, t)
		var est TrainingEstimate
		if est, err = tt.Estimate(); err == nil {
			p.Peak, p.Where = est.Peak, est.PeakAt.Where()
		}
	}
	if err != nil {
		p.Err = err.Error()
	}
	return p
}

// SearchLargest finds the largest n in [1, limit] with ok(n), assuming ok
// is monotone (true up to some n, false after): exponential then binary
// search. It returns 0 when ok(1) is false.
func SearchLargest(limit int, ok func(int) (bool, error)) (int, error) {
	good, err := ok(1)
	if err != nil {
		return 0, err
	}
	if !good {
		return 0, nil
	}
	lo, hi := 1, 2
	for hi <= limit {
		g, err := ok(hi)
		if err != nil {
			return 0, err
		}
		if !g {
			break
		}
		lo, hi = hi, hi*2
	}
	if hi > limit {
		hi = limit + 1
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		g, err := ok(mid)
		if err != nil {
			return 0, err
		}
		if g {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// largest is SearchLargest for a test that cannot fail: the largest n in
// [1, limit] with ok(n), 0 when ok(1) is false.
func largest(limit int, ok func(int) bool) int {
	n, _ := SearchLargest(limit, func(n int) (bool, error) { return ok(n), nil })
	return n
}

// MaxMicroBatch is the largest micro-batch that fits the budget (0 if even
// one sequence does not). micro_batch+1 does not fit (or hits 65536).
func MaxMicroBatch(t Training, b Budget) (int, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	return searchBudget(1<<16, b, func(n int) Training {
		t.MicroBatch = n
		return t
	})
}

// MaxSeqLen is the longest sequence, in steps of `step` tokens (zero: 1),
// that fits the budget (0 if none does).
func MaxSeqLen(t Training, b Budget, step int) (int, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if step < 1 {
		step = 1
	}
	n, err := searchBudget((1<<22)/step, b, func(k int) Training {
		t.SeqLen = k * step
		return t
	})
	return n * step, err
}

// searchBudget finds the largest n in [1, limit] whose plan fits b. The
// answer on the allocated measure (estimates only, cheap) bounds it from
// above — reserved is never below allocated, and device-used adds the
// context — so the replays of the slower measures start there and gallop
// down: one or two replays when the cache and the context cost a step or
// two, a binary search otherwise.
func searchBudget(limit int, b Budget, plan func(int) Training) (int, error) {
	alloc := b
	alloc.Measure = MeasureAllocated
	hi, err := SearchLargest(limit, func(n int) (bool, error) {
		ok, _, err := fits(plan(n), alloc)
		return ok, err
	})
	if err != nil || hi == 0 || b.measure() == MeasureAllocated {
		return hi, err
	}
	ok := func(n int) (bool, error) {
		good, _, err := fits(plan(n), b)
		return good, err
	}
	if good, err := ok(hi); err != nil || good {
		return hi, err
	}
	bad, good := hi, 0 // bad does not fit; good fits (0: none found yet)
	for step := 1; bad > 1; step *= 2 {
		n := max(1, hi-step)
		g, err := ok(n)
		if err != nil {
			return 0, err
		}
		if g {
			good = n
			break
		}
		bad = n
	}
	if good == 0 {
		return 0, nil // 1 does not fit
	}
	for bad-good > 1 {
		mid := (good + bad) / 2
		g, err := ok(mid)
		if err != nil {
			return 0, err
		}
		if g {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, nil
}

// MinGPUs is the fewest data-parallel GPUs (dp) at the plan's ZeRO stage
// and other parallel degrees for which the plan fits, up to maxDP; 0 when
// none does (with ZeRO-0 more replicas never lower per-GPU memory).
func MinGPUs(t Training, b Budget, maxDP int) (int, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	for dp := 1; dp <= maxDP; dp++ {
		t.Parallel.DP, t.Parallel.ShardDegree = dp, 0
		ok, _, err := fits(t, b)
		if err != nil {
			return 0, err
		}
		if ok {
			return dp, nil
		}
	}
	return 0, nil
}
