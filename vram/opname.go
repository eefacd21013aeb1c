package vram

import "sync"

// Op names are a module's name and a suffix ("input_layernorm" + ".rsqrt").
// A block's inventory is rebuilt on every estimate, so the joined names are
// kept once each instead of concatenated for every op of every estimate.
var opNames = struct {
	sync.RWMutex
	m map[[2]string]string
}{m: map[[2]string]string{}}

// maxOpNames bounds the table (the names a model's blocks use are a few
// hundred); past it names are joined afresh.
const maxOpNames = 1 << 14

// opName is prefix + suffix.
func opName(prefix, suffix string) string {
	k := [2]string{prefix, suffix}
	opNames.RLock()
	s, ok := opNames.m[k]
	opNames.RUnlock()
	if ok {
		return s
	}
	s = prefix + suffix
	opNames.Lock()
	if len(opNames.m) < maxOpNames {
		opNames.m[k] = s
	}
	opNames.Unlock()
	return s
}
