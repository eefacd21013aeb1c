// Command gpus lists this machine's GPUs like nvidia-smi and, given a plan,
// says whether it fits on each one now.
//
//	go run ./examples/gpus                      # table
//	go run ./examples/gpus -json                # machine-readable
//	go run ./examples/gpus -plan FILE.json      # plus a fit verdict per device
//	go run ./examples/gpus -fake h100x8         # simulated GPUs (go-nvml mocks)
//	go run ./examples/gpus -sample used.csv -device 0 -pid 1234 -every 100ms -for 10m
//	                                            # device-used memory over time, as CSV
//
// Without an NVIDIA driver it says so and exits with status 0: no GPU is a
// normal state for planning.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/vramlab/vramlab/examples/internal/term"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/gpu"
)

func main() {
	if err := run(os.Args[1:], term.Safe(os.Stdout)); err != nil {
		fmt.Fprintln(term.Safe(os.Stderr), "gpus:", err)
		os.Exit(1)
	}
}

// noGPUs says that GPU queries are unavailable, in the format asked for.
// Simulated GPUs are suggested only where this build can run them (with cgo:
// go-nvml's mocks need it too).
func noGPUs(w io.Writer, why error, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Available bool         `json:"available"`
			Error     string       `json:"error"`
			Devices   []gpu.Device `json:"devices"`
		}{false, why.Error(), []gpu.Device{}})
	}
	fmt.Fprintln(w, why)
	if errors.Is(why, gpu.ErrNoDriver) {
		fmt.Fprintln(w, "try simulated GPUs: go run ./examples/gpus -fake h100x8")
	}
	return nil
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("gpus", flag.ContinueOnError)
	fs.SetOutput(w)
	asJSON := fs.Bool("json", false, "print JSON")
	planFile := fs.String("plan", "", "a training plan file to check against each device")
	fake := fs.String("fake", "", "simulate GPUs instead of querying NVML, e.g. h100x8")
	sample := fs.String("sample", "", "write device-used memory over time to this CSV file (Ctrl-C or -for ends it)")
	index := fs.Int("device", 0, "-sample: the device index")
	pid := fs.Int("pid", 0, "-sample: also follow this process's memory")
	every := fs.Duration("every", 100*time.Millisecond, "-sample: interval between readings")
	span := fs.Duration("for", 0, "-sample: stop after this long (0: until interrupted)")
	catalog := fs.Bool("catalog", false, "list the catalog's GPUs (what a plan names) with their measured totals and sources, instead of this machine's")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h asked for the usage, which is printed
		}
		return err
	}
	if fs.NArg() > 0 {
		return errors.New("usage: gpus [-json] [-catalog] [-plan FILE.json] [-fake h100x8] [-sample FILE.csv -device N -pid P -every D -for D]")
	}
	if *catalog {
		return printCatalog(w, *asJSON)
	}
	if *sample != "" {
		return sampleTo(*sample, *fake, *index, *pid, *every, *span, w)
	}
	var plan *vram.Training
	if *planFile != "" {
		p, err := vram.ReadPlan(*planFile)
		if err != nil {
			return err
		}
		if p.Training == nil {
			return fmt.Errorf("%s: -plan needs a training plan", *planFile)
		}
		plan = p.Training
	}
	var s gpu.Info
	var err error
	if *fake != "" {
		s, err = gpu.Fake(*fake)
	} else {
		s, err = gpu.Snapshot()
	}
	if errors.Is(err, gpu.ErrNoDriver) || errors.Is(err, gpu.ErrUnsupported) {
		return noGPUs(w, err, *asJSON)
	}
	if err != nil {
		return err
	}
	var fits []gpu.Fit
	if plan != nil {
		for _, d := range s.Devices {
			f, err := gpu.FitsOn(*plan, d, gpu.FitOptions{Headroom: vram.DefaultHeadroom})
			if err != nil {
				return err
			}
			fits = append(fits, f)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			gpu.Info
			Fits []gpu.Fit `json:"fits,omitempty"`
		}{s, fits})
	}
	fmt.Fprint(w, s.Table())
	for _, f := range fits {
		verdict := "fits"
		if !f.Fits {
			verdict = "does NOT fit"
		}
		fmt.Fprintf(w, "GPU %s: needs %v of %v free: %s (headroom %v)\n", f.Device, f.DeviceUsed, f.Free, verdict, f.Headroom)
	}
	return nil
}

// sampleTo records device index (simulated with fake) into file until
// interrupted or span has passed.
func sampleTo(file, fake string, index, pid int, every, span time.Duration, w io.Writer) error {
	var r gpu.Reader
	var closeFn func()
	var err error
	if fake != "" {
		r, closeFn, err = gpu.OpenFakeReader(fake, index, pid)
	} else {
		r, closeFn, err = gpu.OpenReader(index, pid)
	}
	if err != nil {
		return err
	}
	defer closeFn()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if span > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, span)
		defer cancel()
	}
	fmt.Fprintf(w, "sampling device %d every %v into %s\n", index, every, file)
	if err := gpu.Record(ctx, r, every, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
