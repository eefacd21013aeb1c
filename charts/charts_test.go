package charts

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/gpu"
	"github.com/vramlab/vramlab/vram/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func init() {
	n := 0
	newID = func() string { n++; return fmt.Sprintf("vramlab-test%d", n) }
}

// overlay is the snapshot file beside the prediction for plan() on gpu
// ("" for none).
func overlay(t testing.TB, file, gpu string) Chart {
	s, err := snapshot.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.Rebuild(0)
	if err != nil {
		t.Fatal(err)
	}
	var g *vram.GPU
	if gpu != "" {
		x, err := vram.LookupGPU(gpu)
		if err != nil {
			t.Fatal(err)
		}
		g = &x
	}
	c, err := RunOverlay(run, plan(), g, "snapshot beside gpt2")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// samples are NVML readings of a job that grows to 9 GiB and stays.
func samples() []gpu.Sample {
	var ss []gpu.Sample
	for i := 0; i < 40; i++ {
		used := vram.Bytes(min(i, 18)) * vram.GiB / 2
		ss = append(ss, gpu.Sample{At: time.Duration(i) * 100 * time.Millisecond, Device: used + 500*vram.MiB, Process: used})
	}
	return ss
}

func plan() vram.Training {
	return vram.Training{Model: vram.MustPreset("gpt2"), SeqLen: 512, MicroBatch: 2, Precision: "amp_bf16", Optimizer: "adamw"}
}

// kinds builds one small chart of every kind, deterministically.
func kinds(t *testing.T) map[string]Chart {
	tr := plan()
	est, err := tr.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	tl, _ := tr.Timeline()
	pts, _ := vram.Sweep(tr, "micro_batch", []string{"1", "2", "4"})
	g, _ := vram.LookupGPU("T4")
	fm, err := FitMap(tr, "micro_batch", []string{"1", "8"}, "seq_len", []string{"256", "1024"}, vram.Budget{GPU: g})
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := tr.Layers()
	return map[string]Chart{
		"overlay":   overlay(t, "../vram/snapshot/testdata/training.p4.pickle", "T4"),
		"samples":   MemoryOverTime(samples(), 10*vram.GiB, g.Memory, "NVML readings"),
		"breakdown": Breakdown(est.Peak, "gpt2 peak"),
		"compare":   Compare([]string{"a", "b"}, []vram.Breakdown{est.Peak, est.Static}, g.Usable()),
		"timeline":  Timeline(tl, g.Usable()),
		"sweep":     Sweep("micro_batch", pts, g.Usable()),
		"fitmap":    fm,
		"flow":      Flow(est.Static, 8*vram.KiB, "flow"),
		"layers":    Layers(layers, "layers"),
		"gpus":      GPUs([]GPU{{Name: "0 Tesla T4", Used: 2 * vram.GiB, Total: 15 * vram.GiB}}, "GPUs"),
		"diff":      Diff(exampleDiff(t, "as planned", "full checkpointing"), 8),
		"phases":    Phases(postTraining(t), g.Total()),
		"allocator": Allocator(replayPoints(t), ""),
		"search":    Search(searchResult(t), ""),
		"deviceused": DeviceUsed([]string{"T4", "H100"}, []vram.Replay{
			{PeakAllocated: 10 * vram.GiB, PeakReserved: 11 * vram.GiB, Workspace: 8519680, Context: 300 * vram.MiB, NCCL: 600 * vram.MiB, DeviceUsed: 11*vram.GiB + 900*vram.MiB},
			{PeakAllocated: 10 * vram.GiB, PeakReserved: 12 * vram.GiB, Workspace: 32 * vram.MiB, Context: 500 * vram.MiB, DeviceUsed: 12*vram.GiB + 500*vram.MiB}},
			[]vram.Bytes{15 * vram.GiB, 80 * vram.GiB}, ""),
	}
}

// replayPoints are the allocator replay's points of the test plan.
func replayPoints(t testing.TB) []vram.ReplayPoint {
	g, _ := vram.LookupGPU("T4")
	rep, err := plan().Replay(vram.ReplayOptions{GPU: &g, Points: true})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Points
}

// postTraining is a small GRPO step with TRL and a colocated vLLM on a T4.
func postTraining(t testing.TB) vram.PostTrainingEstimate {
	g, _ := vram.LookupGPU("T4")
	pt := vram.PostTraining{Algorithm: "grpo", Framework: "trl", PromptLen: 128, CompletionLen: 256,
		Policy:  vram.Training{Model: vram.MustPreset("qwen2.5-0.5b"), MicroBatch: 2, Precision: "bf16"},
		Rollout: &vram.Rollout{Engine: "vllm", Sleep: vram.SleepLevel2}}
	e, err := pt.Estimate(g)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// exampleDiff is the example run against the same run with full
// checkpointing (both recorded by measure.py snapshot).
func exampleDiff(t testing.TB, a, b string) snapshot.RunDiff {
	runs := make([]*snapshot.Run, 2)
	for i, f := range []string{"tiny-llama", "tiny-llama-checkpointed"} {
		s, err := snapshot.ReadFile("../examples/snapshot/" + f + ".snapshot.pickle")
		if err != nil {
			t.Fatal(err)
		}
		if runs[i], err = s.Rebuild(0); err != nil {
			t.Fatal(err)
		}
	}
	return snapshot.DiffRuns(runs[0], runs[1], a, b)
}

// TestDiffChart: one bar per row that differs, largest first, in the
// category's color; the table has every row with both sides; the sites
// are the user's text (never translated).
func TestDiffChart(t *testing.T) {
	d := exampleDiff(t, "as planned", "full checkpointing")
	c := Diff(d, 6)
	names := c.Option.YAxis[0]["data"].([]string)
	bars := c.Option.Series[0].Data.([]opts.BarData)
	if len(names) != len(bars) || len(c.Table.Rows) != len(d.Categories)+min(6, len(d.Origins)) {
		t.Fatalf("%d names, %d bars, %d table rows", len(names), len(bars), len(c.Table.Rows))
	}
	for i, b := range bars {
		if b.Value.(float64) == 0 {
			t.Errorf("bar %d (%s) shows no difference", i, names[i])
		}
	}
	if names[0] != "activations" || bars[0].ItemStyle.Color != Colors["activations"] || bars[0].Value.(float64) >= 0 {
		t.Errorf("first bar %s %+v", names[0], bars[0])
	}
	site := c.Table.Rows[len(d.Categories)]
	if !strings.HasPrefix(site[0], userMark) || !strings.Contains(site[0], "modeling_llama.py") {
		t.Errorf("first site row %q", site)
	}
	if got := c.Table.Rows[0]; got[0] != "activations" || !strings.HasPrefix(got[3], "−") {
		t.Errorf("first table row %q", got)
	}
}

// TestGolden compares each chart kind's HTML with testdata/<kind>.golden
// (go test ./charts -update rewrites them).
func TestGolden(t *testing.T) {
	for name, c := range kinds(t) {
		got := HTML(c)
		path := filepath.Join("testdata", name+".golden")
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./charts -update)", err)
		}
		// IDs depend on the order the map is iterated in.
		norm := regexp.MustCompile(`vramlab-test\d+`)
		if norm.ReplaceAllString(got, "ID") != norm.ReplaceAllString(string(want), "ID") {
			_ = os.WriteFile(path+".got", []byte(got), 0o644)
			t.Errorf("%s: HTML differs from %s (wrote %s.got)", name, path, path)
		}
	}
}

