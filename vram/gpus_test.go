package vram

import "testing"

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
