package vram

import (
	"strings"
	"testing"
)

// TestLookupGPUByEveryName: every catalog name and alias, written as a
// user might (upper case, spaces for dashes), finds the first catalog GPU
// that declares it, as a scan of the catalog in order does.
func TestLookupGPUByEveryName(t *testing.T) {
	scan := func(name string) string {
		n := normGPU(name)
		for _, g := range gpus {
			if normGPU(g.Name) == n {
				return g.Name
			}
			for _, a := range g.Aliases {
				if normGPU(a) == n {
					return g.Name
				}
			}
		}
		return ""
	}
	for _, g := range gpus {
		for _, name := range append([]string{g.Name}, g.Aliases...) {
			for _, typed := range []string{name, upperSpaced(name)} {
				got, err := LookupGPU(typed)
				if want := scan(typed); err != nil || got.Name != want {
					t.Errorf("LookupGPU(%q) = %q, %v; the catalog's first match is %q", typed, got.Name, err, want)
				}
			}
		}
	}
	if _, err := LookupGPU("no such gpu"); err == nil {
		t.Error("an unknown name is found")
	}
}

// upperSpaced is name in upper case with its dashes as spaces.
func upperSpaced(name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = ' '
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestUnknownGPUSuggestsOnlyItsKind: a GPU the catalog lacks is not taken
// for another generation (B400 is no B300, MI450X no MI355X); a misspelt one
// is found; each refusal says how to give a card by its capacity.
func TestUnknownGPUSuggestsOnlyItsKind(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"B400", ""}, {"MI450X", ""}, {"H100-PCI", `did you mean "H100-PCIe"?`}, {"RTX-409", ""}, {"A100-80G", `did you mean "A100-80GB"?`},
	} {
		_, err := LookupGPU(c.name)
		if err == nil || !strings.Contains(err.Error(), `given by its capacity, such as "80 GiB"`) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := strings.Contains(err.Error(), "did you mean"); got != (c.want != "") || c.want != "" && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	_, err := FromHFConfig([]byte(`{"model_type": "gemma5"}`))
	if err == nil || !strings.Contains(err.Error(), "the nearest it models: gemma, gemma2, gemma3, gemma3_text, gemma3n_text, gemma4") || !strings.Contains(err.Error(), "vram/family_gemma5.go") {
		t.Errorf("gemma5: %v", err)
	}
}
