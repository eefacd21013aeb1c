// Command validate predicts measured GPU-memory cases and reports the error.
//
//	go run ./examples/validate [-trust AB] [-markdown] FILE.jsonl
//
// Each case (format: testdata/cases-format.md) is predicted in the terms it
// was measured: allocated peak, reserved peak, or device-used memory. Cases
// the engine cannot express are skipped with the reason. The output ends
// with one summary line per measured kind and one overall:
//
//	summary kind=<KIND|memory|serving|all> cases=<N> predicted=<N> skipped=<N> median_abs_err=<X.X>% p90_abs_err=<Y.Y>%
//
// where KIND is each measured kind of the file: the memory kinds
// (allocated_peak, reserved_peak, nvidia_smi, other; memory is all of
// them) and the serving-log kinds (vllm_kv_tokens, sglang_kv_tokens,
// llamacpp_kv_mib, …; serving is all of them). A serving-log case of a
// failed start is a verdict, not an error: a line
//
//	verdicts kind=<KIND> failed_starts=<N> agree=<N>
//
// says how many of them the engine's verdict matches.
//
//	go run ./examples/validate -diff [-sites N] A.snapshot.pickle B.snapshot.pickle
//	go run ./examples/validate -diff [-gpu NAME] A.snapshot.pickle PLAN.json
//
// sets a PyTorch memory snapshot beside a second one, or beside the
// prediction for the plan it ran, at their allocated peaks: by category,
// then (two snapshots) by the line of code that allocated, the largest
// differences first.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/vramlab/vramlab/examples/internal/term"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio"
)

func main() {
	if err := run(os.Args[1:], term.Safe(os.Stdout)); err != nil {
		fmt.Fprintln(term.Safe(os.Stderr), "validate:", err)
		os.Exit(1)
	}
}

// Result is one case's prediction.
type Result struct {
	Case      Case
	Predicted vram.Bytes
	Err       float64 // (predicted − measured) / |measured|
	Where     string
	Skip      string
	// A serving-log case's figures in its unit; Verdict when the log is
	// of a failed start (or the engine would not start), compared as
	// whether both fail (Agrees).
	Unit            string
	Measured, Value float64
	Verdict, Agrees bool
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stdout)
	trust := fs.String("trust", "ABC", "trust levels to include (A, B, C)")
	markdown := fs.Bool("markdown", false, "print examples/validate/README.md's accuracy section: the summary table and every case")
	diffMode := fs.Bool("diff", false, "compare a snapshot with a second snapshot or with a plan's prediction")
	gpuName := fs.String("gpu", "", "with -diff and a plan: the GPU the snapshot was recorded on")
	sites := fs.Int("sites", 12, "with -diff of two snapshots: how many allocation sites to list")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h asked for the usage, which is printed
		}
		return err
	}
	if *diffMode {
		if fs.NArg() != 2 || *sites < 0 {
			return errDiffArgs
		}
		return diff(fs.Arg(0), fs.Arg(1), *gpuName, *sites, stdout)
	}
	if fs.NArg() == 0 {
		// The reference set, from the repository's root (the README's
		// bare command).
		if _, err := os.Stat(referenceCases); err == nil {
			fmt.Fprintf(stdout, "(the reference set, %s)\n", referenceCases)
			args = append(args, referenceCases)
			fs.Parse(args)
		}
	}
	if fs.NArg() != 1 {
		return errors.New("usage: validate [-trust AB] [FILE.jsonl] (without a file: " + referenceCases + ", from the repository's root)")
	}
	cases, err := readCases(fs.Arg(0))
	if err != nil {
		return err
	}
	// A context-only measurement calibrates the CUDA context of the other
	// cases from the same source (same id prefix), as a user would measure
	// their own machine once.
	contexts := map[string]vram.Bytes{}
	for _, c := range cases {
		if c.Kind == "context_only" {
			contexts[group(c.ID)] = vram.Bytes(c.Measured.GiB * float64(vram.GiB))
		}
	}
	var results []Result
	for _, c := range cases {
		if !strings.Contains(*trust, c.Trust) {
			continue
		}
		results = append(results, predict(c, contexts[group(c.ID)]))
	}
	if *markdown {
		var b strings.Builder
		report(&b, results)
		return writeMarkdown(stdout, b.String())
	}
	report(stdout, results)
	return nil
}

