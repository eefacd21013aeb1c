package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

const MiB = vram.MiB

// TestReadFixtures: the hand-built snapshots, at pickle protocols 0, 2, 4
// and 5, read to the same content: every trace action, every frame shape
// (Python, C++, FX-generated, none), the legacy block history, two devices.
func TestReadFixtures(t *testing.T) {
	for _, name := range []string{"training", "two-devices", "legacy", "expandable"} {
		var first string
		for _, proto := range []int{0, 2, 4, 5} {
			s, err := ReadFile(filepath.Join("testdata", fmt.Sprintf("%s.p%d.pickle", name, proto)))
			if err != nil {
				t.Fatalf("%s p%d: %v", name, proto, err)
			}
			got := fmt.Sprintf("%+v", *s)
			if first == "" {
				first = got
			} else if got != first {
				t.Errorf("%s: protocol %d reads differently from protocol 0", name, proto)
			}
		}
	}
	s, err := ReadFile(filepath.Join("testdata", "training.p4.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]int{}
	for _, e := range s.Traces[0] {
		actions[e.Action]++
	}
	for _, e := range fixture(t, "expandable.p4.pickle").Traces[0] {
		actions[e.Action]++
	}
	for _, a := range []string{Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, SegmentMap, SegmentUnmap, OOM, SnapshotTaken, Annotate} {
		if actions[a] == 0 {
			t.Errorf("no %s entry read", a)
		}
	}
	if got := s.Reserved(0); got != 42*MiB {
		t.Errorf("reserved %v, want 42 MiB", got)
	}
	if got := s.Allocated(0); got != 13*MiB+512 {
		t.Errorf("allocated %v, want 13 MiB + 512 B", got)
	}
	var cpp, fx, py bool
	for _, e := range s.Traces[0] {
		for _, f := range e.Frames {
			cpp = cpp || f.Filename == "??" && strings.Contains(f.Name, "autograd::Engine")
			fx = fx || f.FXNode == "mm_1"
			py = py || f.Filename == "train.py" && f.Line > 0
		}
	}
	if !cpp || !fx || !py {
		t.Errorf("frames: C++ %v, FX %v, Python %v", cpp, fx, py)
	}
	oom := s.Traces[0][len(s.Traces[0])-2]
	if oom.Action != OOM || oom.DeviceFree != 12*MiB || oom.Size != 64*1024*MiB {
		t.Errorf("oom entry %+v", oom)
	}
	leg, err := ReadFile(filepath.Join("testdata", "legacy.p4.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	if b := leg.Segments[0].Blocks[0]; b.RequestedSize != 1000000 || len(b.Frames) == 0 {
		t.Errorf("legacy block %+v", b)
	}
	ex, err := ReadFile(filepath.Join("testdata", "expandable.p4.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ex.Rebuild(0)
	if err != nil {
		t.Fatal(err)
	}
	if !ex.Segments[0].Expandable || r.Points[r.PeakReserved].Reserved != 40*MiB || r.Points[len(r.Points)-1].Reserved != 20*MiB || r.Peak().Allocated != 36*MiB {
		t.Errorf("expandable segments: reserved peak %v, last %v, allocated peak %v", r.Points[r.PeakReserved].Reserved, r.Points[len(r.Points)-1].Reserved, r.Peak().Allocated)
	}
	two, err := ReadFile(filepath.Join("testdata", "two-devices.p4.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	if len(two.Traces) != 2 || len(two.Traces[1]) != 0 || fmt.Sprint(two.Devices()) != "[0]" {
		t.Errorf("two devices: %d traces, devices %v", len(two.Traces), two.Devices())
	}
}

// TestNotSnapshots: other files are errors that say what they are.
func TestNotSnapshots(t *testing.T) {
	for file, want := range map[string]string{
		"not-a-snapshot.reduce.pickle":    "builds Python objects (STACK_GLOBAL",
		"not-a-snapshot.truncated.pickle": "truncated",
		"not-a-snapshot.list.pickle":      "should be a dict, is a list",
		"not-a-snapshot.json":             "not a pickle",
	} {
		_, err := ReadFile(filepath.Join("testdata", file))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", file, err, want)
		}
	}
	for name, data := range map[string]string{
		"empty":            "",
		"global":           "cos\nsystem\n(S'echo x'\ntR.",
		"huge length":      "\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f",
		"huge frame":       "\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\x7f}.",
		"bad memo":         "\x80\x04h\x05.",
		"no stop":          "\x80\x04}",
		"newer protocol":   "\x80\x09}.",
		"pop empty":        "0.",
		"two values":       "KK.",
		"dict without key": "\x80\x04}\x8c\x08segments]s.",
	} {
		if _, err := Decode([]byte(data)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Read(strings.NewReader(strings.Repeat("x", 100)), 10); err == nil || !strings.Contains(err.Error(), "more than 10 bytes") {
		t.Errorf("over the limit: %v", err)
	}
	dir := t.TempDir()
	if _, err := ReadFile(dir); err == nil {
		t.Error("a folder: no error")
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(filepath.Join(dir, "x")); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file: %v", err)
	}
}
