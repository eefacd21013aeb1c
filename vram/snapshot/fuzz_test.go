package snapshot

import (
	"os"
	"path/filepath"
	"testing"
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
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			return
		}
		for _, d := range s.Devices() {
			checkRebuild(t, s, d)
		}
	})
}
