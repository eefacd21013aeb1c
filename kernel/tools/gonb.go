package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// gonb v0.11.5 reports a cell program that exits non-zero twice: its
// jpyexec writes "exit status 1" to the cell's stderr stream
// (internal/jpyexec/jpyexec.go, Executor.Exec after cmd.Wait), and its
// dispatcher publishes the same error as the cell's error output
// (internal/dispatcher/dispatcher.go, PublishExecutionError). The kernel
// builds gonb from its pinned source with the stream copy left out, except
// after an interrupt, where it reads "^C": the error output alone marks the
// cell failed, under the cell's own error line.
const (
	gonbModule    = "github.com/janpfeifer/gonb"
	gonbPatchFile = "internal/jpyexec/jpyexec.go"
	gonbBefore    = `	if exec.exitError != nil {
		errMsg := exec.exitError.Error() + "\n"
		if exec.Msg.Kernel().Interrupted.Load() {
			errMsg = "^C\n" + errMsg
		}
		_ = kernel.PublishWriteStream(exec.Msg, kernel.StreamStderr, errMsg)
	}`
	gonbAfter = `	if exec.exitError != nil && exec.Msg.Kernel().Interrupted.Load() {
		// vramlab: the error output reports the exit status; the stream
		// repeats it only after an interrupt.
		_ = kernel.PublishWriteStream(exec.Msg, kernel.StreamStderr, "^C\n"+exec.exitError.Error()+"\n")
	}`
)

// gonbSkip are the module's folders a build does not read (its docs are
// most of its 66 MB).
var gonbSkip = map[string]bool{"docs": true, "examples": true, "binder": true}

// buildPatchedGonb builds gonb, at the version go.mod pins, with the patch
// above into binDir, from a copy of its module under work.
func buildPatchedGonb(root, binDir, work string) error {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", gonbModule)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -m %s: %v", gonbModule, err)
	}
	src := strings.TrimSpace(string(out))
	dst := filepath.Join(work, "gonb")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	defer os.RemoveAll(work) // the build cache keeps what the build made
	if err := copyTree(src, dst, gonbSkip); err != nil {
		return err
	}
	if err := patchFile(filepath.Join(dst, gonbPatchFile), gonbBefore, gonbAfter); err != nil {
		return err
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return err
	}
	modFile := filepath.Join(work, "gonb-build.mod")
	mod = append(mod, []byte(fmt.Sprintf("\nreplace %s => %s\n", gonbModule, dst))...)
	if err := os.WriteFile(modFile, mod, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(strings.TrimSuffix(modFile, ".mod")+".sum", sum, 0o644); err != nil {
		return err
	}
	build := exec.Command("go", "build", "-modfile="+modFile, "-o", filepath.Join(binDir, "gonb"), gonbModule)
	build.Dir = root
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the patched gonb: %v\n%s", err, out)
	}
	return nil
}

// patchFile replaces the one occurrence of before in file with after.
func patchFile(file, before, after string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if n := strings.Count(string(b), before); n != 1 {
		return fmt.Errorf("%s: the code to patch occurs %d times, want once (has gonb's pinned version changed?)", file, n)
	}
	return os.WriteFile(file, []byte(strings.Replace(string(b), before, after, 1)), 0o644)
}

// copyTree copies the regular files under src to dst (writable), leaving
// out src's top-level folders in skip.
func copyTree(src, dst string, skip map[string]bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skip[rel] {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}
