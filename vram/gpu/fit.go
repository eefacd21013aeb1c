package gpu

import (
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// FitOptions configure a fit check against a real device.
type FitOptions struct {
	// Context is the CUDA context and library overhead the plan's process
	// will add on this device; zero takes the catalog default for the
	// device's model (a measured value of your machine is better:
	// run a process that creates one tensor and read its used memory).
	Context vram.Bytes
	// Allocator settings of the run (expandable segments, max split size).
	Allocator vram.AllocatorConfig
	// Headroom keeps a fraction of the free memory unused (0.05 = 5%).
	Headroom float64
}

// Fit is the verdict for one plan on one device.
type Fit struct {
	Device     string     `json:"device"`
	Free       vram.Bytes `json:"free"`        // free memory now
	DeviceUsed vram.Bytes `json:"device_used"` // what the plan would add: reserved peak + context + NCCL
	Headroom   vram.Bytes `json:"headroom"`    // free × (1 − headroom fraction) − device_used
	Fits       bool       `json:"fits"`
}

// context picks the context overhead for a device.
func (o FitOptions) context(d Device) vram.Bytes {
	if o.Context > 0 {
		return o.Context
	}
	if g, err := vram.LookupGPU(strings.TrimSuffix(d.Name, " (simulated)")); err == nil {
		return g.Context
	}
	return 500 * vram.MiB // lazy-loading CUDA contexts measure 250–560 MiB (vram.GPU.Context)
}

// FitsOn predicts whether a training plan fits in the device's free memory
// now: its device-used memory (the allocator replay's reserved peak plus the
// CUDA context and NCCL buffers) against free memory less the headroom.
func FitsOn(t vram.Training, d Device, o FitOptions) (Fit, error) {
	if o.Headroom < 0 || o.Headroom >= 1 {
		return Fit{}, fmt.Errorf("headroom must be in [0, 1), got %v", o.Headroom)
	}
	rep, err := t.Replay(vram.ReplayOptions{Allocator: o.Allocator, Context: o.context(d)})
	if err != nil {
		return Fit{}, err
	}
	budget := vram.Bytes(float64(d.Free) * (1 - o.Headroom))
	f := Fit{Device: fmt.Sprintf("%d %s", d.Index, d.Name), Free: d.Free, DeviceUsed: rep.DeviceUsed, Headroom: budget - rep.DeviceUsed}
	f.Fits = f.Headroom >= 0
	return f, nil
}

// MaxMicroBatchOn is the largest micro-batch whose device-used memory fits
// the device's free memory now (0 if none does); micro_batch+1 does not.
func MaxMicroBatchOn(t vram.Training, d Device, o FitOptions) (int, error) {
	return vram.SearchLargest(1<<14, func(n int) (bool, error) {
		t.MicroBatch = n
		f, err := FitsOn(t, d, o)
		return f.Fits, err
	})
}
