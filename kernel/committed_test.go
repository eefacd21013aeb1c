package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoBuildOutputCommitted: the repository holds sources, never what a
// build makes — no executable or object file (ELF, Mach-O, PE, an ar
// archive), no compiled Python, no test binary. `go build ./examples/...`
// in the root leaves binaries there; .gitignore names them, and this test
// catches one committed anyway.
func TestNoBuildOutputCommitted(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing to check", err)
	}
	magics := map[string][]byte{
		"an ELF executable or object": {0x7f, 'E', 'L', 'F'},
		"a Mach-O binary":             {0xcf, 0xfa, 0xed, 0xfe},
		"a Windows PE binary":         []byte("MZ"),
		"an ar archive (.a)":          []byte("!<arch>\n"),
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 10 {
		t.Fatalf("git ls-files listed %d files", len(files))
	}
	for _, f := range files {
		for _, ext := range []string{".pyc", ".test", ".o", ".so", ".exe"} {
			if strings.HasSuffix(f, ext) {
				t.Errorf("%s is committed: a build output (%s)", f, ext)
			}
		}
		head := make([]byte, 8)
		fh, err := os.Open(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree
		}
		n, _ := fh.Read(head)
		fh.Close()
		for what, magic := range magics {
			if bytes.HasPrefix(head[:n], magic) {
				t.Errorf("%s is committed: %s (build outputs are never committed; .gitignore them)", f, what)
			}
		}
	}
}
