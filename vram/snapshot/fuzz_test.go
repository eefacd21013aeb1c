package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram/fileio/budget"
)

// FuzzDecode: any bytes decode to a snapshot or an error, never a panic or
// a runaway allocation; what decodes rebuilds into timelines whose totals
// are consistent.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.pickle"))
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f"))
	// The shapes of the second audit: shared memo, long integers, None floods.
	f.Add(sharedMemo(8))
	f.Add([]byte("\x80\x04\x8b\x10\x00\x00\x00" + strings.Repeat("\x7f", 16) + "."))
	f.Add([]byte("L" + strings.Repeat("9", 40) + "L\n."))
	f.Add([]byte("\x80\x04](" + strings.Repeat("N", 1000) + "e."))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s *Snapshot
		var err error
		budget.Check(t, len(data), func() { s, err = Decode(data) })
		if err != nil {
			return
		}
		for _, d := range s.Devices() {
			checkRebuild(t, s, d)
		}
	})
}
