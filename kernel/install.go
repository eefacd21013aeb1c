package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// tools are built from go.mod's tool directives (pinned there), so nothing is
// ever fetched unversioned.
var tools = []string{"gonb", "goimports", "gopls"}

// kernelSpec is jupyter_client's kernel.json (jupyter_client/kernelspec.py).
type kernelSpec struct {
	Argv          []string          `json:"argv"`
	DisplayName   string            `json:"display_name"`
	Language      string            `json:"language"`
	InterruptMode string            `json:"interrupt_mode"`
	Env           map[string]string `json:"env"`
	Metadata      map[string]any    `json:"metadata,omitempty"`
}

// newKernelSpec is the spec for a kernel at o. goEnv holds GOMODCACHE and
// GOCACHE as seen at install time, pinned so the kernel finds the modules and
// the warm build cache even when Jupyter runs with another HOME.
func newKernelSpec(o options, goroot string, goEnv map[string]string) kernelSpec {
	env := map[string]string{
		// Offline: modules come only from the module cache that install filled;
		// a newer go line must never trigger a toolchain download.
		"GOPROXY":     "off",
		"GOTOOLCHAIN": "local",
		// go-nvml's cgo bindings print pages of deprecation warnings otherwise.
		"CGO_CFLAGS": "-Wno-deprecated-declarations",
		// Each cell is a program gonb builds and links; a cell program needs
		// no symbol table or DWARF (stack traces read the pclntab, which -s
		// keeps), and leaving them out of the link took a cell that imports
		// charts from 1.15 s to 0.73 s on the 2-core machine
		// (kernel/scripts/cell_latency.py).
		"GOFLAGS": "-ldflags=-s",
		// jupyter_client (>= 7) substitutes ${PATH} from the server's environment.
		"PATH":         o.BinDir() + ":" + filepath.Join(goroot, "bin") + ":${PATH}",
		"VRAMLAB_ROOT": o.Root,
	}
	for k, v := range goEnv {
		env[k] = v
	}
	return kernelSpec{
		Argv: []string{
			filepath.Join(o.BinDir(), "gonb"),
			"--kernel", "{connection_file}",
			// gonb logs through klog; keep its start-up and shutdown chatter out
			// of the notebook server's console (fatal errors still show).
			"-logtostderr=false", "-stderrthreshold=FATAL", "-log_file=" + os.DevNull,
			"-go_work=" + o.Root,
		},
		DisplayName:   DisplayName,
		Language:      "go",
		InterruptMode: "message",
		Env:           env,
		Metadata:      map[string]any{"vramlab": map[string]any{"root": o.Root}},
	}
}

func install(o options, w io.Writer) error {
	goroot, goEnv, err := goEnvironment(o.Root)
	if err != nil {
		return err
	}
	if !o.NoTools {
		if err := buildTools(o, w); err != nil {
			return err
		}
	}
	for _, t := range tools {
		if _, err := os.Stat(filepath.Join(o.BinDir(), t)); err != nil {
			return fmt.Errorf("%s is missing from %s: run install without -no-tools", t, o.BinDir())
		}
	}

	spec := newKernelSpec(o, goroot, goEnv)
	if err := writeKernelSpec(o.KernelDir(), spec); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote kernelspec %q (%s) to %s\n", KernelName, DisplayName, o.KernelDir())
	if err := quietLab(filepath.Join(o.DataDir, "lab", "settings")); err != nil {
		return err
	}

	if !o.NoWarm {
		start := time.Now()
		fmt.Fprintln(w, "warming the Go build cache with the project's packages and gonbui")
		if err := warm(o.Root, spec.Env); err != nil {
			return err
		}
		fmt.Fprintf(w, "  done in %.1fs\n", time.Since(start).Seconds())
	}
	return nil
}

