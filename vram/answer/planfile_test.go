package answer

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/importer"
)

// TestPlanFileRoundTrip: a plan written by Plan.File reads back to the
// same answer, for every example plan and every config the importer's
// tests hold that imports on an H100 with eight GPUs.
func TestPlanFileRoundTrip(t *testing.T) {
	same := func(name string, p vram.Plan) {
		t.Helper()
		b, err := p.File()
		if err != nil {
			t.Logf("%s: %v", name, err)
			return
		}
		p2, err := vram.ParsePlan(b, ".")
		if err != nil {
			t.Errorf("%s: the written plan does not read back: %v\n%s", name, err, b)
			return
		}
		r1, err1 := For(p, nil)
		r2, err2 := For(p2, nil)
		j1, _ := json.Marshal(r1)
		j2, _ := json.Marshal(r2)
		if (err1 == nil) != (err2 == nil) || !bytes.Equal(j1, j2) {
			t.Errorf("%s: the written plan answers differently (%v, %v)\n%s", name, err1, err2, b)
		}
	}
	files, _ := filepath.Glob("../../examples/plans/*.json")
	for _, f := range files {
		p, err := vram.ReadPlan(f)
		if err != nil {
			t.Fatal(err)
		}
		same(f, p)
	}
	n := 0
	filepath.WalkDir("../importer/testdata/configs", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		imp, err := importer.Read(path, importer.Options{GPU: "H100-80GB", GPUs: 8})
		if err != nil {
			return nil
		}
		imp.Plan.GPU = "H100-80GB"
		same(path, imp.Plan)
		n++
		return nil
	})
	if n < 20 {
		t.Errorf("round-tripped %d imported configs, want the importer's test configs (20 or more)", n)
	}
}
