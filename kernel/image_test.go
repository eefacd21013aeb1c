package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWarmDepsCoverTheProject: the packages setup.sh's deps step compiles
// before the source is copied into the image (WARM_DEPS) cover every
// package outside the project that a notebook cell links, so the image's
// last layer compiles only the project (a one-line change rebuilds in
// seconds).
func TestWarmDepsCoverTheProject(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("scripts", "setup.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\nWARM_DEPS=\(([^)]*)\)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("setup.sh has no WARM_DEPS=(...)")
	}
	warm := golist(t, strings.Fields(string(m[1]))...)
	n := 0
	for pkg := range golist(t, "./...", "github.com/janpfeifer/gonb/gonbui") {
		if strings.HasPrefix(pkg, modulePath+"/") {
			continue
		}
		n++
		if !warm[pkg] {
			t.Errorf("%s is linked by the project but setup.sh's WARM_DEPS do not compile it", pkg)
		}
	}
	if n < 20 {
		t.Fatalf("only %d packages outside the project", n)
	}
}

// golist is the set of packages the patterns name and depend on.
func golist(t *testing.T, patterns ...string) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps"}, patterns...)...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOPROXY=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %q: %v", patterns, err)
	}
	set := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		set[p] = true
	}
	return set
}

// TestDockerfileLayers: the Dockerfile installs what changes rarely before
// it copies the source — the Python pins, Go's modules, the kernel's tools
// and the dependencies' packages, each after copying only the files that
// step reads — and only the kernel step after the source.
func TestDockerfileLayers(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	at := func(s string) int {
		i := strings.Index(df, s)
		if i < 0 {
			t.Fatalf("the Dockerfile lacks %q", s)
		}
		return i
	}
	source := at("COPY --chown=${NB_UID}:${NB_GID} . .")
	for _, before := range []string{"setup.sh python", "setup.sh toolchain modules", "setup.sh tools", "setup.sh deps", "rm -rf /tmp/tools-cache"} {
		if at(before) > source {
			t.Errorf("%q runs after the source is copied: a source change would repeat it", before)
		}
	}
	if at("RUN kernel/scripts/setup.sh kernel") < source {
		t.Error("the kernel step runs before the source is there")
	}
	if at("COPY --chown=${NB_UID}:${NB_GID} go.mod go.sum ./") > at("setup.sh toolchain modules") ||
		at("kernel/requirements.txt kernel/") > at("setup.sh python") ||
		at("COPY --chown=${NB_UID}:${NB_GID} kernel/tools/ kernel/tools/") > at("setup.sh tools") {
		t.Error("a step runs before the files it reads are copied")
	}
}
