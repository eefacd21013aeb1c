//go:build cgo && linux

package gpu

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/vramlab/vramlab/vram"
)

// wire sets what the mocks leave unset: memory in use, processes and
// utilization (realistic values: a 20 GiB training process at 87%).
func wire(s *server.Server) {
	for i, dev := range s.Devices {
		d := dev.(*server.Device)
		used := uint64(20<<30) + uint64(i)<<20
		d.MemoryInfo.Used, d.MemoryInfo.Free = used, d.MemoryInfo.Total-used
		mem := d.MemoryInfo
		d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: mem.Total, Reserved: 512 << 20, Used: mem.Used, Free: mem.Free}, nvml.SUCCESS
		}
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: used - 1<<30}, {Pid: 2, UsedGpuMemory: ^uint64(0)}}, nvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 87, Memory: 41}, nvml.SUCCESS }
		bus := d.PciBusID // the mock keeps it but does not report it in PciInfo
		d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for j := 0; j < len(bus) && j < len(p.BusId)-1; j++ {
				p.BusId[j] = int8(bus[j])
			}
			return p, nvml.SUCCESS
		}
	}
}

func TestMockMachines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		srv   *server.Server
		model string
		total vram.Bytes
		arch  string
		cc    string
	}{
		{"dgxa100", dgxa100.New(), "NVIDIA A100-SXM4-40GB", 40960 * vram.MiB, "Ampere", "8.0"},
		{"dgxh100", dgxh100.New(), "NVIDIA H100 80GB HBM3", 81920 * vram.MiB, "Hopper", "9.0"},
		{"dgxh200", dgxh200.New(), "NVIDIA H200 141GB HBM3e", 144384 * vram.MiB, "Hopper", "9.0"},
		{"dgxb200", dgxb200.New(), "NVIDIA B200", 0, "Blackwell", "10.0"},
	} {
		wire(tc.srv)
		s, err := SnapshotFrom(tc.srv)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(s.Devices) != 8 || s.Driver == "" || s.CUDADriver == "" {
			t.Fatalf("%s: %d devices, driver %q cuda %q", tc.name, len(s.Devices), s.Driver, s.CUDADriver)
		}
		d := s.Devices[3]
		if !strings.Contains(d.Name, strings.TrimPrefix(tc.model, "NVIDIA ")) {
			t.Errorf("%s: name %q, want %q", tc.name, d.Name, tc.model)
		}
		if tc.total > 0 && d.Total != tc.total {
			t.Errorf("%s: total %v, want %v", tc.name, d.Total, tc.total)
		}
		if d.Architecture != tc.arch || d.ComputeCapability != tc.cc {
			t.Errorf("%s: arch %q cc %q, want %q %q", tc.name, d.Architecture, d.ComputeCapability, tc.arch, tc.cc)
		}
		if d.Used != 20*vram.GiB+3*vram.MiB || d.Free != d.Total-d.Used || d.Reserved != 512*vram.MiB {
			t.Errorf("%s: used %v free %v reserved %v", tc.name, d.Used, d.Free, d.Reserved)
		}
		if len(d.Processes) != 2 || d.Processes[0].Used != d.Used-vram.GiB || d.Processes[1].Used != 0 {
			t.Errorf("%s: processes %+v (NVML_VALUE_NOT_AVAILABLE must read as 0)", tc.name, d.Processes)
		}
		if d.UtilizationGPU != 87 || d.UUID == "" || d.PCIBusID != "0000:03:00.0" {
			t.Errorf("%s: %+v", tc.name, d)
		}
		if !strings.Contains(s.Table(), d.Name) || !strings.Contains(s.HTML(), "<table") {
			t.Errorf("%s: table/HTML lacks the devices", tc.name)
		}
	}
}

func TestMixedServerAndMIG(t *testing.T) {
	srv, err := server.New(server.WithGPUs(gpus.A100_SXM4_80GB, gpus.H200_SXM5_141GB), server.WithDriverVersion("570.00.00"), server.WithCUDADriverVersion(12080))
	if err != nil {
		t.Fatal(err)
	}
	// MIG: one 3g.40gb instance on the A100.
	d0 := srv.Devices[0].(*server.Device)
	if ret, _ := d0.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	info, ret := d0.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := d0.CreateGpuInstance(&info); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	s, err := SnapshotFrom(srv)
	if err != nil {
		t.Fatal(err)
	}
	if s.Driver != "570.00.00" || s.CUDADriver != "12.8" {
		t.Errorf("versions %q %q", s.Driver, s.CUDADriver)
	}
	if !s.Devices[0].MIG || len(s.Devices[0].MIGInstances) != 1 || s.Devices[0].MIGInstances[0].Memory < 39*vram.GiB {
		t.Errorf("MIG listing: %+v", s.Devices[0])
	}
	if s.Devices[1].MIG || s.Devices[1].Total != 144384*vram.MiB {
		t.Errorf("H200: %+v", s.Devices[1])
	}
	// Unwired queries (utilization, processes, v2 memory) leave fields empty
	// and fall back to memory info v1.
	if s.Devices[1].Used != 0 || s.Devices[1].Processes != nil || s.Devices[1].Free != 0 {
		t.Errorf("unsupported queries should leave fields empty: %+v", s.Devices[1])
	}
}

