// Package budget holds the readers' tests to their budgets: one input, one
// call, at most a second plus 50 ns per input byte of CPU time (a reader must be
// linear: 20 MB/s is far below any of them on a loaded CI core; ten times
// that under the race detector, which slows code about that much) and at
// most a fixed multiple of the input's size in allocations.
//
//	func FuzzRead(f *testing.F) {
//		f.Fuzz(func(t *testing.T, data []byte) {
//			budget.Check(t, len(data), func() { vram.ReadX(data) })
//		})
//	}
package budget

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// PerByte is how many bytes a reader may allocate per byte of input, and
// Floor what any input may allocate (buffers, tables, error messages).
const (
	PerByte = 64
	Floor   = 4 << 20
)

// Time is what one call may take, and PerByteTime more per byte of input.
const (
	Time        = time.Second
	PerByteTime = 50 * time.Nanosecond
)

// Check runs f once and fails t when it takes longer than Time +
// PerByteTime·size (scaled under the race detector) or allocates more than
// Floor + PerByte·size.
func Check(t testing.TB, size int, f func()) {
	t.Helper()
	limit := Time + time.Duration(size)*PerByteTime
	if Race {
		limit *= 10
	}
	// A call that hangs would never return to be measured: past ten times
	// the budget it stops the test binary with every goroutine's stack, so
	// the fuzzer keeps the input as a crasher.
	hang := time.AfterFunc(10*limit, func() {
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		panic(fmt.Sprintf("budget: one call has run for %v on %d bytes of input", 10*limit, size))
	})
	allocs, took := Measure(f)
	hang.Stop()
	if took > limit {
		t.Errorf("one call took %v on %d bytes of input (budget %v)", took, size, limit)
	}
	if max := uint64(Floor + PerByte*size); allocs > max {
		t.Errorf("one call allocated %d bytes on %d bytes of input (budget %d)", allocs, size, max)
	}
}

// Measure runs f once and returns what it allocated and how long it took:
// the process's CPU time while f ran (its goroutines' and the collector's),
// so that other programs loading the machine do not count against a
// reader, as the wall clock would; the wall clock where the CPU time
// cannot be read. A call that waits rather than works is the hang guard's
// (Check).
func Measure(f func()) (allocated uint64, took time.Duration) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	cpu0, ok := cpuTime()
	f()
	took = time.Since(start)
	if cpu1, ok1 := cpuTime(); ok && ok1 {
		took = cpu1 - cpu0
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, took
}
