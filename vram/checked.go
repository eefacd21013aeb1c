package vram

import (
	"fmt"
	"math"
	"math/bits"
)

// Checked arithmetic for element and byte counts. Every count that grows
// with a plan's sizes goes through these helpers, and never wraps around or
// saturates: plan validation (Training.resolve, Inference.resolve) bounds
// every size field so that the largest products stay below maxPlanBytes and
// names the fields when they would not; should a count still outgrow int64,
// the helpers panic with an overflowError, which the public entry points
// (recoverOverflow) return as an error instead of a wrong number.

// maxPlanBytes bounds any single quantity a valid plan may describe (1 EiB):
// far above every real device and cluster, far below int64's range, so that
// sums of a few thousand such quantities cannot overflow.
const maxPlanBytes = Bytes(1) << 60

// overflowError is the panic value of a count that passed int64.
type overflowError struct{ op string }

func (e overflowError) Error() string {
	return fmt.Sprintf("a size outgrew 2^63 (%s) in a plan that passed validation: please report the plan", e.op)
}

// recoverOverflow turns an overflowError panic into *err; other panics go on.
// Use it deferred in every exported function that computes sizes.
func recoverOverflow(err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(overflowError); ok {
			*err = e
			return
		}
		panic(r)
	}
}

// mulCount multiplies two non-negative counts, reporting whether the product
// fits in an int64.
func mulCount(a, b int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

// mulI64 is a*b for counts (negative factors count as 0), panicking with an
// overflowError past int64.
func mulI64(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	p, ok := mulCount(a, b)
	if !ok {
		panic(overflowError{fmt.Sprintf("%d × %d", a, b)})
	}
	return p
}

// mulBytes is n*per (0 when either is ≤ 0), checked.
func mulBytes(n int64, per Bytes) Bytes { return Bytes(mulI64(n, int64(per))) }

// addBytes is a+b, checked (either may be negative: a running total can go
// down).
func addBytes(a, b Bytes) Bytes {
	s := a + b
	if (s^a)&(s^b) < 0 { // the sum's sign differs from both addends'
		addOverflow(a, b)
	}
	return s
}

// addOverflow panics for addBytes, out of line so that addBytes inlines
// (the engine's hottest arithmetic).
//
//go:noinline
func addOverflow(a, b Bytes) { panic(overflowError{fmt.Sprintf("%d + %d", a, b)}) }

// scale is b·f for a factor ≥ 0 (pipeline in-flight counts, expert shares),
// checked.
func scale(b Bytes, f float64) Bytes {
	if f == 1 {
		return b
	}
	v := float64(b) * f
	if v >= math.MaxInt64 || v <= math.MinInt64 || math.IsNaN(v) {
		panic(overflowError{fmt.Sprintf("%d × %g", b, f)})
	}
	return Bytes(v)
}

// boundedProduct is the product of counts, or an error naming what they are
// when it passes limit (in the unit the caller multiplies into).
func boundedProduct(limit int64, what string, factors ...int64) (int64, error) {
	p := int64(1)
	for _, f := range factors {
		if f < 0 {
			return 0, fmt.Errorf("%s: a factor is negative (%d)", what, f)
		}
		var ok bool
		if p, ok = mulCount(p, f); !ok || p > limit {
			return 0, fmt.Errorf("%s = %s is beyond what any GPU or cluster holds (limit %d)", what, productString(factors), limit)
		}
	}
	return p, nil
}

func productString(fs []int64) string {
	s := ""
	for i, f := range fs {
		if i > 0 {
			s += " × "
		}
		s += fmt.Sprint(f)
	}
	return s
}
