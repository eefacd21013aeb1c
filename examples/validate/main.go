// Command validate predicts measured GPU-memory cases and reports the error.
//
//	go run ./examples/validate [-trust AB] [-v] FILE.jsonl
//
// Each case (format: testdata/cases-format.md) is predicted in the terms it
// was measured: allocated peak, reserved peak, or device-used memory. Cases
// the engine cannot express are skipped with the reason. The output ends
// with one summary line per measured kind and one overall:
//
//	summary kind=<allocated_peak|reserved_peak|nvidia_smi|other|all> cases=<N> predicted=<N> skipped=<N> median_abs_err=<X.X>% p90_abs_err=<Y.Y>%
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "validate:", err)
		os.Exit(1)
	}
}

// Result is one case's prediction.
type Result struct {
	Case      Case
	Predicted vram.Bytes
	Err       float64 // (predicted − measured) / measured
	Where     string
	Skip      string
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stdout)
	trust := fs.String("trust", "ABC", "trust levels to include (A, B, C)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: validate [-trust AB] FILE.jsonl")
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
	report(stdout, results)
	return nil
}

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
		var c Case
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
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

// checkCase checks the measured value a prediction is divided by: a
// finite, positive number of GiB that fits in bytes.
func checkCase(c Case) error {
	g := c.Measured.GiB
	if math.IsNaN(g) || g <= 0 || g > maxMeasuredGiB {
		return fmt.Errorf("measured.gib = %v: must be a positive number of GiB, at most %d", g, maxMeasuredGiB)
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
	fmt.Fprintf(w, "%-12s %-5s %-15s %10s %10s %8s  %s\n", "case", "trust", "measured", "meas GiB", "pred GiB", "error", "peak at / skipped because")
	for _, r := range results {
		c := r.Case
		if r.Skip != "" {
			fmt.Fprintf(w, "%-12s %-5s %-15s %10.3f %10s %8s  skipped: %s\n", c.ID, c.Trust, c.Measured.What, c.Measured.GiB, "-", "-", r.Skip)
			continue
		}
		fmt.Fprintf(w, "%-12s %-5s %-15s %10.3f %10.3f %+7.1f%%  %s\n", c.ID, c.Trust, c.Measured.What, c.Measured.GiB, r.Predicted.GiB(), 100*r.Err, r.Where)
	}
	fmt.Fprintln(w)
	kinds := []string{"allocated_peak", "reserved_peak", "nvidia_smi", "other", "all"}
	for _, k := range kinds {
		var errs []float64
		n, skipped := 0, 0
		for _, r := range results {
			if k != "all" && r.Case.Measured.What != k {
				continue
			}
			n++
			if r.Skip != "" {
				skipped++
				continue
			}
			errs = append(errs, math.Abs(r.Err))
		}
		fmt.Fprintf(w, "summary kind=%s cases=%d predicted=%d skipped=%d median_abs_err=%.1f%% p90_abs_err=%.1f%%\n",
			k, n, len(errs), skipped, 100*quantile(errs, 0.5), 100*quantile(errs, 0.9))
	}
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
