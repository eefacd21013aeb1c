package snapshot

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

func fixture(t *testing.T, name string) *Snapshot {
	t.Helper()
	s, err := ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkRebuild: at every point the categories add up to allocated, and
// allocated, active and reserved are never negative.
func checkRebuild(t *testing.T, s *Snapshot, device int) {
	t.Helper()
	r, err := s.Rebuild(device)
	if err != nil {
		return // a trace that adds up past any GPU, or none for the device
	}
	for _, p := range r.Points {
		if p.Live.Total() != p.Allocated || p.Allocated < 0 || p.Reserved < 0 || p.Active < p.Allocated {
			t.Fatalf("entry %d: allocated %v, by category %v, active %v, reserved %v", p.Index, p.Allocated, p.Live.Total(), p.Active, p.Reserved)
		}
	}
	if len(r.Points) > 0 && r.Peak().Allocated < r.Points[len(r.Points)-1].Allocated {
		t.Fatalf("peak %v below the last point", r.Peak().Allocated)
	}
}

// TestRebuildTraining: the fixture's step replayed by hand. The trace adds
// 13 MiB; the snapshot holds 13 MiB + 512 B, so 512 B came before it.
// Allocated peaks at 21 MiB + 512 B in the optimizer step (weights 4 MiB,
// batch 1 MiB, gradient 4 MiB, two AdamW states 8 MiB, foreach scratch
// 4 MiB); reserved at 62 MiB when the third segment arrives.
func TestRebuildTraining(t *testing.T) {
	s := fixture(t, "training.p4.pickle")
	r, err := s.Rebuild(0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Before != 512 || r.ReservedBefore != 2*MiB || !r.Marked {
		t.Errorf("before the trace: %v allocated, %v reserved; marked %v", r.Before, r.ReservedBefore, r.Marked)
	}
	p := r.Peak()
	want := vram.Breakdown{Parameters: 4 * MiB, Gradients: 4 * MiB, OptimizerStates: 8 * MiB, Temporaries: 4 * MiB, Other: MiB + 512}
	if p.Live != want || p.Allocated != want.Total() || p.Phase != Optimizer || p.Iteration != 1 {
		t.Errorf("peak at %s: %+v (allocated %v), want %+v", p.Where(), p.Live, p.Allocated, want)
	}
	if rp := r.Points[r.PeakReserved]; rp.Reserved != 62*MiB || rp.Index != 17 {
		t.Errorf("reserved peak %v at entry %d", rp.Reserved, rp.Index)
	}
	cats := map[string]vram.Bytes{}
	for _, a := range r.Allocations {
		cats[a.Category] += a.Size
	}
	wantCats := map[string]vram.Bytes{"parameters": 4 * MiB, "other": MiB, "activations": 4 * MiB, "temporaries": 7 * MiB, "gradients": 4 * MiB, "optimizer_states": 8 * MiB}
	for c, n := range wantCats {
		if cats[c] != n {
			t.Errorf("%s: %v, want %v", c, cats[c], n)
		}
	}
	last := r.Points[len(r.Points)-1]
	if last.Allocated != s.Allocated(0) || last.Reserved != s.Reserved(0) {
		t.Errorf("the replay ends at %v / %v, the snapshot holds %v / %v", last.Allocated, last.Reserved, s.Allocated(0), s.Reserved(0))
	}
	if len(r.OOMs) != 1 || r.OOMs[0].DeviceFree != 12*MiB {
		t.Errorf("OOMs %+v", r.OOMs)
	}
	groups := r.LiveAt(r.PeakAllocated)
	if len(groups) == 0 || groups[0].Bytes != 8*MiB || !strings.Contains(groups[0].Origin, "train.py:44") || groups[0].Category != "optimizer_states" {
		t.Errorf("largest group at the peak: %+v", groups)
	}
	var total vram.Bytes
	for _, g := range groups {
		total += g.Bytes
	}
	if total != p.Allocated {
		t.Errorf("groups add up to %v, the peak is %v", total, p.Allocated)
	}
	checkRebuild(t, s, 0)
}

// TestPhasesFromFrames: without markers, the stack says the phase: the
// autograd engine's C++ frames, torch/optim, a module's forward.
func TestPhasesFromFrames(t *testing.T) {
	s := fixture(t, "training.p4.pickle")
	for i := range s.Traces[0] {
		s.Traces[0][i].UserMetadata = ""
	}
	r, err := s.Rebuild(0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Marked {
		t.Error("marked without markers")
	}
	p := r.Peak()
	if p.Phase != Optimizer || p.Live.OptimizerStates != 8*MiB || p.Live.Gradients != 4*MiB {
		t.Errorf("peak at %s: %+v", p.Where(), p.Live)
	}
	for _, c := range []struct {
		frames []Frame
		want   string
	}{
		{[]Frame{{Filename: "??", Name: "torch::autograd::Engine::thread_main()"}}, Backward},
		{[]Frame{{Filename: "/x/torch/optim/adamw.py", Name: "_single_tensor_adamw"}}, Optimizer},
		{[]Frame{{Filename: "/x/torch/nn/modules/module.py", Name: "_call_impl"}}, Forward},
		{[]Frame{{Filename: "/tmp/torchinductor_u/ab/c.py", Name: "call"}}, Forward},
		{[]Frame{{Filename: "train.py", Name: "<module>"}}, Other},
		{nil, ""},
	} {
		if got := phaseOfFrames(c.frames); got != c.want {
			t.Errorf("%+v: %q, want %q", c.frames, got, c.want)
		}
	}
}

// TestRebuildErrors: a device without a trace, a trace past any GPU.
func TestRebuildErrors(t *testing.T) {
	s := fixture(t, "legacy.p4.pickle")
	if _, err := s.Rebuild(3); err == nil {
		t.Error("device 3: no error")
	}
	big := &Snapshot{Traces: [][]Event{{}}}
	for i := 0; i < 1<<17; i++ {
		big.Traces[0] = append(big.Traces[0], Event{Action: Alloc, Addr: uint64(i), Size: maxSize})
	}
	if _, err := big.Rebuild(0); err == nil || !strings.Contains(err.Error(), "not a real run") {
		t.Errorf("2^57 bytes: %v", err)
	}
}

// TestCompareExample: the example run (a tiny Llama's two AdamW steps,
// recorded on the CPU) beside the prediction for its plan: the allocated
// peak within 1 %, at the same place, every category within 5 %.
func TestCompareExample(t *testing.T) {
	s, err := ReadFile(filepath.Join("..", "..", "examples", "snapshot", "tiny-llama.snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Rebuild(0)
	if err != nil {
		t.Fatal(err)
	}
	if r.OnGPU() {
		t.Error("a CPU recording reads as a GPU run")
	}
	p, err := vram.ReadPlan(filepath.Join("..", "..", "examples", "snapshot", "tiny-llama.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(r, *p.Training, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(c.Real.Allocated, c.Predicted.Total()); d < -1 || d > 1 {
		t.Errorf("allocated peak: real %v, predicted %v (%+.1f %%)", c.Real.Allocated, c.Predicted.Total(), d)
	}
	if !strings.HasPrefix(c.PredictedAt, c.Real.Where()) {
		t.Errorf("peak at %q, predicted at %q", c.Real.Where(), c.PredictedAt)
	}
	for _, cat := range vram.Categories {
		r, p := c.Real.Live.Get(cat), c.Predicted.Get(cat)
		if r+p > vram.MiB && (Diff(r, p) < -5 || Diff(r, p) > 5) {
			t.Errorf("%s: real %v, predicted %v", cat, r, p)
		}
	}
	rows := c.Rows()
	if rows[0][0] != "allocated peak" || len(rows) < 6 {
		t.Errorf("rows %v", rows)
	}
	if len(c.Unexplained) != 0 {
		t.Errorf("the example's run holds nothing unpredicted: %+v", c.Unexplained)
	}
	// Held against a plan with SGD (no optimizer states), the run's AdamW
	// states are what it holds unpredicted, by the line that stepped.
	sgd := *p.Training
	sgd.Optimizer = "sgd"
	cs, err := Compare(r, sgd, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Unexplained) == 0 || cs.Unexplained[0].Category != "optimizer_states" || cs.Unexplained[0].Bytes < 25*MiB || cs.Unexplained[0].Bytes > 27*MiB ||
		!strings.Contains(cs.Unexplained[0].Origin, "measure.py") {
		t.Errorf("against SGD: %+v", cs.Unexplained)
	}
	// On a GPU the prediction includes cuBLAS's workspace.
	gs := fixture(t, "training.p4.pickle")
	gr, _ := gs.Rebuild(0)
	g, _ := vram.LookupGPU("H100-80GB")
	gc, err := Compare(gr, *p.Training, &g)
	if err != nil {
		t.Fatal(err)
	}
	if !gr.OnGPU() || gc.Predicted.Other != c.Predicted.Other+32*MiB || gc.RealReserved != 62*MiB {
		t.Errorf("GPU run: other %v (CPU %v), real reserved %v", gc.Predicted.Other, c.Predicted.Other, gc.RealReserved)
	}
}