// buildTools builds the kernel's tools into <root>/.bin with the tools
// command (kernel/tools: goimports, gopls, and gonb with its patch).
func buildTools(o options, w io.Writer) error {
	cmd := exec.Command("go", "run", "./kernel/tools", "-root", o.Root)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go run ./kernel/tools: %v", err)
	}
	return nil
}

// goEnvironment returns GOROOT and the cache locations of the go on PATH.
func goEnvironment(root string) (goroot string, env map[string]string, err error) {
	cmd := exec.Command("go", "env", "GOROOT", "GOMODCACHE", "GOCACHE")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("go env: %v (is Go installed and on PATH?)", err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(f) != 3 {
		return "", nil, fmt.Errorf("go env: unexpected output %q", out)
	}
	return f[0], map[string]string{"GOMODCACHE": f[1], "GOCACHE": f[2]}, nil
}

func writeKernelSpec(dir string, spec kernelSpec) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"kernel.json":    append(b, '\n'),
		"logo-svg.svg":   []byte(logoSVG),
		"logo-32x32.png": logoPNG(32),
		"logo-64x64.png": logoPNG(64),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// labSettings are the JupyterLab settings the lab runs with, by plugin:
// offline and quiet — no news feed and no question about one (fetchNews
// "false", where the default "none" asks in a toast on first start), no
// update check (@jupyterlab/apputils-extension notification.json,
// JupyterLab 4.6; the server's --LabApp.news_url= empties the feed but
// leaves the question) — and code cells that wrap long lines instead of
// running past the cell's edge (notebook-extension tracker.json,
// codeCellConfig, whose default is lineNumbers and lineWrap false).
var labSettings = map[string]map[string]any{
	"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false},
	"@jupyterlab/notebook-extension:tracker":      {"codeCellConfig": map[string]any{"lineNumbers": false, "lineWrap": true}},
}

// quietLab merges labSettings into dir/overrides.json, the settings
// JupyterLab applies over its defaults, keeping whatever else the file
// holds.
func quietLab(dir string) error {
	path := filepath.Join(dir, "overrides.json")
	all := map[string]any{}
	if data, err := os.ReadFile(path); err == nil {
		if len(data) > 1<<20 {
			return fmt.Errorf("%s: over 1 MiB; not JupyterLab's overrides", path)
		}
		if err := json.Unmarshal(data, &all); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
	} else if !os.IsNotExist(err) {
		return err
	}
	for key, values := range labSettings {
		n, _ := all[key].(map[string]any)
		if n == nil {
			n = map[string]any{}
		}
		for k, v := range values {
			n[k] = v
		}
		all[key] = n
	}
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// warm compiles what a notebook cell links, with the kernel's environment, so
// the first cell does not pay for compiling the project and its dependencies.
func warm(root string, kernelEnv map[string]string) error {
	env := os.Environ()
	for k, v := range kernelEnv {
		if k == "PATH" {
			continue
		}
		env = append(env, k+"="+v)
	}
	cmd := exec.Command("go", "build", "./...", "github.com/janpfeifer/gonb/gonbui")
	cmd.Dir = root
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("warming the build cache (go build ./... with GOPROXY=off): %v\n%s", err, out)
	}
	return nil
}

func uninstall(o options, w io.Writer) error {
	removed := 0
	if _, err := os.Stat(filepath.Join(o.KernelDir(), "kernel.json")); err == nil {
		if err := os.RemoveAll(o.KernelDir()); err != nil {
			return err
		}
		fmt.Fprintf(w, "removed kernelspec %s\n", o.KernelDir())
		removed++
	}
	for _, t := range tools {
		p := filepath.Join(o.BinDir(), t)
		if runtime.GOOS == "windows" {
			p += ".exe"
		}
		if err := os.Remove(p); err == nil {
			fmt.Fprintf(w, "removed %s\n", p)
			removed++
		}
	}
	_ = os.Remove(o.BinDir()) // only if empty
	if removed == 0 {
		fmt.Fprintln(w, "nothing to remove: the kernel is not installed here")
	}
	return nil
}
