package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/answer"
	"github.com/vramlab/vramlab/vram/fileio"
	"github.com/vramlab/vramlab/vram/importer"
)

// explainLog prints an engine's startup log beside the prediction for the
// plan file given (at most one), or for the plan the log's args make.
func explainLog(w io.Writer, logFile string, files []string, l launch, asJSON bool) error {
	if len(files) > 1 {
		return errors.New("-log takes one plan file (or none: the log's own args, vLLM's non-default args or SGLang's server_args; a llama.cpp log needs its plan)")
	}
	text, err := fileio.Read(logFile, importer.MaxEngineLog)
	if err != nil {
		return err
	}
	var p *vram.Plan
	if len(files) == 1 {
		x, _, err := readPlan(files[0], l)
		if err != nil {
			return err
		}
		p = &x
	}
	ex, err := answer.ExplainEngineLog(text, p, l.gpu)
	if err != nil {
		return fmt.Errorf("%s: %w", logFile, err)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(ex)
	}
	printExplanation(w, ex)
	return nil
}

func printExplanation(w io.Writer, ex answer.Explanation) {
	engine := map[string]string{"vllm": "vLLM", "sglang": "SGLang", "llama_cpp": "llama.cpp"}[ex.Log.Engine]
	release := ex.Log.Version
	if release == "" {
		release = "(release not in the log)"
	}
	on := ""
	if f := ex.Report.Fit; f != nil {
		on = " on " + f.GPU
	}
	what := "startup log"
	switch {
	case ex.Log.StartupPlan != "":
		what, release = "startup plan "+ex.Log.StartupPlan, ""
	case ex.Log.Engine == "llama_cpp" && ex.Log.Version == "":
		release = "(build not in the log)"
	}
	fmt.Fprintf(w, "%s %s beside the prediction for %s%s\n", strings.TrimSpace(engine+" "+release), what, orDefault(ex.Report.Model, "the plan's model"), on)
	if ex.Log.Args != "" {
		fmt.Fprintf(w, "the log's command line: %s\n", ex.Log.Args)
	}
	printReleases(w, ex.Report.Releases)
	if ld := ex.LlamaCppLoad; ld != nil {
		fmt.Fprintf(w, "llama.cpp's load as modelled: fit %s, n_ctx %d, %d/%d layers offloaded", ld.Fit.Status, ld.NCtx, ld.Offloaded, ld.Offloadable)
		if ld.Fit.Args != "" {
			fmt.Fprintf(w, ", llama-fit-params: %s", ld.Fit.Args)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n  %-29s %6s %14s %14s %10s\n", "figure", "line", "log", "predicted", "diff")
	for _, c := range ex.Checks {
		printCheck(w, ex.Log.Engine, c)
	}
	if f := ex.FitArgs; f != nil {
		verdict := "differs"
		if f.Agrees {
			verdict = "agrees"
		}
		fmt.Fprintf(w, "  llama-fit-params' line (line %d) %s:\n    log:       %s\n    predicted: %s\n", f.Line, verdict, f.Log, f.Predicted)
	}
	for _, n := range ex.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, e := range ex.Log.Errors {
		fmt.Fprintf(w, "the log's failure: %s\n", e)
	}
}

// printCheck prints one figure beside its prediction, as the engine
// prints it: vLLM's and SGLang's GiB to two decimals, llama.cpp's MiB
// (to two decimals, or whole where it prints them whole), counts grouped.
func printCheck(w io.Writer, engine string, c answer.LogCheck) {
	log, pred := vram.Grouped(int64(c.Log)), vram.Grouped(int64(c.Predicted))
	switch {
	case importer.IsBytes(c.What) && engine == "llama_cpp" && importer.WholeMiB(c.What):
		log, pred = fmt.Sprintf("%.0f MiB", math.Floor(c.Log/(1<<20))), fmt.Sprintf("%.0f MiB", math.Floor(c.Predicted/(1<<20)))
	case importer.IsBytes(c.What) && engine == "llama_cpp":
		log, pred = fmt.Sprintf("%.2f MiB", c.Log/(1<<20)), fmt.Sprintf("%.2f MiB", c.Predicted/(1<<20))
	case importer.IsBytes(c.What):
		log, pred = fmt.Sprintf("%.2f GiB", c.Log/(1<<30)), fmt.Sprintf("%.2f GiB", c.Predicted/(1<<30))
	case c.What == importer.LogMaxConcurrency:
		log, pred = fmt.Sprintf("%.2fx", c.Log), fmt.Sprintf("%.2fx", c.Predicted)
	}
	verdict := fmt.Sprintf("%+.1f %%", c.Percent)
	if c.Agrees {
		verdict = "agrees"
	}
	what := c.What
	if c.Device != "" {
		what += " " + c.Device
	}
	fmt.Fprintf(w, "  %-29s %6d %14s %14s %10s\n", what, c.Line, log, pred, verdict)
	if c.Why != "" {
		fmt.Fprintf(w, "      why: %s\n", c.Why)
	}
}