func TestUnsupportedQuery(t *testing.T) {
	srv := dgxh100.New()
	wire(srv)
	d := srv.Devices[0].(*server.Device)
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	s, err := SnapshotFrom(srv)
	if err != nil {
		t.Fatal(err)
	}
	if s.Devices[0].PowerW != 0 || s.Devices[0].TemperatureC != 0 || s.Devices[0].Total == 0 {
		t.Errorf("device 0: %+v", s.Devices[0])
	}
}

// TestNoDriver: ERROR_LIBRARY_NOT_FOUND gives ErrNoDriver and nothing else
// is called (a later NVML call would end the process on a real machine).
func TestNoDriver(t *testing.T) {
	m := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := SnapshotFrom(m)
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("err = %v, want ErrNoDriver", err)
	}
	if !strings.Contains(err.Error(), "no NVIDIA driver") {
		t.Errorf("message %q is not plain", err)
	}
	if len(m.InitCalls()) != 1 || len(m.ShutdownCalls()) != 0 || len(m.DeviceGetCountCalls()) != 0 || len(m.SystemGetDriverVersionCalls()) != 0 {
		t.Errorf("calls after a failed Init: shutdown %d, count %d, driver %d", len(m.ShutdownCalls()), len(m.DeviceGetCountCalls()), len(m.SystemGetDriverVersionCalls()))
	}
	// The real library on this machine, if it has no driver.
	if s, err := SnapshotFrom(nvml.New()); err == nil {
		t.Logf("this machine has %d real GPUs", len(s.Devices))
	} else if !errors.Is(err, ErrNoDriver) {
		t.Errorf("real NVML without a driver: %v", err)
	}
}

func TestFake(t *testing.T) {
	t.Setenv(FakeEnv, "h100x8")
	s, err := Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !s.Simulated || len(s.Devices) != 8 || !strings.Contains(s.Devices[0].Name, "(simulated)") || !strings.Contains(s.Table(), "SIMULATED") || !strings.Contains(s.HTML(), "Simulated GPUs") {
		t.Errorf("simulated snapshot not labelled: %+v", s)
	}
	for _, bad := range []string{"h100", "h100x0", "tpux4", "h100x999"} {
		if _, err := Fake(bad); err == nil || !strings.Contains(err.Error(), FakeEnv) {
			t.Errorf("Fake(%q) = %v", bad, err)
		}
	}
	// One capacity for one GPU model: a simulated card reports the
	// catalog's nvidia-smi total.
	for model, m := range fakeModels {
		s, err := Fake(model + "x1")
		if err != nil {
			t.Fatal(err)
		}
		g, _ := vram.LookupGPU(m.catalog)
		if s.Devices[0].Total != g.Memory {
			t.Errorf("%s: simulated total %v, the catalog's %s %v", model, s.Devices[0].Total, g.Name, g.Memory)
		}
	}
}

func TestFitsOn(t *testing.T) {
	s, err := Fake("a100-80x2")
	if err != nil {
		t.Fatal(err)
	}
	d := s.Devices[0]
	small := vram.Training{Model: vram.MustPreset("gpt2"), SeqLen: 512, MicroBatch: 4, Precision: "amp_bf16"}
	f, err := FitsOn(small, d, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Fits || f.DeviceUsed <= 0 || f.Headroom != f.Free-f.DeviceUsed {
		t.Errorf("gpt2 on an A100: %+v", f)
	}
	big := vram.Training{Model: vram.MustPreset("llama-2-13b"), SeqLen: 2048, MicroBatch: 1, Precision: "fp32"}
	if f, _ := FitsOn(big, d, FitOptions{}); f.Fits {
		t.Errorf("13B fp32 AdamW fits an A100: %+v", f)
	}
	n, err := MaxMicroBatchOn(small, d, FitOptions{Headroom: 0.05})
	if err != nil || n < 8 {
		t.Fatalf("max micro-batch %d, %v", n, err)
	}
	small.MicroBatch = n + 1
	if f, _ := FitsOn(small, d, FitOptions{Headroom: 0.05}); f.Fits {
		t.Errorf("micro_batch %d still fits", n+1)
	}
	if _, err := FitsOn(small, d, FitOptions{Headroom: 2}); err == nil {
		t.Error("headroom 2 accepted")
	}
}

// TestNVMLReader: sampling a mock H100 reads its used memory and the
// followed process's; a device out of range and a missing driver are errors.
func TestNVMLReader(t *testing.T) {
	srv, err := FakeServer("h100x2")
	if err != nil {
		t.Fatal(err)
	}
	r, closeFn, err := NVMLReader(srv, 1, 4001)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	dev, proc, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if want := vram.Bytes(512+256) * vram.MiB; dev != want || proc != want {
		t.Errorf("device 1: used %v, process %v; want %v", dev, proc, want)
	}
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Millisecond)
	defer cancel()
	if err := Record(ctx, r, 10*time.Millisecond, &buf); err != nil {
		t.Fatal(err)
	}
	ss, err := ReadSamples(&buf)
	if err != nil || len(ss) < 2 {
		t.Fatalf("%d samples: %v", len(ss), err)
	}
	if _, _, err := NVMLReader(srv, 2, 0); err == nil || !strings.Contains(err.Error(), "devices 0–1") {
		t.Errorf("device 2 of 2: %v", err)
	}
	t.Setenv(FakeEnv, "a100x1")
	if r, c, err := OpenReader(0, 0); err != nil {
		t.Errorf("OpenReader with %s: %v", FakeEnv, err)
	} else {
		c()
		_ = r
	}
}
