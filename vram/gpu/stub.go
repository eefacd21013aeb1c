//go:build !cgo || !linux

package gpu

// Snapshot needs NVML, which needs cgo on Linux; this build has neither.
func Snapshot() (Info, error) { return Info{}, ErrUnsupported }

// Fake needs go-nvml's mocks, which need cgo too.
func Fake(spec string) (Info, error) { return Info{}, ErrUnsupported }
