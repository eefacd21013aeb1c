// Command gallery writes an offline HTML page with every chart kind, for a
// look in a browser (and for the browser tests).
//
//	go run ./examples/gallery -o gallery.html [-theme dark]
//	go run ./examples/gallery -o hostile.html -label '<img src=x onerror=alert(1)>'
//	go run ./examples/gallery -o totals.html -totals
//
// -label puts the given text in every place a user's text can reach a
// chart (titles, plan labels, sweep values, GPU and layer names): the
// browser tests use it to check that no label ever runs as script.
package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/vramlab/vramlab/examples/internal/term"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/vramlab/vramlab/charts"
	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/gpu"
	"github.com/vramlab/vramlab/vram/snapshot"
)

func main() {
	if err := run(os.Args[1:], term.Safe(os.Stdout)); err != nil {
		fmt.Fprintln(term.Safe(os.Stderr), "gallery:", err)
		os.Exit(1)
	}
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("gallery", flag.ContinueOnError)
	fs.SetOutput(w)
	out := fs.String("o", "", "output file (default: standard output)")
	theme := fs.String("theme", "auto", "auto, light or dark")
	label := fs.String("label", "", "text to use for every user-supplied label (security tests)")
	totals := fs.Bool("totals", false, "the charts with a memory axis, for plans of 1 GiB to 2 TiB (layout tests)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h asked for the usage, which is printed
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q; usage: gallery [-o FILE] [-theme auto|light|dark] [-label TEXT]", fs.Arg(0))
	}
	var cs []charts.Chart
	var err error
	switch {
	case *label != "":
		cs, err = Hostile(*label)
	case *totals:
		cs, err = Totals()
	default:
		cs, err = Gallery()
	}
	if err != nil {
		return err
	}
	for i := range cs {
		cs[i].Theme = *theme
	}
	page := charts.Page("VRAM Lab chart gallery", cs...)
	if *out == "" {
		_, err := io.WriteString(w, page)
		return err
	}
	return os.WriteFile(*out, []byte(page), 0o644)
}

// Gallery builds one chart of each kind from a Llama-3-8B plan.
func Gallery() ([]charts.Chart, error) {
	t := vram.Training{Model: vram.MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16",
		Checkpointing: "selective", LoRA: &vram.LoRA{Rank: 16, Targets: []string{"q_proj", "k_proj", "v_proj", "o_proj"}}}
	est, err := t.Estimate()
	if err != nil {
		return nil, err
	}
	g, _ := vram.LookupGPU("A100-80GB")
	budget := vram.Budget{GPU: g, Headroom: vram.DefaultHeadroom}
	var plans []string
	var bs []vram.Breakdown
	for _, p := range []struct{ name, opt, prec string }{{"fp32 AdamW", "adamw", "fp32"}, {"bf16 AdamW", "adamw", "bf16"}, {"bf16 8-bit AdamW", "adamw_8bit", "bf16"}} {
		full := vram.Training{Model: vram.MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 1, Precision: p.prec, Optimizer: p.opt, Checkpointing: "full"}
		e, err := full.Estimate()
		if err != nil {
			return nil, err
		}
		plans, bs = append(plans, p.name), append(bs, e.Peak)
	}
	tl, err := t.Timeline()
	if err != nil {
		return nil, err
	}
	pts, err := vram.Sweep(t, "micro_batch", []string{"1", "2", "4", "8", "16", "32"})
	if err != nil {
		return nil, err
	}
	fm, err := charts.FitMap(t, "micro_batch", []string{"1", "2", "4", "8", "16"}, "seq_len", []string{"1024", "2048", "4096", "8192"}, budget)
	if err != nil {
		return nil, err
	}
	layers, err := t.Layers()
	if err != nil {
		return nil, err
	}
	static, err := vram.Training{Model: vram.MustPreset("llama-2-7b"), SeqLen: 2048, MicroBatch: 1, Precision: "fp32"}.Estimate()
	if err != nil {
		return nil, err
	}
	overlay, err := exampleOverlay("A tiny Llama on the CPU: the run beside the prediction")
	if err != nil {
		return nil, err
	}
	diff, err := exampleDiff("as planned", "with full checkpointing")
	if err != nil {
		return nil, err
	}
	replayed := vram.Training{Model: vram.MustPreset("llama-3.2-1b"), SeqLen: 2048, MicroBatch: 4, Precision: "amp_bf16", Optimizer: "adamw", Attention: "sdpa"}
	rep, err := replayed.Replay(vram.ReplayOptions{GPU: &g, Points: true})
	if err != nil {
		return nil, err
	}
	post, err := examplePostTraining(g)
	if err != nil {
		return nil, err
	}
	// Two micro-batches a step: each hump of the timeline names its own.
	accum := vram.Training{Model: vram.MustPreset("llama-3.2-1b"), SeqLen: 1024, MicroBatch: 2, GradAccum: 2, Precision: "bf16", Optimizer: "adamw"}
	accumTL, err := accum.Timeline()
	if err != nil {
		return nil, err
	}
	return []charts.Chart{
		charts.Breakdown(est.Peak, "Llama-3-8B LoRA, peak per GPU"),
		charts.Compare(plans, bs, g.Usable()),
		// A comparison report's chart: a title long enough to wrap at A4.
		charts.Compare(plans, bs, g.Usable()).WithTitle("Llama-3-8B LoRA against Llama-3-8B QLoRA and Llama-2-7B full fine-tune in fp32: peak per GPU by plan", "the dashed line: what an A100 80GB leaves after its CUDA context"),
		charts.Timeline(tl, g.Usable()),
		charts.Sweep("micro_batch", pts, g.Usable()), // the bars are allocated peaks
		fm,
		charts.Flow(static.Static, 16*vram.KiB, "Llama-2-7B fp32 AdamW: how memory flows in a step"),
		charts.Layers(layers, "Llama-3-8B LoRA: memory by layer"),
		charts.GPUs([]charts.GPU{{Name: "0 NVIDIA H100 80GB HBM3 (simulated)", Used: 61 * vram.GiB, Total: 79 * vram.GiB}, {Name: "1 NVIDIA H100 80GB HBM3 (simulated)", Used: 3 * vram.GiB, Total: 79 * vram.GiB}}, "Memory in use on each GPU (NVML)"),
		overlay,
		charts.MemoryOverTime(readings(), 9*vram.GiB, g.Total(), "NVML readings of a job (illustrative)"),
		charts.Diff(diff, 8),
		charts.Allocator(rep.Points, ""),
		charts.Timeline(accumTL, g.Usable()).WithTitle("Llama-3.2-1B, two micro-batches a step: memory over the step", ""),
		charts.Phases(post, g.Total()),
	}, nil
}

