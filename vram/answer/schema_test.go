package answer

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/vramlab/vramlab/vram"
)

var update = flag.Bool("update", false, "rewrite plan.schema.json and report.schema.json")

// TestSchemaFiles holds the published schemas to the Go types: the files
// are what Schema writes (go test ./vram/answer -update rewrites them).
func TestSchemaFiles(t *testing.T) {
	for _, which := range []string{"plan", "report"} {
		got, err := Schema(which)
		if err != nil {
			t.Fatal(err)
		}
		file := which + ".schema.json"
		if *update {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what Schema(%q) writes: the types changed; go test ./vram/answer -update", file, which)
		}
	}
	if _, err := Schema("plans"); err == nil || !strings.Contains(err.Error(), `"plan", "report"`) {
		t.Errorf("Schema(\"plans\") = %v, want the error naming the two schemas", err)
	}
}

// TestPlanSchemaKeys: the schema's top level has the keys ParsePlan reads.
func TestPlanSchemaKeys(t *testing.T) {
	var keys []string
	tp := reflect.TypeFor[planFile]()
	for i := range tp.NumField() {
		keys = append(keys, strings.Split(tp.Field(i).Tag.Get("json"), ",")[0])
	}
	slices.Sort(keys)
	want := slices.Sorted(slices.Values(vram.PlanKeys()))
	if !slices.Equal(keys, want) {
		t.Errorf("plan schema keys %v, ParsePlan reads %v", keys, want)
	}
}

func resolved(t *testing.T, which string) *jsonschema.Resolved {
	t.Helper()
	b, err := Schema(which)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s schema: %v", which, err)
	}
	return rs
}

func asJSONValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPlansValidate: every plan file the project holds that ParsePlan
// reads validates against the plan schema, and a plan ParsePlan refuses
// for an unknown key or a wrong type the schema refuses too.
func TestPlansValidate(t *testing.T) {
	rs := resolved(t, "plan")
	n := 0
	for _, root := range []string{"../../examples/plans", "../../examples/measure/gpu-grid", "../testdata"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if _, err := vram.ParsePlan(data, filepath.Dir(path)); err != nil {
				return nil // not a plan (a trace, a config), or one the tests refuse on purpose
			}
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				return err
			}
			if err := rs.Validate(v); err != nil {
				t.Errorf("%s: ParsePlan reads it, the schema refuses it: %v", path, err)
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 25 {
		t.Errorf("validated %d plan files, want the examples, the GPU grid's and the test plans (25 or more)", n)
	}
	good := `{"model": "llama-3-8b", "inference": {"batch": 1, "prompt_tokens": 10}}` // each bad plan breaks it once
	var gv any
	if err := json.Unmarshal([]byte(good), &gv); err != nil {
		t.Fatal(err)
	}
	if _, err := vram.ParsePlan([]byte(good), "."); err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(gv); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"model": "llama-3-8b", "inference": {"batch": 1, "prompt_tokens": 10}, "gpus": 8}`,
		`{"model": "llama-3-8b", "inference": {"batch": "one", "prompt_tokens": 10}}`,
		`{"model": "llama-3-8b", "train": {"model": "llama-3-8b"}}`,
		`{"inference": {"batch": 1}}`,
		`{"model": "llama-3-8b", "inference": {"batch": 1}, "train": {"batch": 1}}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(bad), &v); err != nil {
			t.Fatal(err)
		}
		if _, err := vram.ParsePlan([]byte(bad), "."); err == nil {
			t.Errorf("ParsePlan read %s", bad)
		}
		if err := rs.Validate(v); err == nil {
			t.Errorf("the plan schema accepts %s, which ParsePlan refuses", bad)
		}
	}
}

// TestReportsValidate: the answer for every example plan, on its own GPU,
// on an H100 and on a card too small for most (advice), validates against
// the report schema.
func TestReportsValidate(t *testing.T) {
	rs := resolved(t, "report")
	files, err := filepath.Glob("../../examples/plans/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("example plans: %v %v", files, err)
	}
	advised := 0
	for _, f := range files {
		for _, gpu := range []string{"", "H100-80GB", "RTX-4090"} {
			p, err := vram.ReadPlan(f)
			if err != nil {
				t.Fatal(err)
			}
			if gpu != "" {
				p.GPU = gpu
			}
			rep, err := For(p, nil)
			if err != nil {
				t.Fatalf("%s on %q: %v", f, gpu, err)
			}
			if len(rep.Advice) > 0 {
				advised++
			}
			if err := rs.Validate(asJSONValue(t, rep)); err != nil {
				t.Errorf("%s on %q: the answer does not validate: %v", f, gpu, err)
			}
		}
	}
	if advised == 0 {
		t.Error("no answer held advice: the schema's advice is untested")
	}
}