// TestChartParts: every chart has the fallback table, the queued draw and
// no top-level declarations that a re-run cell would collide with.
func TestChartParts(t *testing.T) {
	for name, c := range kinds(t) {
		h := HTML(c)
		for _, want := range []string{`<table class="vramlab-fallback"`, "(window.__vramlabQ=window.__vramlabQ||[]).push(draw)", `<script>(function(){`, "echarts.getInstanceByDom(el)"} {
			if !strings.Contains(h, want) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
		if strings.Contains(h, "__f__") {
			t.Errorf("%s: function marker left in the output", name)
		}
		// Tooltips are text by construction: the formatter is wrapped, and no
		// formatter builds markup (ECharts' p.marker is an HTML string).
		if c.Option.Tooltip != nil && !strings.Contains(h, "textTips(o);") {
			t.Errorf("%s: tooltip formatter not wrapped by textTips", name)
		}
		for _, bad := range []string{"p.marker", "<br", "innerHTML"} {
			if strings.Contains(h, bad) {
				t.Errorf("%s: tooltip code builds markup (%q)", name, bad)
			}
		}
		if len(c.Table.Rows) == 0 {
			t.Errorf("%s: empty fallback table", name)
		}
	}
}

// TestSizes: a chart output stays small; the library comes once per page.
func TestSizes(t *testing.T) {
	est, _ := plan().Estimate()
	b := est.Peak
	b.KVCache, b.Other = vram.GiB, vram.MiB
	if n := len(HTML(Breakdown(b, "every category"))); n > 30<<10 {
		t.Errorf("breakdown chart is %d bytes, want ≤ 30 KB", n)
	}
	if n := len(LoaderHTML()); n < len(echartsJS) || n > len(echartsJS)+2048 {
		t.Errorf("loader is %d bytes for a %d-byte library", n, len(echartsJS))
	}
}

// FuzzLabels: no label can inject markup or script.
func FuzzLabels(f *testing.F) {
	for _, s := range []string{"</script><script>alert(1)</script>", "<!--", `"'><img src=x onerror=alert(1)>`, "__f__alert(1)__f__", "a\u2028b", "&lt;"} {
		f.Add(s)
	}
	est, _ := plan().Estimate()
	snap, err := snapshot.ReadFile("../vram/snapshot/testdata/training.p4.pickle")
	if err != nil {
		f.Fatal(err)
	}
	run, err := snap.Rebuild(0)
	if err != nil {
		f.Fatal(err)
	}
	base := exampleDiff(f, "", "")
	base.Origins = append([]snapshot.DiffRow{{Name: "x.py:1 f", Category: "activations", B: vram.MiB}}, base.Origins...)
	policy := plan()
	policy.SeqLen = 0
	pt := vram.PostTraining{Algorithm: "grpo", Framework: "trl", Policy: policy, PromptLen: 64, CompletionLen: 64, Generations: 2, Rollout: &vram.Rollout{Engine: "vllm"}}
	h100, err := vram.LookupGPU("H100-80GB")
	if err != nil {
		f.Fatal(err)
	}
	post, err := pt.Estimate(h100)
	if err != nil {
		f.Fatal(err)
	}
	tl := est.Timeline
	sweep, err := vram.Sweep(plan(), "seq_len", []string{"256", "512"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		base.Origins[0].Name = s
		diff := base
		diff.A, diff.B = s, s
		phases := post
		phases.GPU = s
		phases.Phases = append([]vram.Phase{{Name: s}}, post.Phases...)
		points := []vram.ReplayPoint{{Phase: s, Name: s, Layer: -1, Allocated: vram.GiB, Reserved: 2 * vram.GiB}}
		budget := vram.Budget{GPU: vram.GPU{Name: s, Memory: 80 * vram.GiB}}
		fitmap, _ := FitMap(plan(), "seq_len", []string{"256", "512"}, "micro_batch", []string{"1", s}, budget)
		every := []Chart{
			Breakdown(est.Peak, s),
			Compare([]string{s}, []vram.Breakdown{est.Peak}, 0),
			GPUs([]GPU{{Name: s, Used: 1, Total: 2}}, s),
			Layers([]vram.LayerMemory{{Name: s, Live: est.Peak}}, s),
			overlayOf(t, run, s),
			MemoryOverTime(samples(), vram.GiB, 0, s),
			Diff(diff, 3),
			Phases(phases, 80*vram.GiB),
			Allocator(points, s),
			Sweep(s, sweep, 0),
			Flow(est.Peak, vram.MiB, s),
			Timeline(tl, vram.GiB),
			Scaled(Breakdown(est.Peak, s), vram.TiB),
			fitmap,
		}
		for i, c := range every {
			h := HTML(c)
			if n := strings.Count(strings.ToLower(h), "<script"); n != 1 {
				t.Fatalf("label %q: %d script tags", s, n)
			}
			if n := strings.Count(strings.ToLower(h), "</script"); n != 1 {
				t.Fatalf("label %q: %d script end tags", s, n)
			}
			if strings.Contains(h, "<!--") || strings.Contains(h, "__f__") || strings.Contains(strings.ToLower(h), "<img") {
				t.Fatalf("label %q leaks into the markup of chart %d (%s)", s, i, c.Title)
			}
		}
	})
}

// TestScaled: a scaled chart's memory axis spans zero to the given top, and
// the original chart is left as it was.
func TestScaled(t *testing.T) {
	c := Breakdown(vram.Breakdown{Parameters: 3 * vram.GiB, Activations: 2 * vram.GiB}, "peak")
	s := Scaled(c, 10*vram.GiB+1)
	if got := s.Option.YAxis[0]["max"]; got != 15.0 {
		t.Errorf("max %v, want 15 (GiB, rounded up to a label)", got)
	}
	for x, want := range map[float64]float64{0.3: 0.3, 7: 8, 10: 10, 126: 150, 1000: 1000, 1001: 1500} {
		if got := niceCeil(x); math.Abs(got-want) > 1e-9 {
			t.Errorf("niceCeil(%v) = %v, want %v", x, got, want)
		}
	}
	if _, ok := c.Option.YAxis[0]["max"]; ok {
		t.Error("Scaled changed the chart it was given")
	}
	if got := Scaled(c, 0); got.Option.YAxis[0]["max"] != nil {
		t.Error("a zero top set a maximum")
	}
}

// TestRunOverlay: a GPU run is drawn with its reserved memory beside the
// replay's; a run recorded off the GPU only with allocated, beside the
// timeline, and the subtitle says why; the table has a row per phase span.
func TestRunOverlay(t *testing.T) {
	series := func(c Chart) (names []string) {
		for _, s := range c.Option.Series {
			names = append(names, s.Name)
		}
		return names
	}
	gpu := overlay(t, "../vram/snapshot/testdata/training.p4.pickle", "T4")
	if got := strings.Join(series(gpu), ","); got != "real allocated,predicted allocated,real reserved,predicted reserved" {
		t.Errorf("GPU run: series %s", got)
	}
	cpu := overlay(t, "../examples/snapshot/tiny-llama.snapshot.pickle", "")
	if got := strings.Join(series(cpu), ","); got != "real allocated,predicted allocated" {
		t.Errorf("CPU run: series %s", got)
	}
	if !strings.Contains(cpu.Option.Title.Subtitle, "recorded off the GPU") {
		t.Errorf("CPU run subtitle %q", cpu.Option.Title.Subtitle)
	}
	// setup, then forward, backward, optimizer of two iterations.
	var phases []string
	for _, r := range cpu.Table.Rows {
		phases = append(phases, r[0]+" "+r[1])
	}
	if got := strings.Join(phases, ", "); got != "0 setup, 1 forward, 1 backward, 1 optimizer, 2 forward, 2 backward, 2 optimizer" {
		t.Errorf("CPU run spans: %s", got)
	}
	pts := make([][2]float64, 10000)
	for i := range pts {
		pts[i] = [2]float64{float64(i), float64(i % 97)}
	}
	if th := thin(pts, maxPoints); len(th) > maxPoints || th[len(th)-1][0] < 9000 {
		t.Errorf("thinned to %d points ending at %v", len(th), th[len(th)-1])
	}
}

func overlayOf(t *testing.T, run *snapshot.Run, title string) Chart {
	c, err := RunOverlay(run, plan(), nil, title)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPhaseLabels: a timeline's phase bands keep their names only where the
// band is wide enough for them, so narrow ones (the loss) never overlap
// their neighbours; wide ones (forward, backward) keep theirs.
func TestPhaseLabels(t *testing.T) {
	tl, err := plan().Timeline()
	if err != nil {
		t.Fatal(err)
	}
	c := Timeline(tl, 0)
	var shown, hidden []string
	for _, d := range c.Option.Series[0].MarkAreas.Data {
		start := d.([]any)[0].(map[string]any)
		if l, ok := start["label"].(map[string]any); ok && l["show"] == false {
			hidden = append(hidden, start["name"].(string))
		} else {
			shown = append(shown, start["name"].(string))
		}
	}
	has := func(xs []string, p string) bool {
		for _, x := range xs {
			if strings.HasPrefix(x, p) {
				return true
			}
		}
		return false
	}
	if !has(shown, "forward") || !has(shown, "backward") || !has(hidden, "loss") {
		t.Errorf("labels shown %v, hidden %v", shown, hidden)
	}
	if labelFits("backward 2", 1, 100) || !labelFits("backward 2", 20, 100) || labelFits("x", 1, 0) {
		t.Error("labelFits")
	}
}

// TestCapacityOnScale: a capacity line above the data stays on the chart
// while the data fill at least half of it; a capacity further off leaves
// the axis to the data and is named in the subtitle instead.
func TestCapacityOnScale(t *testing.T) {
	tl, err := plan().Timeline()
	if err != nil {
		t.Fatal(err)
	}
	peak := tl.PeakEvent().Live.Total()
	c := Timeline(tl, peak*3/2)
	if m, ok := c.Option.YAxis[0]["max"].(float64); !ok || m < gv(peak*3/2) {
		t.Errorf("timeline axis max %v with a capacity of 1.5 × the peak", c.Option.YAxis[0]["max"])
	}
	if _, ok := Timeline(tl, 0).Option.YAxis[0]["max"]; ok {
		t.Error("no capacity: the axis should fit the data")
	}
	far := Timeline(tl, 80*vram.GiB)
	if _, ok := far.Option.YAxis[0]["max"]; ok || far.Option.Series[0].MarkLines != nil || !strings.Contains(far.Option.Title.Subtitle, "capacity 80.00 GiB, off the scale") {
		t.Errorf("80 GiB beside a %v peak: axis %v, subtitle %q", peak, far.Option.YAxis[0]["max"], far.Option.Title.Subtitle)
	}
	est, _ := plan().Estimate()
	cc := Compare([]string{"a"}, []vram.Breakdown{est.Peak}, est.Peak.Total()*2)
	if m, ok := cc.Option.YAxis[0]["max"].(float64); !ok || m < gv(est.Peak.Total()*2) {
		t.Errorf("compare axis max %v", cc.Option.YAxis[0]["max"])
	}
}

// TestFitMapMarksThePlan: the fit map outlines the cell of the plan as it
// stands, says so in its table, and its labels carry a unit.
func TestFitMapMarksThePlan(t *testing.T) {
	g, _ := vram.LookupGPU("T4")
	tr := plan() // micro_batch 2, seq_len 512
	fm, err := FitMap(tr, "micro_batch", []string{"1", "2"}, "seq_len", []string{"256", "512"}, vram.Budget{GPU: g})
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, row := range fm.Table.Rows {
		for _, cell := range row {
			if strings.HasSuffix(cell, "(this plan)") {
				marked++
			}
		}
	}
	if marked != 1 || fm.Table.Rows[1][2] == "" || !strings.HasSuffix(fm.Table.Rows[1][2], "(this plan)") {
		t.Errorf("table %v", fm.Table.Rows)
	}
	h := HTML(fm)
	if !strings.Contains(h, `"borderWidth":3`) || !strings.Contains(h, "GiB'") {
		t.Error("the plan's cell is not outlined, or labels have no unit")
	}
}

func TestStopPrintsOneLine(t *testing.T) {
	var buf strings.Builder
	code := -1
	old := exit
	exit = func(c int) { code = c }
	defer func() { exit = old }()
	stop(&buf, "model.name: unknown model preset \"llama-2-7bb\"; did you mean \"llama-2-7b\"?\n")
	if got, want := buf.String(), "error: model.name: unknown model preset \"llama-2-7bb\"; did you mean \"llama-2-7b\"?\n"; got != want || code != 1 {
		t.Fatalf("stop wrote %q and exited %d, want %q and 1", got, code, want)
	}
}

func TestMustOutsideNotebookPanics(t *testing.T) {
	Must(nil) // nothing happens
	defer func() {
		if r := recover(); r == nil || fmt.Sprint(r) != "bad plan" {
			t.Fatalf("recovered %v, want the error", r)
		}
	}()
	Must(errors.New("bad plan"))
}

// TestSiteNames: bars name a site by its file's base name unless two
// sites would share it, and add the category where a site has two rows.
func TestSiteNames(t *testing.T) {
	got := siteNames([]snapshot.DiffRow{
		{Name: "a/b/model.py:10 forward", Category: "activations"},
		{Name: "a/b/model.py:10 forward", Category: "temporaries"},
		{Name: "x/util.py:3 f", Category: "activations"},
		{Name: "y/util.py:3 f", Category: "activations"},
		{Name: "<no frame>", Category: "other"},
	})
	want := []string{"model.py:10 forward (activations)", "model.py:10 forward (temporaries)", "x/util.py:3 f", "y/util.py:3 f", "<no frame>"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

// searchResult is a small layout search: Llama-3-8B under torchtitan on
// 16 H100s, in bf16 without offload (float8 and offload set off, so the
// search does not try them).
func searchResult(t testing.TB) vram.SearchResult {
	g, _ := vram.LookupGPU("H100-80GB")
	p := vram.Training{Model: vram.MustPreset("llama-3-8b"), SeqLen: 4096, Precision: "mixed_bf16", Framework: vram.FrameworkTorchtitan,
		Float8: "none", Parallel: vram.Parallel{CPUOffload: "none"}}
	res, err := vram.Search(vram.SearchSpace{Plan: p, GPU: g, GPUs: 16, GlobalBatch: 32, Replay: 12})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
