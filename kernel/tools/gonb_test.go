package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGonbPatchApplies: the code the kernel patches is in the pinned
// gonb's source exactly once, and the patched file keeps the error for
// the dispatcher and the stream copy only after an interrupt.
func TestGonbPatchApplies(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", gonbModule).Output()
	if err != nil {
		t.Skipf("go list -m %s: %v (module cache not filled)", gonbModule, err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), gonbPatchFile)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jpyexec.go")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := patchFile(file, gonbBefore, gonbAfter); err != nil {
		t.Fatal(err)
	}
	patched, _ := os.ReadFile(file)
	if strings.Contains(string(patched), gonbBefore) || !strings.Contains(string(patched), gonbAfter) ||
		!strings.Contains(string(patched), "exec.exitError = cmd.Wait()") {
		t.Errorf("the patched file does not read as intended:\n%s", patched)
	}
	if err := patchFile(file, gonbBefore, gonbAfter); err == nil || !strings.Contains(err.Error(), "occurs 0 times") {
		t.Errorf("patching twice: %v, want an error saying the code is not there", err)
	}
}

// TestCopyTree copies regular files and leaves out the skipped folders.
func TestCopyTree(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	for _, f := range []string{"go.mod", "a/b.go", "docs/big.png"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), []byte(f), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyTree(src, dst, map[string]bool{"docs": true}); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]bool{"go.mod": true, "a/b.go": true, "docs/big.png": false} {
		_, err := os.Stat(filepath.Join(dst, f))
		if (err == nil) != want {
			t.Errorf("%s copied: %v, want %v", f, err == nil, want)
		}
	}
	if err := os.WriteFile(filepath.Join(dst, "a/b.go"), []byte("x"), 0o644); err != nil {
		t.Errorf("the copy is not writable: %v", err)
	}
}
