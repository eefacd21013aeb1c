package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fakeRoot makes a repository root with this module's go.mod and executable
// stand-ins for the tools, so install can run with -no-tools.
func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+modulePath+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, ".bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		if err := os.WriteFile(filepath.Join(bin, tool), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestInstallWritesKernelSpec(t *testing.T) {
	root := fakeRoot(t)
	data := t.TempDir()
	var out bytes.Buffer
	if err := run([]string{"install", "-root", root, "-data-dir", data, "-no-tools", "-no-warm"}, &out); err != nil {
		t.Fatalf("install: %v\n%s", err, out.String())
	}
	dir := filepath.Join(data, "kernels", KernelName)
	b, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec kernelSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	wantArgv := []string{filepath.Join(root, ".bin", "gonb"), "--kernel", "{connection_file}",
		"-logtostderr=false", "-stderrthreshold=FATAL", "-log_file=/dev/null", "-go_work=" + root}
	if strings.Join(spec.Argv, " ") != strings.Join(wantArgv, " ") {
		t.Errorf("argv = %q, want %q", spec.Argv, wantArgv)
	}
	for _, a := range spec.Argv {
		if strings.HasPrefix(a, "-go_work=") && !filepath.IsAbs(strings.TrimPrefix(a, "-go_work=")) {
			t.Errorf("-go_work must be absolute (gonb resolves it against its temp dir): %q", a)
		}
	}
	if spec.DisplayName != "Go (VRAM Lab)" || spec.Language != "go" {
		t.Errorf("display_name, language = %q, %q", spec.DisplayName, spec.Language)
	}
	for k, want := range map[string]string{"GOPROXY": "off", "GOTOOLCHAIN": "local", "GOFLAGS": "-ldflags=-s", "VRAMLAB_ROOT": root} {
		if spec.Env[k] != want {
			t.Errorf("env %s = %q, want %q", k, spec.Env[k], want)
		}
	}
	if !strings.HasPrefix(spec.Env["PATH"], filepath.Join(root, ".bin")+":") || !strings.HasSuffix(spec.Env["PATH"], ":${PATH}") {
		t.Errorf("env PATH = %q: want the tools first and the server's PATH last", spec.Env["PATH"])
	}
	for _, name := range []string{"logo-svg.svg", "logo-32x32.png", "logo-64x64.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("logo: %v", err)
		}
	}

	// Uninstall removes the kernelspec and the tools, and says so.
	out.Reset()
	if err := run([]string{"uninstall", "-root", root, "-data-dir", data}, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("kernelspec still there after uninstall: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, ".bin", "gonb")); !os.IsNotExist(err) {
		t.Errorf("gonb still there after uninstall: %v", err)
	}
	if !strings.Contains(out.String(), "removed kernelspec") {
		t.Errorf("uninstall output %q does not report what it removed", out.String())
	}
}

