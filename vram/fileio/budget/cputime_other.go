//go:build !unix

package budget

import "time"

// cpuTime is not read here: Measure takes the wall clock.
func cpuTime() (time.Duration, bool) { return 0, false }