// Totals draws every chart with a memory axis for plans whose peaks run
// from about 1 GiB to about 2 TiB, so that a layout test sees the axis
// labels and pins of every size a user's plan gives them.
func Totals() ([]charts.Chart, error) {
	g, _ := vram.LookupGPU("H100-80GB")
	plans := []struct {
		name string
		t    vram.Training
	}{
		{"GPT-2, 1 GiB", vram.Training{Model: vram.MustPreset("gpt2"), SeqLen: 512, MicroBatch: 2, Precision: "bf16", Optimizer: "adamw"}},
		{"Llama-3-8B, about 100 GiB", vram.Training{Model: vram.MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 2, Precision: "mixed_bf16", Optimizer: "adamw"}},
		{"Llama-3.1-70B, about 1 TiB", vram.Training{Model: vram.MustPreset("llama-3.1-70b"), SeqLen: 2048, MicroBatch: 1, Precision: "fp32", Optimizer: "adamw", Checkpointing: "full"}},
		{"Llama-3.1-70B, about 2 TiB", vram.Training{Model: vram.MustPreset("llama-3.1-70b"), SeqLen: 8192, MicroBatch: 2, Precision: "fp32", Optimizer: "adamw"}},
	}
	var cs []charts.Chart
	var names []string
	var peaks []vram.Breakdown
	for _, p := range plans {
		est, err := p.t.Estimate()
		if err != nil {
			return nil, err
		}
		tl, err := p.t.Timeline()
		if err != nil {
			return nil, err
		}
		pts, err := vram.Sweep(p.t, "micro_batch", []string{"1", "2", "4", "8"})
		if err != nil {
			return nil, err
		}
		rep, err := p.t.Replay(vram.ReplayOptions{GPU: &g, Points: true})
		if err != nil {
			return nil, err
		}
		names, peaks = append(names, p.name), append(peaks, est.Peak)
		cs = append(cs, charts.Breakdown(est.Peak, p.name+": peak per GPU"),
			charts.Timeline(tl, g.Usable()).WithTitle(p.name+": memory over the step", ""),
			charts.Sweep("micro_batch", pts, g.Usable()).WithTitle(p.name+": peak by micro-batch", ""),
			charts.Allocator(rep.Points, p.name+": allocated and reserved at each phase's end"))
	}
	cs = append(cs, charts.Compare(names, peaks, g.Usable()).WithTitle("Plans of 1 GiB to 2 TiB side by side", ""))
	return cs, nil
}

