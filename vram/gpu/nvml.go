//go:build cgo && linux

package gpu

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/vramlab/vramlab/vram"
)

// FakeEnv names the environment variable that switches Snapshot to
// simulated GPUs, e.g. VRAMLAB_FAKE_GPUS=h100x8.
const FakeEnv = "VRAMLAB_FAKE_GPUS"

// Snapshot queries the machine's GPUs through NVML (or the simulated ones
// named by VRAMLAB_FAKE_GPUS).
func Snapshot() (Info, error) {
	if spec := os.Getenv(FakeEnv); spec != "" {
		return Fake(spec)
	}
	return SnapshotFrom(nvml.New())
}

// SnapshotFrom queries any nvml.Interface (the real library or a mock).
// Without the driver library it returns ErrNoDriver and calls nothing else.
func SnapshotFrom(lib nvml.Interface) (Info, error) {
	switch ret := lib.Init(); {
	case errors.Is(ret, nvml.ERROR_LIBRARY_NOT_FOUND):
		return Info{}, ErrNoDriver
	case ret != nvml.SUCCESS:
		return Info{}, fmt.Errorf("gpu: NVML init: %w", ret)
	}
	defer lib.Shutdown()
	var s Info
	try(func() {
		if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
			s.Driver = v
		}
	})
	try(func() {
		if v, ret := lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
			s.NVML = v
		}
	})
	try(func() {
		if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
			s.CUDADriver = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
		}
	})
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return s, fmt.Errorf("gpu: device count: %w", ret)
	}
	for i := 0; i < n; i++ {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return s, fmt.Errorf("gpu: device %d: %w", i, ret)
		}
		s.Devices = append(s.Devices, device(i, h))
	}
	return s, nil
}

// try runs one optional query. A device that does not support it (or a
// mock that does not implement it, which panics) leaves the field empty.
func try(f func()) {
	defer func() { _ = recover() }()
	f()
}

var archNames = map[nvml.DeviceArchitecture]string{
	nvml.DEVICE_ARCH_KEPLER: "Kepler", nvml.DEVICE_ARCH_MAXWELL: "Maxwell", nvml.DEVICE_ARCH_PASCAL: "Pascal",
	nvml.DEVICE_ARCH_VOLTA: "Volta", nvml.DEVICE_ARCH_TURING: "Turing", nvml.DEVICE_ARCH_AMPERE: "Ampere",
	nvml.DEVICE_ARCH_ADA: "Ada", nvml.DEVICE_ARCH_HOPPER: "Hopper", nvml.DEVICE_ARCH_BLACKWELL: "Blackwell",
}

func device(i int, h nvml.Device) Device {
	d := Device{Index: i}
	try(func() {
		if v, ret := h.GetName(); ret == nvml.SUCCESS {
			d.Name = v
		}
	})
	try(func() {
		if v, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.UUID = v
		}
	})
	try(func() {
		if p, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
			d.PCIBusID = cString(p.BusId[:])
		}
	})
	try(func() {
		if a, ret := h.GetArchitecture(); ret == nvml.SUCCESS {
			d.Architecture = archNames[a]
		}
	})
	try(func() {
		if ma, mi, ret := h.GetCudaComputeCapability(); ret == nvml.SUCCESS {
			d.ComputeCapability = fmt.Sprintf("%d.%d", ma, mi)
		}
	})
	// Memory info v2 separates the driver's reservation; v1 counts it as used
	// (nvml.h nvmlMemory_v2_t / nvmlMemory_t).
	gotV2 := false
	try(func() {
		if m, ret := h.GetMemoryInfo_v2(); ret == nvml.SUCCESS {
			d.Total, d.Used, d.Free, d.Reserved = vram.Bytes(m.Total), vram.Bytes(m.Used), vram.Bytes(m.Free), vram.Bytes(m.Reserved)
			gotV2 = true
		}
	})
	if !gotV2 {
		try(func() {
			if m, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
				d.Total, d.Used, d.Free = vram.Bytes(m.Total), vram.Bytes(m.Used), vram.Bytes(m.Free)
			}
		})
	}
	try(func() {
		if u, ret := h.GetUtilizationRates(); ret == nvml.SUCCESS {
			d.UtilizationGPU, d.UtilizationMemory = int(u.Gpu), int(u.Memory)
		}
	})
	try(func() {
		if t, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			d.TemperatureC = int(t)
		}
	})
	try(func() {
		if p, ret := h.GetPowerUsage(); ret == nvml.SUCCESS {
			d.PowerW = float64(p) / 1000
		}
	})
	try(func() {
		if p, ret := h.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
			d.PowerLimitW = float64(p) / 1000
		}
	})
	try(func() {
		if cur, _, ret := h.GetMigMode(); ret == nvml.SUCCESS {
			d.MIG = cur == nvml.DEVICE_MIG_ENABLE
		}
	})
	if d.MIG {
		d.MIGInstances = migInstances(h)
	}
	try(func() {
		ps, ret := h.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			return
		}
		for _, p := range ps {
			pr := Process{PID: int(p.Pid), Name: processName(int(p.Pid))}
			// NVML_VALUE_NOT_AVAILABLE (all ones) under WDDM or without permission.
			if p.UsedGpuMemory != ^uint64(0) {
				pr.Used = vram.Bytes(p.UsedGpuMemory)
			}
			d.Processes = append(d.Processes, pr)
		}
	})
	return d
}

