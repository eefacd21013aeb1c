package gpu

import (
	"context"
	"io"
	"time"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/gpu/sample"
)

// Memory over time lives in package sample (cgo-free, so that what only
// reads and draws readings — the charts — links without go-nvml); these
// are its names as package gpu has always offered them.

// Reader reads a device's memory now (sample.Reader).
type Reader = sample.Reader

// Sample is one reading (sample.Sample).
type Sample = sample.Sample

// Record reads r every interval and writes CSV lines to w until ctx ends
// (sample.Record).
func Record(ctx context.Context, r Reader, every time.Duration, w io.Writer) error {
	return sample.Record(ctx, r, every, w)
}

// ReadSamplesFile reads a file Record wrote (sample.ReadFile).
func ReadSamplesFile(path string) ([]Sample, error) { return sample.ReadFile(path) }

// ReadSamples reads what Record wrote (sample.Read).
func ReadSamples(r io.Reader) ([]Sample, error) { return sample.Read(r) }

// Peak is the most device-used and process memory among ss (sample.Peak).
func Peak(ss []Sample) (device, process vram.Bytes) { return sample.Peak(ss) }
