//go:build !race

package budget

// Race is true when the race detector is on.
const Race = false