// examplePostTraining is GRPO with TRL and a colocated vLLM on the
// gallery's card.
func examplePostTraining(g vram.GPU) (vram.PostTrainingEstimate, error) {
	pt := vram.PostTraining{Algorithm: "grpo", Framework: "trl", PromptLen: 512, CompletionLen: 1024,
		Policy:  vram.Training{Model: vram.MustPreset("qwen2.5-7b"), MicroBatch: 4, Precision: "bf16", Trainable: "lora", LoRA: &vram.LoRA{Rank: 16, Targets: []string{"all_linear"}}},
		Rollout: &vram.Rollout{Engine: "vllm", GPUMemoryUtilization: 0.3}}
	return pt.Estimate(g)
}

// readings are NVML readings of a job that loads, grows over its first
// steps and settles (made up, for the gallery).
func readings() []gpu.Sample {
	var ss []gpu.Sample
	for i := 0; i < 120; i++ {
		used := vram.Bytes(min(i, 60)) * 150 * vram.MiB
		ss = append(ss, gpu.Sample{At: time.Duration(i) * 250 * time.Millisecond, Device: used + 520*vram.MiB, Process: used})
	}
	return ss
}

// exampleOverlay is the example snapshot (examples/snapshot: a tiny Llama's
// two steps recorded on the CPU) beside the prediction for its plan.
func exampleOverlay(title string) (charts.Chart, error) {
	s, err := snapshot.ReadFile(filepath.Join("examples", "snapshot", "tiny-llama.snapshot.pickle"))
	if err != nil {
		return charts.Chart{}, err
	}
	run, err := s.Rebuild(0)
	if err != nil {
		return charts.Chart{}, err
	}
	p, err := vram.ReadPlan(filepath.Join("examples", "snapshot", "tiny-llama.json"))
	if err != nil {
		return charts.Chart{}, err
	}
	return charts.RunOverlay(run, *p.Training, nil, title)
}

// exampleDiff is the example snapshot against the same run with full
// checkpointing (examples/snapshot), at their allocated peaks.
func exampleDiff(a, b string) (snapshot.RunDiff, error) {
	var runs [2]*snapshot.Run
	for i, name := range []string{"tiny-llama", "tiny-llama-checkpointed"} {
		s, err := snapshot.ReadFile(filepath.Join("examples", "snapshot", name+".snapshot.pickle"))
		if err != nil {
			return snapshot.RunDiff{}, err
		}
		if runs[i], err = s.Rebuild(0); err != nil {
			return snapshot.RunDiff{}, err
		}
	}
	return snapshot.DiffRuns(runs[0], runs[1], a, b), nil
}

// Hostile builds one chart of each kind with text in every place a user's
// text can reach: titles, plan labels, the swept field and its values, the
// fit map's GPU, fields and values, layer and GPU names.
func Hostile(text string) ([]charts.Chart, error) {
	t := vram.Training{Model: vram.MustPreset("gpt2"), SeqLen: 256, MicroBatch: 2, Precision: "bf16"}
	est, err := t.Estimate()
	if err != nil {
		return nil, err
	}
	tl, err := t.Timeline()
	if err != nil {
		return nil, err
	}
	pts, err := vram.Sweep(t, "micro_batch", []string{"1", text, "4"})
	if err != nil {
		return nil, err
	}
	g, _ := vram.LookupGPU("T4")
	g.Name = text
	fm, err := charts.FitMap(t, "micro_batch", []string{"1", text}, "seq_len", []string{"256", text}, vram.Budget{GPU: g})
	if err != nil {
		return nil, err
	}
	layers, err := t.Layers()
	if err != nil {
		return nil, err
	}
	for i := range layers {
		layers[i].Name = text + " " + layers[i].Name
	}
	overlay, err := exampleOverlay(text)
	if err != nil {
		return nil, err
	}
	diff, err := exampleDiff(text, text+" 2")
	if err != nil {
		return nil, err
	}
	if len(diff.Origins) > 0 {
		diff.Origins[0].Name = text
	}
	return []charts.Chart{
		charts.Breakdown(est.Peak, text),
		charts.Compare([]string{text, text + " 2"}, []vram.Breakdown{est.Peak, est.Static}, g.Usable()),
		charts.Timeline(tl, g.Usable()),
		charts.Sweep(text, pts, g.Usable()),
		fm,
		charts.Flow(est.Static, 16*vram.KiB, text),
		charts.Layers(layers, text),
		charts.GPUs([]charts.GPU{{Name: text, Used: 3 * vram.GiB, Total: 15 * vram.GiB}, {Name: text + " 1", Used: vram.GiB, Total: 15 * vram.GiB}}, text),
		overlay,
		charts.MemoryOverTime(readings(), 9*vram.GiB, g.Total(), text),
		charts.Diff(diff, 8),
	}, nil
}