func TestDoctorReportsMissingPieces(t *testing.T) {
	root := fakeRoot(t)
	// Leave out gopls and the kernelspec; there is no .venv either.
	if err := os.Remove(filepath.Join(root, ".bin", "gopls")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run([]string{"doctor", "-root", root, "-data-dir", t.TempDir()}, &out)
	if err == nil {
		t.Fatalf("doctor passed on a broken setup:\n%s", out.String())
	}
	report := out.String()
	for _, want := range []string{
		"[FAIL] tools        missing from " + filepath.Join(root, ".bin") + ": gopls",
		"fix: go run ./kernel install",
		"[FAIL] jupyter",
		"fix: make setup",
		"[FAIL] kernelspec",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("doctor report lacks %q:\n%s", want, report)
		}
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing command"},
		{[]string{"instal"}, `unknown command "instal"`},
		{[]string{"install", "extra"}, "takes no arguments"},
		{[]string{"install", "-user", "-data-dir", "/x"}, "exclude each other"},
		{[]string{"doctor", "-root", "/"}, "no go.mod declaring module"},
	} {
		err := run(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestLogoPNG(t *testing.T) {
	for _, n := range []int{32, 64} {
		img, err := png.Decode(bytes.NewReader(logoPNG(n)))
		if err != nil {
			t.Fatal(err)
		}
		if b := img.Bounds(); b.Dx() != n || b.Dy() != n {
			t.Errorf("logo %d: size %v", n, b)
		}
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		have, want []string
		ok         bool
	}{
		{[]string{"1", "26"}, []string{"1", "26"}, true},
		{[]string{"1", "27"}, []string{"1", "26"}, true},
		{[]string{"1", "25"}, []string{"1", "26"}, false},
		{[]string{"2", "0"}, []string{"1", "26"}, true},
	} {
		if got := versionAtLeast(tc.have, tc.want); got != tc.ok {
			t.Errorf("versionAtLeast(%v, %v) = %v", tc.have, tc.want, got)
		}
	}
}

// TestDoctorLeavesGoModAlone: the module check runs the go command with the
// network off and -mod=readonly, so it never rewrites go.mod or go.sum.
func TestDoctorLeavesGoModAlone(t *testing.T) {
	root := t.TempDir()
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	mod = append(mod, []byte("\n\n// a comment   and odd   spacing\n")...)
	if err := os.WriteFile(filepath.Join(root, "go.mod"), mod, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	c := checkModules(options{Root: root})
	gotMod, _ := os.ReadFile(filepath.Join(root, "go.mod"))
	gotSum, _ := os.ReadFile(filepath.Join(root, "go.sum"))
	if !bytes.Equal(gotMod, mod) || !bytes.Equal(gotSum, sum) {
		t.Errorf("the module check rewrote go.mod or go.sum (check: %+v)", c)
	}
	if !c.OK {
		t.Errorf("module check failed with every module cached: %+v", c)
	}
}

// TestDockerImageInputs: the base image is pinned by digest (the BASE
// argument's default, which image-test.sh replaces only where no registry
// answers), and the build
// context leaves out version control and every build output .gitignore
// names, so an image never carries .git or a stale environment.
func TestDockerImageInputs(t *testing.T) {
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
	froms := 0
	for _, line := range strings.Split(string(df), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "ARG" && strings.HasPrefix(f[1], "BASE="):
			if !pinned.MatchString(f[1]) {
				t.Errorf("base image not pinned by digest: %q", line)
			}
		case len(f) > 1 && f[0] == "FROM":
			froms++
			if f[1] != "${BASE}" && !pinned.MatchString(f[1]) {
				t.Errorf("base image neither BASE nor pinned by digest: %q", line)
			}
		}
	}
	if froms == 0 || !strings.Contains(string(df), "\nARG BASE=") {
		t.Error("the Dockerfile has no FROM, or no pinned ARG BASE")
	}
	ign, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(ign), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	want := []string{".git"}
	gi, _ := os.ReadFile("../.gitignore")
	for _, l := range strings.Split(string(gi), "\n") {
		l = strings.TrimSuffix(strings.TrimSpace(l), "/")
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
			continue
		case strings.HasPrefix(l, "/"): // anchored at the root
			want = append(want, l[1:])
		default: // matched at any depth
			want = append(want, "**/"+l)
		}
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf(".dockerignore lacks %q", w)
		}
	}
}

// TestQuietLab: the install turns JupyterLab's news question and update
// check off and code cells' line wrapping on in its settings overrides,
// keeping what else the file says.
func TestQuietLab(t *testing.T) {
	dir := t.TempDir()
	other := `{"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}`
	if err := os.WriteFile(filepath.Join(dir, "overrides.json"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := quietLab(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "overrides.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	n := got["@jupyterlab/apputils-extension:notification"]
	if n["fetchNews"] != "false" || n["checkForUpdates"] != false || got["@jupyterlab/apputils-extension:themes"]["theme"] != "JupyterLab Dark" {
		t.Errorf("overrides %s", data)
	}
	if c, _ := got["@jupyterlab/notebook-extension:tracker"]["codeCellConfig"].(map[string]any); c["lineWrap"] != true {
		t.Errorf("code cells do not wrap long lines: %s", data)
	}
	if err := os.WriteFile(filepath.Join(dir, "overrides.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := quietLab(dir); err == nil {
		t.Error("a broken overrides.json was overwritten without a word")
	}
}
