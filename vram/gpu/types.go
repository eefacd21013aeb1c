package gpu

import (
	"errors"
	"fmt"
	"html"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// ErrNoDriver: the NVIDIA driver library (libnvidia-ml.so.1) is not
// installed; planning still works, GPU queries do not.
var ErrNoDriver = errors.New("no NVIDIA driver found (libnvidia-ml.so.1 is not installed): GPU queries are unavailable on this machine, planning works without them")

// ErrUnsupported: this build has no NVML support (built without cgo).
var ErrUnsupported = errors.New("GPU queries need cgo (NVML bindings); this build has none: rebuild with CGO_ENABLED=1 and gcc installed")

// Info is a snapshot of the machine's GPUs.
type Info struct {
	Simulated   bool     `json:"simulated"` // from VRAMLAB_FAKE_GPUS / Fake, not real hardware
	Driver      string   `json:"driver_version"`
	CUDADriver  string   `json:"cuda_driver_version"` // e.g. "12.4"
	NVML        string   `json:"nvml_version"`
	Devices     []Device `json:"devices"`
	Description string   `json:"description,omitempty"` // how it was simulated
}

// Device is one GPU. Fields a device does not report are left zero.
type Device struct {
	Index             int        `json:"index"`
	Name              string     `json:"name"`
	UUID              string     `json:"uuid"`
	PCIBusID          string     `json:"pci_bus_id"`
	Architecture      string     `json:"architecture"`
	ComputeCapability string     `json:"compute_capability"` // "9.0"
	Total             vram.Bytes `json:"total"`
	Used              vram.Bytes `json:"used"`
	Free              vram.Bytes `json:"free"`
	Reserved          vram.Bytes `json:"reserved"` // driver/firmware reservation (memory info v2)
	UtilizationGPU    int        `json:"utilization_gpu"`
	UtilizationMemory int        `json:"utilization_memory"`
	TemperatureC      int        `json:"temperature_c"`
	PowerW            float64    `json:"power_w"`
	PowerLimitW       float64    `json:"power_limit_w"`
	MIG               bool       `json:"mig"`
	MIGInstances      []MIG      `json:"mig_instances,omitempty"`
	Processes         []Process  `json:"processes,omitempty"`
}

// MIG is one MIG GPU instance.
type MIG struct {
	ID      int        `json:"id"`
	Profile string     `json:"profile"`
	Memory  vram.Bytes `json:"memory"`
}

// Process is a compute process on a device.
type Process struct {
	PID  int        `json:"pid"`
	Name string     `json:"name,omitempty"`
	Used vram.Bytes `json:"used"`
}

// Table prints an nvidia-smi-like table.
func (s Info) Table() string {
	var b strings.Builder
	if s.Simulated {
		fmt.Fprintf(&b, "SIMULATED GPUs (%s): not real hardware\n", s.Description)
	}
	fmt.Fprintf(&b, "driver %s   CUDA %s   NVML %s\n", orDash(s.Driver), orDash(s.CUDADriver), orDash(s.NVML))
	fmt.Fprintf(&b, "%-3s %-34s %-6s %10s %10s %10s %5s %5s %9s\n", "GPU", "name", "arch", "used", "free", "total", "util", "temp", "power")
	for _, d := range s.Devices {
		power := "-"
		if d.PowerW > 0 {
			power = fmt.Sprintf("%.0f/%.0fW", d.PowerW, d.PowerLimitW)
		}
		fmt.Fprintf(&b, "%-3d %-34s %-6s %10s %10s %10s %4d%% %4dC %9s\n", d.Index, trunc(d.Name, 34), trunc(d.Architecture, 6),
			d.Used.Format(vram.GiB, 1), d.Free.Format(vram.GiB, 1), d.Total.Format(vram.GiB, 1), d.UtilizationGPU, d.TemperatureC, power)
		for _, m := range d.MIGInstances {
			fmt.Fprintf(&b, "      MIG %d %-14s %10s\n", m.ID, m.Profile, m.Memory.Format(vram.GiB, 1))
		}
		for _, p := range d.Processes {
			fmt.Fprintf(&b, "      pid %-8d %-20s %10s\n", p.PID, trunc(p.Name, 20), p.Used.Format(vram.GiB, 2))
		}
	}
	return b.String()
}

// HTML renders the table for a notebook (escaped; simulated GPUs marked).
func (s Info) HTML() string {
	var b strings.Builder
	b.WriteString(`<div class="vramlab-gpus" style="font:13px sans-serif">`)
	if s.Simulated {
		fmt.Fprintf(&b, `<p style="color:#b35900;font-weight:bold">Simulated GPUs (%s): not real hardware.</p>`, html.EscapeString(s.Description))
	}
	fmt.Fprintf(&b, `<p>driver %s · CUDA %s · NVML %s</p>`, html.EscapeString(orDash(s.Driver)), html.EscapeString(orDash(s.CUDADriver)), html.EscapeString(orDash(s.NVML)))
	b.WriteString(`<table style="border-collapse:collapse"><tr>`)
	for _, h := range []string{"GPU", "name", "arch", "CC", "used", "free", "total", "util", "temp", "processes"} {
		fmt.Fprintf(&b, `<th style="text-align:left;padding:2px 8px;border-bottom:1px solid #999">%s</th>`, h)
	}
	b.WriteString("</tr>")
	for _, d := range s.Devices {
		procs := fmt.Sprint(len(d.Processes))
		cells := []string{fmt.Sprint(d.Index), d.Name, d.Architecture, d.ComputeCapability, d.Used.Format(vram.GiB, 1), d.Free.Format(vram.GiB, 1),
			d.Total.Format(vram.GiB, 1), fmt.Sprintf("%d%%", d.UtilizationGPU), fmt.Sprintf("%d°C", d.TemperatureC), procs}
		b.WriteString("<tr>")
		for _, c := range cells {
			fmt.Fprintf(&b, `<td style="padding:2px 8px">%s</td>`, html.EscapeString(c))
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</table></div>")
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
