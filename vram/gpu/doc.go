// Package gpu reads the GPUs attached to this machine through NVIDIA's NVML
// (go-nvml) and checks plans against them.
//
//	s, err := gpu.Snapshot()            // errors.Is(err, gpu.ErrNoDriver) on a laptop
//	fmt.Print(s.Table())                // nvidia-smi-like table
//	fit, _ := gpu.FitsOn(plan, s.Devices[0], gpu.FitOptions{})
//
// No GPU is normal: without the driver library Snapshot returns ErrNoDriver
// and calls nothing else in NVML (a call after a failed Init ends the
// process). Built without cgo, the package still compiles and Snapshot
// returns ErrUnsupported. VRAMLAB_FAKE_GPUS=h100x8 (or Fake("h100x8"))
// simulates machines with go-nvml's mock servers; every simulated snapshot
// says so in its Simulated field and in every table and device name.
//
// SnapshotFrom takes any nvml.Interface, which is how the tests run against
// the mock DGX A100/H100/H200/B200 servers.
package gpu