// migInstances lists GPU instances profile by profile.
func migInstances(h nvml.Device) []MIG {
	var out []MIG
	for p := 0; p < nvml.GPU_INSTANCE_PROFILE_COUNT; p++ {
		try(func() {
			info, ret := h.GetGpuInstanceProfileInfo(p)
			if ret != nvml.SUCCESS {
				return
			}
			gis, ret := h.GetGpuInstances(&info)
			if ret != nvml.SUCCESS {
				return
			}
			for _, gi := range gis {
				m := MIG{Profile: fmt.Sprintf("%dg.%dgb", info.SliceCount, (info.MemorySizeMB+1023)/1024), Memory: vram.Bytes(info.MemorySizeMB) * vram.MiB}
				if gInfo, ret := gi.GetInfo(); ret == nvml.SUCCESS {
					m.ID = int(gInfo.Id)
				}
				out = append(out, m)
			}
		})
	}
	return out
}

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// processName reads /proc/<pid>/comm where permitted.
func processName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// fakeModels are the machines Fake can simulate: go-nvml's mock of the
// card and the catalog's entry for it, whose nvidia-smi total the simulated
// device reports (the mocks round it to 40, 80, 141 or 180 GiB), so one GPU
// model has one capacity everywhere.
var fakeModels = map[string]struct {
	mock    gpus.Config
	catalog string
}{
	"a100": {gpus.A100_SXM4_40GB, "A100-40GB"}, "a100-40": {gpus.A100_SXM4_40GB, "A100-40GB"},
	"a100-80": {gpus.A100_SXM4_80GB, "A100-80GB"}, "h100": {gpus.H100_SXM5_80GB, "H100-80GB"},
	"h200": {gpus.H200_SXM5_141GB, "H200"}, "b200": {gpus.B200_SXM5_180GB, "B200"},
}

// Fake returns a snapshot of simulated GPUs built on go-nvml's mock servers,
// spec "<model>x<count>" (h100x8, a100-80x4, h200x1, b200x8). Each device
// shows a CUDA context's worth of used memory and one idle process.
func Fake(spec string) (Info, error) {
	srv, err := FakeServer(spec)
	if err != nil {
		return Info{}, err
	}
	s, err := SnapshotFrom(srv)
	if err != nil {
		return s, err
	}
	s.Simulated, s.Description = true, "simulated "+spec+" from go-nvml mocks"
	for i := range s.Devices {
		s.Devices[i].Name += " (simulated)"
		for j := range s.Devices[i].Processes {
			s.Devices[i].Processes[j].Name = "python (simulated)"
		}
	}
	return s, nil
}

