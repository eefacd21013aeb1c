package fileio

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenRefuses: directories, FIFOs, devices and files over their cap are
// refused without blocking; a regular file within its cap reads.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs:", err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 100), 0o644)
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte("hello"), 0o644)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, c := range []struct {
		name string
		read func() error
		want string
	}{
		{"fifo", func() error { _, err := Read(fifo, 10); return err }, "is a special file"},
		{"fifo in root", func() error { _, err := ReadIn(root, "fifo", 10); return err }, "is a special file"},
		{"directory", func() error { _, err := Read(dir, 10); return err }, "is a directory"},
		{"device", func() error { _, err := Read("/dev/zero", 10); return err }, "is a special file"},
		{"over the cap", func() error { _, err := Read(big, 10); return err }, "more than the 10"},
		{"missing", func() error { _, err := Read(filepath.Join(dir, "none"), 10); return err }, "no such file"},
	} {
		done := make(chan error, 1)
		go func() { done <- c.read() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", c.name, err, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: blocked", c.name)
		}
	}
	if b, err := Read(ok, 10); err != nil || string(b) != "hello" {
		t.Errorf("regular file: %q, %v", b, err)
	}
	if b, err := ReadIn(root, "ok", -1); err == nil {
		t.Errorf("limit -1 reads %q: ReadIn needs a cap", b)
	}
}
