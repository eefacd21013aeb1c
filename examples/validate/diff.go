package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/snapshot"
)

// diff prints two memory states side by side at their allocated peaks:
// a snapshot against a second snapshot (by category, then the sites that
// differ most), or against the prediction of a plan file (by category).
//
//	validate -diff A.snapshot.pickle B.snapshot.pickle
//	validate -diff A.snapshot.pickle PLAN.json [-gpu NAME]
func diff(a, b, gpuName string, sites int, w io.Writer) error {
	ra, err := readRun(a)
	if err != nil {
		return err
	}
	var d snapshot.RunDiff
	if strings.HasSuffix(b, ".json") {
		if d, err = diffPlan(ra, b, gpuName); err != nil {
			return err
		}
	} else {
		rb, err := readRun(b)
		if err != nil {
			return err
		}
		d = snapshot.DiffRuns(ra, rb, filepath.Base(a), filepath.Base(b))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range append([][]string{d.Columns()}, d.Rows(sites)...) {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func diffPlan(run *snapshot.Run, planFile, gpuName string) (snapshot.RunDiff, error) {
	p, err := vram.ReadPlan(planFile)
	if err != nil {
		return snapshot.RunDiff{}, err
	}
	if p.Training == nil {
		return snapshot.RunDiff{}, fmt.Errorf("%s: -diff needs a training plan (a snapshot records a training run)", planFile)
	}
	var g *vram.GPU
	if gpuName != "" {
		x, err := vram.LookupGPU(gpuName)
		if err != nil {
			return snapshot.RunDiff{}, err
		}
		g = &x
	}
	return snapshot.DiffPredicted(run, *p.Training, g)
}

// readRun reads a snapshot and rebuilds its first device's run.
func readRun(file string) (*snapshot.Run, error) {
	s, err := snapshot.ReadFile(file)
	if err != nil {
		return nil, err
	}
	devs := s.Devices()
	if len(devs) == 0 {
		return nil, fmt.Errorf("%s: the snapshot recorded no device (was _record_memory_history() called before the run?)", file)
	}
	return s.Rebuild(devs[0])
}

var errDiffArgs = errors.New("usage: validate -diff A.snapshot.pickle (B.snapshot.pickle | PLAN.json) [-gpu NAME] [-sites N]")
