package vram

import (
	goruntime "runtime"
	"sync"
	"sync/atomic"
)

// forEach runs f(0) … f(n-1) on up to GOMAXPROCS goroutines and returns
// once all have run. Estimates share nothing (each has its own buffers),
// so a grid of plans is judged as fast as the machine has cores. A panic in
// f is raised again here, in the caller's goroutine, as a loop would.
func forEach(n int, f func(i int)) {
	workers := min(n, goruntime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var failure any
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					once.Do(func() { failure = p })
					next.Store(int64(n)) // the others stop at their next plan
				}
			}()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		}()
	}
	wg.Wait()
	if failure != nil {
		panic(failure)
	}
}

// JudgeAll judges each plan against the budget (Judge), on as many cores as
// the machine has; verdicts and errors are in the plans' order.
func (b Budget) JudgeAll(plans []Training) ([]Verdict, []error) {
	vs, errs := make([]Verdict, len(plans)), make([]error, len(plans))
	forEach(len(plans), func(i int) { vs[i], errs[i] = b.Judge(plans[i]) })
	return vs, errs
}
