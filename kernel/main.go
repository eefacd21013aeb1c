// Command kernel installs, checks and removes the "Go (VRAM Lab)" Jupyter
// kernel: gonb with this repository's packages on its go.work, working offline.
//
//	go run ./kernel install     # build gonb, goimports, gopls; write the kernelspec; warm the build cache
//	go run ./kernel tools       # build gonb (patched, kernel/tools/gonb.go), goimports and gopls into <root>/.bin
//	go run ./kernel doctor      # check every piece and say how to fix what is missing
//	go run ./kernel uninstall   # remove what install wrote
//
// Run "go run ./kernel help" for the flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// KernelName is the kernelspec directory name; notebooks select the kernel by it
// (metadata.kernelspec.name).
const KernelName = "vramlab"

// DisplayName is what JupyterLab shows in its launcher and kernel picker.
const DisplayName = "Go (VRAM Lab)"

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kernel:", err)
		os.Exit(1)
	}
}

const usage = `usage: go run ./kernel COMMAND [flags]

commands:
  install     build the tools into <root>/.bin, write the "vramlab" kernelspec, warm the build cache
  tools       build the tools into <root>/.bin only
  doctor      check go, gcc, the tools, jupyter, the kernelspec, the module cache and NVML
  uninstall   remove the kernelspec and the tools that install wrote

flags (all commands):
`

// run is main without the process exit, so tests can call it.
func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("missing command; want install, tools, doctor or uninstall (see: go run ./kernel help)")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("kernel "+cmd, flag.ContinueOnError)
	fs.SetOutput(stdout)
	var o options
	fs.StringVar(&o.Root, "root", "", "repository root (default: the directory holding this module's go.mod, found from the working directory)")
	fs.StringVar(&o.DataDir, "data-dir", "", "Jupyter data directory to write the kernelspec into (default: <root>/.venv/share/jupyter, or $JUPYTER_DATA_DIR)")
	fs.BoolVar(&o.User, "user", false, "use the user's Jupyter data directory (~/.local/share/jupyter) instead of the project's virtualenv")
	fs.StringVar(&o.Venv, "venv", "", "the project's Python virtualenv (default: <root>/.venv)")
	fs.BoolVar(&o.NoWarm, "no-warm", false, "install: skip warming the Go build cache")
	fs.BoolVar(&o.NoTools, "no-tools", false, "install: skip building gonb, goimports and gopls (they must already be in <root>/.bin)")
	fs.Usage = func() {
		fmt.Fprint(stdout, usage)
		fs.PrintDefaults()
	}
	switch cmd {
	case "help", "-h", "-help", "--help":
		fs.Usage()
		return nil
	case "install", "tools", "doctor", "uninstall":
	default:
		return fmt.Errorf("unknown command %q; want install, tools, doctor or uninstall", cmd)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s takes no arguments, got %q", cmd, fs.Args())
	}
	if err := o.resolve(); err != nil {
		return err
	}
	switch cmd {
	case "install":
		return install(o, stdout)
	case "tools":
		return buildTools(o, stdout)
	case "uninstall":
		return uninstall(o, stdout)
	default:
		return doctor(o, stdout)
	}
}