// writeMarkdown turns a report into examples/validate/README.md's accuracy section: a table of
// the summary lines and, folded, every case.
func writeMarkdown(w io.Writer, rep string) error {
	fmt.Fprintln(w, "| measured as | cases | predicted | skipped | median abs error | p90 abs error | verdicts: failed starts or runs (agree) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	verdicts := map[string]string{}
	for _, m := range verdictLine.FindAllStringSubmatch(rep, -1) {
		verdicts[m[1]] = m[2] + " (" + m[3] + ")"
	}
	for _, m := range summaryLine.FindAllStringSubmatch(rep, -1) {
		med, p90 := m[5]+"%", m[6]+"%"
		if m[3] == "0" || m[1] == runsKind { // nothing predicted, or verdicts only
			med, p90 = "—", "—"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", m[1], m[2], m[3], m[4], med, p90, orText(verdicts[m[1]], ""))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "<details><summary>Every case</summary>")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "```")
	for _, line := range strings.Split(strings.TrimSpace(rep), "\n") {
		if line == "" || strings.HasPrefix(line, "summary ") || strings.HasPrefix(line, "verdicts ") {
			continue
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintln(w, "```")
	_, err := fmt.Fprintln(w, "</details>")
	return err
}

var (
	summaryLine = regexp.MustCompile(`(?m)^summary kind=(\S+) cases=(\d+) predicted=(\d+) skipped=(\d+) median_abs_err=([\d.]+)% p90_abs_err=([\d.]+)%$`)
	verdictLine = regexp.MustCompile(`(?m)^verdicts kind=(\S+) failed_starts=(\d+) agree=(\d+)$`)
)

// referenceCases is the reference set, as the repository's root sees it.
const referenceCases = "examples/validate/testdata/cases.jsonl"

// maxCasesFile bounds a measured-case file (the reference set is 60 KB).
const maxCasesFile = 64 << 20

func readCases(path string) ([]Case, error) {
	b, err := fileio.Read(path, maxCasesFile)
	if err != nil {
		return nil, err
	}
	return parseCases(path, b)
}

// parseCases reads JSON Lines of cases, each checked (checkCase).
func parseCases(path string, b []byte) ([]Case, error) {
	var cases []Case
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		// Every field a case carries is read: one the format does not
		// know is refused, never passed over (cases-format.md).
		var c Case
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("%s:%d: %v (cases-format.md lists the fields)", path, line, err)
		}
		if err := checkCase(c); err != nil {
			return nil, fmt.Errorf("%s:%d: case %q: %v", path, line, c.ID, err)
		}
		cases = append(cases, c)
	}
	return cases, sc.Err()
}

// maxMeasuredGiB bounds a measured value: 1 PiB, past any machine.
const maxMeasuredGiB = 1 << 20

// checkCase checks the measured value a prediction is divided by — a
// finite number of GiB of at least a byte, so that no percentage is
// infinite — and that no count of the case is negative.
func checkCase(c Case) error {
	if err := checkCounts(reflect.ValueOf(c), ""); err != nil {
		return err
	}
	if _, ok := servingUnit[c.Measured.What]; ok {
		return checkServing(c)
	}
	g := c.Measured.GiB
	if math.IsNaN(g) || g < 1/float64(vram.GiB) || g > maxMeasuredGiB {
		return fmt.Errorf("measured.gib = %v: must be a number of GiB of at least a byte (%g) and at most %d", g, 1/float64(vram.GiB), maxMeasuredGiB)
	}
	return nil
}

// checkCounts refuses a negative integer anywhere in a case (gpus: -1,
// seq_len: -4096, measured.device: -1), naming it by its JSON path.
func checkCounts(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			return checkCounts(v.Elem(), path)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			sub := path
			if name != "" && name != "-" && !f.Anonymous {
				sub = strings.TrimPrefix(path+"."+name, ".")
			}
			if err := checkCounts(v.Field(i), sub); err != nil {
				return err
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Int() < 0 {
			return fmt.Errorf("%s = %d: a count is never negative", path, v.Int())
		}
	}
	return nil
}

// group is a case id's source prefix ("hf_bert" of "hf_bert_03").
func group(id string) string {
	if i := strings.LastIndex(id, "_"); i > 0 {
		return id[:i]
	}
	return id
}

// predict computes the case's measured quantity. context, when not zero, is
// the measured CUDA context of the case's machine.
func predict(c Case, context vram.Bytes) Result {
	if _, ok := servingUnit[c.Measured.What]; ok {
		return predictServing(c)
	}
	if c.Kind == "post_training" {
		return predictPost(c)
	}
	res := Result{Case: c}
	fail := func(err error) Result {
		var u unsupported
		if errors.As(err, &u) {
			res.Skip = u.reason
		} else {
			res.Skip = "cannot express: " + err.Error()
		}
		return res
	}
	opt := vram.ReplayOptions{Context: context}
	if c.Train != nil {
		opt.Torch = c.Train.Torch
	}
	if g, err := vram.LookupGPU(c.GPU); err == nil {
		opt.GPU = &g
	}
	var allocated vram.Bytes
	var replay func() (vram.Replay, error)
	switch c.Kind {
	case "context_only":
		res.Skip = "context-only measurement (calibrates the CUDA context of its group)"
		return res
	case "train":
		t, err := c.training()
		if err != nil {
			return fail(err)
		}
		est, err := t.Estimate()
		if err != nil {
			return fail(err)
		}
		allocated = est.Peak.Total()
		res.Where = est.PeakAt.Where()
		if n := c.Train.TrainableParams; n > 0 && n != est.TrainableParams {
			// The source printed its trainable count: a plan that trains
			// other parameters is said beside its figure.
			res.Where += fmt.Sprintf(" (trainable: %s in the plan, %s in the source)", vram.Grouped(est.TrainableParams), vram.Grouped(n))
		}
		replay = func() (vram.Replay, error) { return t.Replay(opt) }
	case "inference":
		in, err := c.inference()
		if err != nil {
			return fail(err)
		}
		est, err := in.Estimate()
		if err != nil {
			return fail(err)
		}
		allocated = est.Peak.Total()
		res.Where = est.PeakAt
		replay = func() (vram.Replay, error) { return in.Replay(opt) }
	default:
		res.Skip = "unknown kind " + c.Kind
		return res
	}
	switch c.Measured.What {
	case "allocated_peak":
		res.Predicted = allocated
	case "reserved_peak", "nvidia_smi":
		rp, err := replay()
		if err != nil {
			return fail(err)
		}
		res.Predicted = rp.PeakReserved
		if c.Measured.What == "nvidia_smi" {
			if rp.Context == 0 {
				res.Skip = "device-used memory needs the CUDA context of GPU " + strconvQuote(c.GPU) + " (not in the catalog)"
				return res
			}
			res.Predicted = rp.DeviceUsed
		}
	case "other":
		if strings.Contains(c.Measured.Meaning, "non-PyTorch") {
			// Allocated peak plus everything outside PyTorch's allocator.
			rp, err := replay()
			if err != nil {
				return fail(err)
			}
			if rp.Context == 0 {
				res.Skip = "needs the CUDA context of GPU " + strconvQuote(c.GPU)
				return res
			}
			res.Predicted = allocated + rp.Context + rp.NCCL
		} else {
			// Unstated statistic (torchtune's peak, a documentation figure):
			// compared with the allocated peak.
			res.Predicted = allocated
		}
	default:
		res.Skip = "unknown measured.what " + c.Measured.What
		return res
	}
	measured := c.Measured.GiB * float64(vram.GiB)
	res.Err = (float64(res.Predicted) - measured) / measured
	return res
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

func report(w io.Writer, results []Result) {
	fmt.Fprintf(w, "%-12s %-5s %-21s %12s %12s %8s  %s\n", "case", "trust", "measured", "measured", "predicted", "error", "peak at / skipped because")
	for _, r := range results {
		c := r.Case
		meas, pred := fmt.Sprintf("%.3f GiB", c.Measured.GiB), fmt.Sprintf("%.3f GiB", r.Predicted.GiB())
		if r.Unit != "" {
			meas, pred = serving(r.Measured, r.Unit), serving(r.Value, r.Unit)
		}
		switch {
		case r.Skip != "":
			fmt.Fprintf(w, "%-12s %-5s %-21s %12s %12s %8s  skipped: %s\n", c.ID, c.Trust, c.Measured.What, meas, "-", "-", r.Skip)
		case r.Verdict:
			verdict := "agrees"
			if !r.Agrees {
				verdict = "DIFFERS"
			}
			fmt.Fprintf(w, "%-12s %-5s %-21s %12s %12s %8s  %s\n", c.ID, c.Trust, c.Measured.What, meas, pred, verdict, r.Where)
		default:
			fmt.Fprintf(w, "%-12s %-5s %-21s %12s %12s %+7.1f%%  %s\n", c.ID, c.Trust, c.Measured.What, meas, pred, 100*r.Err, r.Where)
		}
	}
	fmt.Fprintln(w)
	memory := []string{"allocated_peak", "reserved_peak", "nvidia_smi", "other", runsKind}
	groups := [][2]string{}
	for _, k := range memory {
		groups = append(groups, [2]string{k, k})
	}
	groups = append(groups, [2]string{"memory", ""})
	for _, k := range servingKinds() {
		groups = append(groups, [2]string{k, k})
	}
	groups = append(groups, [2]string{"serving", ""}, [2]string{"all", ""})
	for _, g := range groups {
		in := func(r Result) bool {
			_, isServing := servingUnit[r.Case.Measured.What]
			switch g[0] {
			case "memory":
				return !isServing
			case "serving":
				return isServing
			case "all":
				return true
			}
			return r.Case.Measured.What == g[1]
		}
		summarize(w, g[0], results, in)
	}
}

// summarize prints one summary line (and, for a group with failed
// starts, how many verdicts agree).
func summarize(w io.Writer, kind string, results []Result, in func(Result) bool) {
	var errs []float64
	n, skipped, verdicts, agree := 0, 0, 0, 0
	for _, r := range results {
		if !in(r) {
			continue
		}
		n++
		switch {
		case r.Skip != "":
			skipped++
		case r.Verdict:
			verdicts++
			if r.Agrees {
				agree++
			}
		default:
			errs = append(errs, math.Abs(r.Err))
		}
	}
	if n == 0 && kind != "all" {
		return // a kind the file has no case of
	}
	fmt.Fprintf(w, "summary kind=%s cases=%d predicted=%d skipped=%d median_abs_err=%.1f%% p90_abs_err=%.1f%%\n",
		kind, n, n-skipped, skipped, 100*quantile(errs, 0.5), 100*quantile(errs, 0.9))
	if verdicts > 0 {
		fmt.Fprintf(w, "verdicts kind=%s failed_starts=%d agree=%d\n", kind, verdicts, agree)
	}
}

// serving formats a serving-log figure in its unit.
func serving(v float64, unit string) string {
	switch unit {
	case "tokens", "blocks":
		return fmt.Sprintf("%.0f %s", v, unit)
	case "x":
		return fmt.Sprintf("%.2fx", v)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

// quantile is the q-quantile with linear interpolation (0 for no data).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}
