// Command tools builds the kernel's tools into <root>/.bin: goimports and
// gopls as go.mod's tool directives pin them, gonb at its pinned version
// with one patch (gonb.go). It is a command of its own, reading only its
// own files and go.mod, so the container's tools layer rebuilds only when
// they change.
//
//	go run ./kernel/tools [-root DIR]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tools:", err)
		os.Exit(1)
	}
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("tools", flag.ContinueOnError)
	root := fs.String("root", "", "repository root (default: the directory holding go.mod, found from the working directory)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		*root = r
	}
	bin := filepath.Join(*root, ".bin")
	start := time.Now()
	fmt.Fprintf(w, "building gonb, goimports, gopls into %s\n", bin)
	cmd := exec.Command("go", "install", "golang.org/x/tools/cmd/goimports", "golang.org/x/tools/gopls")
	cmd.Dir = *root
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go install goimports gopls: %v\n%s", err, out)
	}
	if err := buildPatchedGonb(*root, bin, filepath.Join(bin, ".src")); err != nil {
		return err
	}
	fmt.Fprintf(w, "  done in %.1fs\n", time.Since(start).Seconds())
	return nil
}

// findRoot is the nearest directory at or above the working directory
// that holds a go.mod.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory; pass -root")
		}
		dir = parent
	}
}
