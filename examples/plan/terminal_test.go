package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets a test run the command itself: with VRAMLAB_RUN_PLAN set,
// the test binary is the plan command, stdout and stderr as main sets them.
func TestMain(m *testing.M) {
	if os.Getenv("VRAMLAB_RUN_PLAN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// runCommand runs the plan command as a user does, in a process of its own.
func runCommand(t *testing.T, args ...string) (stdout, stderr []byte) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "VRAMLAB_RUN_PLAN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run() // the exit code is the gate's
	return out.Bytes(), errOut.Bytes()
}

// TestNoEscapeReachesTheTerminal: escape sequences in a launch script's
// flags and values (a fake green "all checks passed", a window title) are
// shown as \x1b on stdout and stderr, never sent raw.
func TestNoEscapeReachesTheTerminal(t *testing.T) {
	dir := t.TempDir()
	serve := filepath.Join(dir, "serve.sh")
	os.WriteFile(serve, []byte("vllm serve gpt2 --served-model-name \"\x1b]0;pwned\a\" --\x1b[32mall-checks-passed\x1b[0m 1\n"), 0o644)
	broken := filepath.Join(dir, "broken.sh")
	os.WriteFile(broken, []byte("vllm serve gpt2 --max-model-len \"\x1b[2J\x9bhidden\"\n"), 0o644)
	for _, args := range [][]string{{serve}, {"-gpu", "H100-80GB", serve}, {broken}, {"-gpu", "\x1b[31mH100", serve}} {
		out, errOut := runCommand(t, args...)
		all := append(append([]byte{}, out...), errOut...)
		if len(all) == 0 {
			t.Fatalf("%q: no output", args)
		}
		if i := bytes.IndexAny(all, "\x1b\a\x9b"); i >= 0 || bytes.Contains(all, []byte("\xc2\x9b")) {
			t.Errorf("%q: a control byte reaches the terminal: %q", args, all)
		}
		if !strings.Contains(string(all), `\x1b`) {
			t.Errorf("%q: the escape is not shown as \\x1b:\n%s", args, all)
		}
	}
}
