package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// modulePath identifies this repository's go.mod when looking for the root.
const modulePath = "github.com/vramlab/vramlab"

// options are the resolved, absolute locations every command works with.
// gonb resolves -go_work relative to its own temp dir, so every path that ends
// up in the kernelspec must be absolute.
type options struct {
	Root    string // repository root (holds go.mod)
	Venv    string // project virtualenv
	DataDir string // Jupyter data dir; the kernelspec goes to DataDir/kernels/vramlab
	User    bool   // use the user's Jupyter data dir
	NoWarm  bool
	NoTools bool
}

func (o *options) resolve() error {
	if o.Root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		root, err := findRoot(wd)
		if err != nil {
			return err
		}
		o.Root = root
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return err
	}
	o.Root = root
	if !isModuleRoot(root) {
		return fmt.Errorf("-root %s: no go.mod declaring module %s there", root, modulePath)
	}
	if o.Venv == "" {
		o.Venv = filepath.Join(root, ".venv")
	}
	if o.Venv, err = filepath.Abs(o.Venv); err != nil {
		return err
	}
	switch {
	case o.DataDir != "" && o.User:
		return errors.New("-data-dir and -user exclude each other")
	case o.DataDir != "":
	case o.User:
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("-user: %w", err)
		}
		o.DataDir = filepath.Join(home, ".local", "share", "jupyter")
	case os.Getenv("JUPYTER_DATA_DIR") != "":
		o.DataDir = os.Getenv("JUPYTER_DATA_DIR")
	default:
		// Jupyter searches sys.prefix/share/jupyter of the running Python,
		// so a kernelspec here is seen by the virtualenv's jupyter only.
		o.DataDir = filepath.Join(o.Venv, "share", "jupyter")
	}
	o.DataDir, err = filepath.Abs(o.DataDir)
	return err
}

// BinDir is where install puts gonb, goimports and gopls.
func (o options) BinDir() string { return filepath.Join(o.Root, ".bin") }

// KernelDir is the kernelspec directory.
func (o options) KernelDir() string { return filepath.Join(o.DataDir, "kernels", KernelName) }

// findRoot walks up from dir to the directory whose go.mod declares this module.
func findRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if isModuleRoot(d) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod for %s in %s or above it; run from the repository or pass -root", modulePath, dir)
		}
	}
}

func isModuleRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.Contains(b, []byte("module "+modulePath+"\n"))
}
