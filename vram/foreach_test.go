package vram

import (
	"reflect"
	goruntime "runtime"
	"testing"
)

// TestJudgeAllMatchesJudge: a grid judged at once (on every core) gives,
// plan by plan and in order, what Judge gives one at a time, errors
// included.
func TestJudgeAllMatchesJudge(t *testing.T) {
	prev := goruntime.GOMAXPROCS(4)
	defer goruntime.GOMAXPROCS(prev)
	g, _ := LookupGPU("A100-80GB")
	b := Budget{GPU: g, Headroom: 0.05}
	plans := arenaPlans()
	plans = append(plans, Training{Model: MustPreset("llama-3-8b"), SeqLen: -1}) // invalid
	vs, errs := b.JudgeAll(plans)
	for i, tr := range plans {
		v, err := b.Judge(tr)
		if (err == nil) != (errs[i] == nil) || err != nil && err.Error() != errs[i].Error() {
			t.Errorf("plan %d: error %v, alone %v", i, errs[i], err)
		}
		if !reflect.DeepEqual(v, vs[i]) {
			t.Errorf("plan %d: verdict %+v, alone %+v", i, vs[i], v)
		}
	}
}

// TestForEachPanics: a panic in one plan's work reaches the caller, as in a
// loop, instead of ending the program from another goroutine; every index
// runs once otherwise.
func TestForEachPanics(t *testing.T) {
	prev := goruntime.GOMAXPROCS(4)
	defer goruntime.GOMAXPROCS(prev)
	seen := make([]int, 100)
	forEach(len(seen), func(i int) { seen[i]++ })
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("index %d ran %d times", i, n)
		}
	}
	defer func() {
		if p := recover(); p != "plan 7" {
			t.Errorf("recovered %v, want the panic of plan 7", p)
		}
	}()
	forEach(50, func(i int) {
		if i == 7 {
			panic("plan 7")
		}
	})
	t.Error("forEach returned after a panic")
}
