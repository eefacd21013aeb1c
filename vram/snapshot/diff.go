package snapshot

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// RunDiff holds two memory states side by side at their allocated peaks
// — two runs, or a run and the engine's prediction for its plan — by
// engine category and, between two runs, by where the memory was
// allocated (the first stack frame outside PyTorch: the module's line
// that made it); the largest differences first.
//
//	d := snapshot.DiffRuns(before, after, "bf16", "bf16 + checkpointing")
//	charts.Display(charts.TableOf(charts.Table{Columns: d.Columns(), Rows: d.Rows(10)}))
type RunDiff struct {
	A, B         string     // the two sides' labels
	AAt, BAt     string     // where each peak is
	APeak, BPeak vram.Bytes // each side's allocated peak
	Categories   []DiffRow  // every category either side holds
	Origins      []DiffRow  // by allocation site; two runs only
}

// DiffRow is one category or allocation site on both sides.
type DiffRow struct {
	Name     string // the category, or the allocation site
	Category string
	A, B     vram.Bytes
	ACount   int // tensors on each side (allocation sites)
	BCount   int
}

// Delta is B − A.
func (r DiffRow) Delta() vram.Bytes { return r.B - r.A }

// DiffRuns compares two runs at their allocated peaks.
func DiffRuns(a, b *Run, aLabel, bLabel string) RunDiff {
	pa, pb := a.Peak(), b.Peak()
	d := RunDiff{A: aLabel, B: bLabel, AAt: pa.Where(), BAt: pb.Where(), APeak: pa.Allocated, BPeak: pb.Allocated}
	d.Categories = categoryRows(pa.Live, pb.Live)
	sites := map[[2]string]*DiffRow{}
	add := func(gs []Group, side int) {
		for _, g := range gs {
			k := [2]string{g.Origin, g.Category}
			r := sites[k]
			if r == nil {
				r = &DiffRow{Name: g.Origin, Category: g.Category}
				sites[k] = r
			}
			if side == 0 {
				r.A, r.ACount = r.A+g.Bytes, r.ACount+g.Count
			} else {
				r.B, r.BCount = r.B+g.Bytes, r.BCount+g.Count
			}
		}
	}
	add(a.LiveAt(a.PeakAllocated), 0)
	add(b.LiveAt(b.PeakAllocated), 1)
	for _, r := range sites {
		if r.A != r.B {
			d.Origins = append(d.Origins, *r)
		}
	}
	sortRows(d.Origins)
	return d
}

// DiffPredicted compares a run with the engine's prediction for plan t
// (on gpu, nil for a CPU recording): B is the prediction at its peak, with
// cuBLAS's workspace where the run was on a GPU, as Compare counts it.
func DiffPredicted(run *Run, t vram.Training, gpu *vram.GPU) (RunDiff, error) {
	c, err := Compare(run, t, gpu)
	if err != nil {
		return RunDiff{}, err
	}
	d := RunDiff{A: "your run", B: "prediction", AAt: c.Real.Where(), BAt: c.PredictedAt, APeak: c.Real.Allocated, BPeak: c.Predicted.Total()}
	d.Categories = categoryRows(c.Real.Live, c.Predicted)
	return d, nil
}

func categoryRows(a, b vram.Breakdown) []DiffRow {
	var rows []DiffRow
	for _, cat := range vram.Categories {
		r := DiffRow{Name: cat, Category: cat, A: a.Get(cat), B: b.Get(cat)}
		if r.A != 0 || r.B != 0 {
			rows = append(rows, r)
		}
	}
	sortRows(rows)
	return rows
}

// sortRows puts the largest differences first (then by name, for a
// stable order).
func sortRows(rows []DiffRow) {
	sort.Slice(rows, func(i, j int) bool {
		di, dj := abs(rows[i].Delta()), abs(rows[j].Delta())
		if di != dj {
			return di > dj
		}
		return rows[i].Name+rows[i].Category < rows[j].Name+rows[j].Category
	})
}

func abs(b vram.Bytes) vram.Bytes {
	if b < 0 {
		return -b
	}
	return b
}

// Columns are the table's headings for Rows.
func (d RunDiff) Columns() []string { return []string{"", d.A, d.B, "difference"} }

// Rows are the diff as a table: the peaks and where they are, each
// category, then the n allocation sites that differ most.
func (d RunDiff) Rows(n int) [][]string {
	rows := [][]string{
		{"allocated peak", d.APeak.String(), d.BPeak.String(), signed(d.BPeak - d.APeak)},
		{"where", d.AAt, d.BAt, ""},
	}
	for _, r := range d.Categories {
		rows = append(rows, []string{"  " + strings.ReplaceAll(r.Name, "_", " "), r.A.String(), r.B.String(), signed(r.Delta())})
	}
	for i, r := range d.Origins {
		if i == n {
			break
		}
		rows = append(rows, []string{fmt.Sprintf("%s (%s)", r.Name, strings.ReplaceAll(r.Category, "_", " ")),
			fmt.Sprintf("%v in %d", r.A, r.ACount), fmt.Sprintf("%v in %d", r.B, r.BCount), signed(r.Delta())})
	}
	return rows
}

// signed writes a difference with its sign.
func signed(b vram.Bytes) string {
	if b >= 0 {
		return "+" + b.String()
	}
	return "−" + (-b).String()
}
