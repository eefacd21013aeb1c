package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// A check is one line of the doctor's report. Fix says how to repair a failure.
type check struct {
	Name string
	OK   bool
	Info string // what was found
	Fix  string // how to fix it (failures only)
	Soft bool   // a failure that is fine (e.g. no GPU driver on a laptop)
}

// doctor runs every check, prints a report and fails if any hard check failed.
func doctor(o options, w io.Writer) error {
	checks := []check{
		checkGo(o),
		checkCgo(o),
		checkTools(o),
		checkJupyter(o),
		checkKernelSpec(o),
		checkModules(o),
		checkNVML(),
	}
	failed := 0
	for _, c := range checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
			if c.Soft {
				mark = "note"
			} else {
				failed++
			}
		}
		fmt.Fprintf(w, "[%s] %-12s %s\n", mark, c.Name, c.Info)
		if !c.OK && c.Fix != "" {
			fmt.Fprintf(w, "       fix: %s\n", c.Fix)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d check(s) failed; fix them and run: go run ./kernel doctor", failed)
	}
	fmt.Fprintln(w, "all checks passed")
	return nil
}

var goVersionRE = regexp.MustCompile(`go(\d+)\.(\d+)(?:\.(\d+))?`)

// checkGo compares the go on PATH with go.mod's go line.
func checkGo(o options) check {
	c := check{Name: "go"}
	out, err := exec.Command("go", "version").Output()
	if err != nil {
		c.Info = "go not found on PATH"
		c.Fix = "install Go 1.26 (https://go.dev/dl/) and put its bin directory on PATH"
		return c
	}
	have := goVersionRE.FindStringSubmatch(string(out))
	mod, _ := os.ReadFile(filepath.Join(o.Root, "go.mod"))
	want := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(string(mod))
	c.Info = strings.TrimSpace(string(out))
	if have == nil || want == nil {
		c.Fix = "could not read the go version or go.mod's go line"
		return c
	}
	if !versionAtLeast(have[1:3], want[1:3]) {
		c.Fix = fmt.Sprintf("go.mod needs go %s.%s or newer; install it (GOTOOLCHAIN=local: no automatic download)", want[1], want[2])
		return c
	}
	c.OK = true
	return c
}

func versionAtLeast(have, want []string) bool {
	for i := range want {
		h, _ := strconv.Atoi(have[i])
		w, _ := strconv.Atoi(want[i])
		if h != w {
			return h > w
		}
	}
	return true
}

// checkCgo: go-nvml needs cgo, and Go turns cgo off by itself without a C compiler.
func checkCgo(o options) check {
	c := check{Name: "gcc (cgo)"}
	out, err := exec.Command("go", "env", "CC", "CGO_ENABLED").Output()
	if err != nil {
		c.Info = "cannot run go env"
		return c
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		c.Info = fmt.Sprintf("unexpected go env output %q", out)
		return c
	}
	cc, enabled := f[0], f[1]
	path, err := exec.LookPath(cc)
	if err != nil || enabled != "1" {
		c.Info = fmt.Sprintf("C compiler %q not found or CGO_ENABLED=%s", cc, enabled)
		c.Fix = "install gcc (Debian/Ubuntu: apt-get install gcc); GPU cells need cgo for go-nvml"
		return c
	}
	c.OK = true
	c.Info = path + ", CGO_ENABLED=1"
	return c
}

func checkTools(o options) check {
	c := check{Name: "tools"}
	var missing []string
	for _, t := range tools {
		if st, err := os.Stat(filepath.Join(o.BinDir(), t)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		c.Info = fmt.Sprintf("missing from %s: %s", o.BinDir(), strings.Join(missing, ", "))
		c.Fix = "go run ./kernel install (builds them from go.mod's pinned tool directives)"
		return c
	}
	c.OK = true
	c.Info = strings.Join(tools, ", ") + " in " + o.BinDir()
	return c
}

func checkJupyter(o options) check {
	c := check{Name: "jupyter"}
	j := filepath.Join(o.Venv, "bin", "jupyter")
	out, err := exec.Command(j, "lab", "--version").Output()
	if err != nil {
		c.Info = "no working " + j
		c.Fix = "make setup (creates .venv from kernel/requirements.txt)"
		return c
	}
	c.OK = true
	c.Info = "JupyterLab " + strings.TrimSpace(string(out)) + " in " + o.Venv
	return c
}

func checkKernelSpec(o options) check {
	c := check{Name: "kernelspec"}
	p := filepath.Join(o.KernelDir(), "kernel.json")
	b, err := os.ReadFile(p)
	if err != nil {
		c.Info = "no " + p
		c.Fix = "go run ./kernel install"
		return c
	}
	var spec kernelSpec
	if err := json.Unmarshal(b, &spec); err != nil || len(spec.Argv) < 4 {
		c.Info = p + " is not a valid kernelspec"
		c.Fix = "go run ./kernel install (rewrites it)"
		return c
	}
	if _, err := os.Stat(spec.Argv[0]); err != nil {
		c.Info = "kernelspec points at a missing binary " + spec.Argv[0]
		c.Fix = "go run ./kernel install"
		return c
	}
	if want := "-go_work=" + o.Root; spec.Argv[len(spec.Argv)-1] != want {
		c.Info = fmt.Sprintf("kernelspec has %q, want %q (was the repository moved?)", spec.Argv[len(spec.Argv)-1], want)
		c.Fix = "go run ./kernel install"
		return c
	}
	if spec.Env["GOPROXY"] != "off" {
		c.Info = "kernelspec does not set GOPROXY=off"
		c.Fix = "go run ./kernel install"
		return c
	}
	c.OK = true
	c.Info = p
	return c
}

// checkModules asks the go command, with the network off, for every module the
// build needs: it fails if one is not in the module cache.
func checkModules(o options) check {
	c := check{Name: "modules"}
	cmd := exec.Command("go", "mod", "download")
	cmd.Dir = o.Root
	// -mod=readonly: a check never rewrites the checkout's go.mod or go.sum.
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		first := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
		c.Info = "not all modules are in the module cache (offline): " + first
		c.Fix = "run once with network: go mod download (or make setup)"
		return c
	}
	c.OK = true
	c.Info = "every module in go.mod's build list is in the module cache"
	return c
}

// nvmlDirs are where driver packages put libnvidia-ml.so.1.
var nvmlDirs = []string{
	"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
	"/usr/local/nvidia/lib64", "/usr/local/cuda/lib64", "/usr/lib/wsl/lib",
}

func checkNVML() check {
	c := check{Name: "nvml", Soft: true}
	dirs := append([]string{}, nvmlDirs...)
	dirs = append(dirs, filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))...)
	for _, d := range dirs {
		p := filepath.Join(d, "libnvidia-ml.so.1")
		if _, err := os.Stat(p); err == nil {
			c.OK = true
			c.Info = "NVIDIA driver library " + p
			return c
		}
	}
	c.Info = "no NVIDIA driver; GPU cells will report that (planning works without a GPU)"
	return c
}
