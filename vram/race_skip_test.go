package vram

import (
	"testing"

	"github.com/vramlab/vramlab/vram/fileio/budget"
)

// oneGoroutineTable skips, under the race detector, a test that walks a
// table (every preset, every trace, every checkpoint file) in one
// goroutine. Such a test starts no goroutine, so the detector has nothing
// to find in it, and these tests were four of the race pass's five minutes.
// `make test` runs each of them in full without the detector, in the
// sanity pass (kernel/scripts/test.sh: go test ./vram -sanity); the
// engine's concurrent paths keep their own tests under the detector
// (TestPresetsConcurrentUse, TestCachedAnswersConcurrently, the search's).
func oneGoroutineTable(t testing.TB) {
	t.Helper()
	if budget.Race {
		t.Skip("a one-goroutine table walk: run without the race detector (make test's sanity pass)")
	}
}
