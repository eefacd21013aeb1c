// Package sample records and reads memory over time: device-used memory
// (what nvidia-smi shows) and one process's share of it, read at a fixed
// interval while a job runs and written as CSV that a notebook reads back
// (Read) to set against the predicted device-used figure.
//
//	err := sample.Record(ctx, reader, 100*time.Millisecond, csvFile)
//	ss, err := sample.ReadFile("run.csv")
//	device, process := sample.Peak(ss)
//
// It is cgo-free: package gpu reads the devices through go-nvml and offers
// these names too (gpu.Record, gpu.ReadSamples, gpu.Sample).
package sample

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio"
)

// Reader reads a device's memory now: the device's used memory and, when a
// process is followed, that process's (0 when it holds none yet).
type Reader interface {
	Read() (device, process vram.Bytes, err error)
}

// Sample is one reading, At after the first.
type Sample struct {
	At      time.Duration
	Device  vram.Bytes // device used (nvidia-smi's "used")
	Process vram.Bytes // the followed process's used memory, 0 if none
}

// samplesHeader is the CSV header Record writes and Read expects.
const samplesHeader = "ms,device_used_bytes,process_used_bytes"

// Record reads r every interval (at least 10 ms) and writes one CSV line
// per reading to w until ctx ends (nil) or a read fails (its error). Each
// line is flushed as it is read, so a job killed mid-run leaves its
// readings.
func Record(ctx context.Context, r Reader, every time.Duration, w io.Writer) error {
	if every < 10*time.Millisecond {
		return fmt.Errorf("gpu: sampling interval %v: must be at least 10ms", every)
	}
	if _, err := fmt.Fprintln(w, samplesHeader); err != nil {
		return err
	}
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		dev, proc, err := r.Read()
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%d,%d,%d\n", time.Since(start).Milliseconds(), int64(dev), int64(proc)); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// MaxSamples caps what Read reads: a day at 100 ms. A file of them
// is at most MaxSamplesFile bytes (a line is at most 42).
const (
	MaxSamples     = 864_000
	MaxSamplesFile = 64 << 20
)

// maxMillis is the longest time a sample can be at: what time.Duration
// holds in milliseconds (292 years).
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// ReadFile reads a file Record wrote: a regular file (a FIFO or a
// device is refused before it is opened) of at most MaxSamplesFile bytes.
func ReadFile(path string) ([]Sample, error) {
	f, _, err := fileio.Open(path, MaxSamplesFile)
	if err != nil {
		return nil, fmt.Errorf("samples: %w", err)
	}
	defer f.Close()
	return Read(io.LimitReader(f, MaxSamplesFile))
}

// Read reads what Record wrote. A malformed line is an error that
// names its line number; more than MaxSamples lines is an error.
func Read(r io.Reader) ([]Sample, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), 1024)
	var out []Sample
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if line == 1 {
			if text != samplesHeader {
				return nil, fmt.Errorf("samples: line 1 is %q, want the header %q (a file gpu.Record wrote)", shorten(text, 60), samplesHeader)
			}
			continue
		}
		if text == "" {
			continue
		}
		if len(out) >= MaxSamples {
			return nil, fmt.Errorf("samples: more than %d readings", MaxSamples)
		}
		f := strings.Split(text, ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("samples: line %d: want 3 comma-separated numbers, got %d fields", line, len(f))
		}
		var v [3]int64
		for i, s := range f {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 || n > 1<<50 {
				return nil, fmt.Errorf("samples: line %d, field %d: %q is not a count in [0, 2^50]", line, i+1, shorten(s, 30))
			}
			v[i] = n
		}
		if v[0] > maxMillis {
			return nil, fmt.Errorf("samples: line %d, field 1: %d ms is past what a duration holds (%d ms)", line, v[0], maxMillis)
		}
		if len(out) > 0 && time.Duration(v[0])*time.Millisecond < out[len(out)-1].At {
			return nil, fmt.Errorf("samples: line %d: time %d ms goes backwards", line, v[0])
		}
		out = append(out, Sample{At: time.Duration(v[0]) * time.Millisecond, Device: vram.Bytes(v[1]), Process: vram.Bytes(v[2])})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("samples: line %d is longer than 1 KiB", line+1)
		}
		return nil, err
	}
	if line == 0 {
		return nil, errors.New("samples: empty file")
	}
	return out, nil
}

// Peak is the largest device-used reading and the largest process reading.
func Peak(ss []Sample) (device, process vram.Bytes) {
	for _, s := range ss {
		device, process = max(device, s.Device), max(process, s.Process)
	}
	return device, process
}

// shorten cuts s to n bytes for an error message, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
