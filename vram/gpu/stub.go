//go:build !cgo || !linux

package gpu

// Snapshot needs NVML, which needs cgo on Linux; this build has neither.
func Snapshot() (Info, error) { return Info{}, ErrUnsupported }

// Fake needs go-nvml's mocks, which need cgo too.
func Fake(spec string) (Info, error) { return Info{}, ErrUnsupported }

// OpenReader needs NVML too.
func OpenReader(index, pid int) (Reader, func(), error) { return nil, nil, ErrUnsupported }

// OpenFakeReader needs go-nvml's mocks, which need cgo.
func OpenFakeReader(spec string, index, pid int) (Reader, func(), error) {
	return nil, nil, ErrUnsupported
}