// FakeServer builds the mock NVML server Fake snapshots, with the calls the
// mocks leave unset (memory in use, processes, utilization, temperature,
// power) wired to plausible idle values.
func FakeServer(spec string) (*server.Server, error) {
	model, count, ok := strings.Cut(strings.ToLower(strings.TrimSpace(spec)), "x")
	n, err := strconv.Atoi(count)
	digits := count != "" && len(count) <= 2 && strings.Trim(count, "0123456789") == "" // no sign, no spaces
	cfg, known := fakeModels[model]
	if !ok || err != nil || !digits || n < 1 || n > 64 || !known {
		return nil, fmt.Errorf("%s=%q: want <model>x<count> with count 1–64 and model one of a100, a100-80, h100, h200, b200", FakeEnv, spec)
	}
	card, err := vram.LookupGPU(cfg.catalog)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(server.WithGPUs(gpus.Multiple(n, cfg.mock)...), server.WithDriverVersion("550.54.15"),
		server.WithNVMLVersion("12.550.54.15"), server.WithCUDADriverVersion(12040))
	if err != nil {
		return nil, err
	}
	for i, dev := range srv.Devices {
		d := dev.(*server.Device)
		d.MemoryInfo.Total = uint64(card.Memory)
		used := uint64(512<<20) + uint64(i)*(256<<20) // a context per device, growing a little by index
		d.MemoryInfo.Used, d.MemoryInfo.Free = used, d.MemoryInfo.Total-used
		mem := d.MemoryInfo
		d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: mem.Total, Reserved: 0, Used: mem.Used, Free: mem.Free}, nvml.SUCCESS
		}
		pid := uint32(4000 + i)
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: used}}, nvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 0, Memory: 0}, nvml.SUCCESS }
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 34, nvml.SUCCESS }
		d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 70000, nvml.SUCCESS }
		d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 700000, nvml.SUCCESS }
	}
	return srv, nil
}

// OpenReader opens device index for sampling (Record) through NVML, or
// through the simulated GPUs VRAMLAB_FAKE_GPUS names; pid > 0 follows that
// process's memory too. close releases NVML.
func OpenReader(index, pid int) (r Reader, close func(), err error) {
	if spec := os.Getenv(FakeEnv); spec != "" {
		return OpenFakeReader(spec, index, pid)
	}
	return NVMLReader(nvml.New(), index, pid)
}

// OpenFakeReader samples a simulated GPU (spec as for Fake).
func OpenFakeReader(spec string, index, pid int) (Reader, func(), error) {
	srv, err := FakeServer(spec)
	if err != nil {
		return nil, nil, err
	}
	return NVMLReader(srv, index, pid)
}

// NVMLReader reads device index of any nvml.Interface (the driver or a
// mock); pid > 0 follows that process's memory too.
func NVMLReader(lib nvml.Interface, index, pid int) (Reader, func(), error) {
	switch ret := lib.Init(); {
	case errors.Is(ret, nvml.ERROR_LIBRARY_NOT_FOUND):
		return nil, nil, ErrNoDriver
	case ret != nvml.SUCCESS:
		return nil, nil, fmt.Errorf("gpu: NVML init: %w", ret)
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, nil, fmt.Errorf("gpu: device count: %w", ret)
	}
	if index < 0 || index >= n {
		lib.Shutdown()
		return nil, nil, fmt.Errorf("gpu: device %d: this machine has devices 0–%d", index, n-1)
	}
	h, ret := lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, nil, fmt.Errorf("gpu: device %d: %w", index, ret)
	}
	return nvmlReader{h: h, pid: pid}, func() { lib.Shutdown() }, nil
}

type nvmlReader struct {
	h   nvml.Device
	pid int
}

func (r nvmlReader) Read() (device, process vram.Bytes, err error) {
	m, ret := r.h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return 0, 0, fmt.Errorf("gpu: memory info: %w", ret)
	}
	device = vram.Bytes(m.Used)
	if r.pid > 0 {
		var ps []nvml.ProcessInfo
		try(func() { ps, ret = r.h.GetComputeRunningProcesses() })
		if ret == nvml.SUCCESS {
			for _, p := range ps {
				if int(p.Pid) == r.pid {
					process = vram.Bytes(p.UsedGpuMemory)
				}
			}
		}
	}
	return device, process, nil
}
