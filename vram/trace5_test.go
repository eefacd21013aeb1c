package vram

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// trace5Row is one transformers 5.23 trace set against the engine's 4.57
// rules, compared as TestTraceMatchesMemTracker compares a 4.57 trace.
type trace5Row struct {
	name, family string
	model        Model   // the traced model
	peak         float64 // the engine's peak against the live-storage tracker's, relative
	peakMT       float64 // against MemTracker's
	mtSkipped    bool    // MemTracker keeps an unreached graph (unreachedGraph)
	buffersDiff  int64   // the traced buffers less those of the 4.57 trace of the same name
	phase        string  // the engine's phase of the peak, or "ours/theirs" where they differ
	cats         []string
	outside      []string // the comparisons outside the 4.57 test's tolerances
}

// compareTrace5 runs the 4.57 trace test's comparisons on one trace:
// the peak within 2 % of both trackers' (the live-storage tracker's
// alone where MemTracker keeps an unreached graph), parameters and
// buffers exact, the phase of the peak, and each category within 2 % (a
// known gap's bound where knownCategoryGaps has one). Parameters are held
// to the 4.57 trace of the same name; buffers are reported apart.
func compareTrace5(t *testing.T, f, release string) trace5Row {
	var ms traceMeasurement
	tr := loadMeasurement(t, f, &ms, func() measuredPlan { return ms.Plan })
	name := strings.TrimSuffix(filepath.Base(f), ".json")
	row := trace5Row{name: name, family: transformers5Key(tr.Model.Normalize()), model: tr.Model.Normalize()}
	tr.Transformers = release
	transformers5Unchecked = release != "" || only5(tr.Model.Normalize())
	est, err := tr.Estimate()
	transformers5Unchecked = false
	if err != nil {
		row.outside = append(row.outside, "estimate: "+err.Error())
		return row
	}
	rel := func(got, want int64) float64 { return float64(got-want) / float64(max(1, want)) }
	within := func(what string, got, want int64) float64 {
		d := rel(got, want)
		bound := 0.02
		if gap, ok := knownCategoryGaps[name]; ok && strings.HasPrefix(what, "activations") {
			bound = gap
		}
		if d > bound || d < -bound {
			row.outside = append(row.outside, fmt.Sprintf("%s %+.2f%%", what, 100*d))
		}
		return d
	}
	mt := peakOf(ms.Iteration1, ms.Iteration2)
	if oth := mt["OTH"]; oth > 0 {
		mt = map[string]int64{"Total": mt["Total"] - oth, "PARAM": mt["PARAM"], "BUFFER": mt["BUFFER"]}
	}
	st := peakOf(ms.Storage.Iteration1, ms.Storage.Iteration2)
	b := est.Peak
	got := int64(b.Total() - b.Other)
	row.mtSkipped = unreachedGraph(tr)
	row.peakMT = rel(got, mt["Total"])
	if !row.mtSkipped {
		within("peak (MemTracker)", got, mt["Total"])
	}
	row.peak = within("peak", got, st["Total"])
	// Parameters exactly as traced; the buffers as the 4.57 trace of the
	// same name has them (transformers 5 adds small ones: every rotary
	// embedding's original_inv_freq becomes a buffer of its own, Gemma's
	// embedding scale a scalar buffer), their difference reported apart.
	// A transformers 5 model has no 4.57 trace: its own trace's.
	st4 := st
	if old4 := filepath.Join("testdata", "trace", name+".json"); !only5(tr.Model.Normalize()) {
		var old traceMeasurement
		loadMeasurement(t, old4, &old, func() measuredPlan { return old.Plan })
		st4 = peakOf(old.Storage.Iteration1, old.Storage.Iteration2)
	}
	p := int64(b.Parameters)
	row.buffersDiff = st["BUFFER"] - st4["BUFFER"]
	if st["PARAM"] != st4["PARAM"] || mt["PARAM"] != st4["PARAM"] || p != st4["PARAM"]+st4["BUFFER"] {
		row.outside = append(row.outside, fmt.Sprintf("parameters %+d B", p-st4["BUFFER"]-st["PARAM"]))
	}
	ours := phaseOf(int64(b.Activations), int64(b.Gradients), got)
	if ours == "optimizer" && est.PeakAt.Phase == "forward" {
		// A peak in the first unit's forward (a frozen tower inside the
		// embedding side): nothing is saved yet and what lives is that
		// unit's forward, which the engine counts as temporaries.
		ours = "before gradients"
	}
	theirs := phaseOf(st["ACT"], st["GRAD"], st["Total"])
	row.phase = ours
	if ours != theirs {
		row.phase = ours + "/" + theirs
		row.outside = append(row.outside, fmt.Sprintf("peak in %s, traced in %s", ours, theirs))
		return row
	}
	cat := func(what string, got, want int64) {
		row.cats = append(row.cats, fmt.Sprintf("%s %+.2f%%", what, 100*within(what, got, want)))
	}
	switch {
	case ours == "optimizer":
		cat("gradients", int64(b.Gradients), st["GRAD"])
		cat("optimizer states and step scratch", int64(b.OptimizerStates+b.Temporaries), st["OPT"])
	case tr.Checkpointing == "full" || tr.Checkpointing == "op":
		cat("optimizer states", int64(b.OptimizerStates), st["OPT"])
		cat("activations, temporaries and gradients", int64(b.Activations+b.Temporaries+b.Gradients), st["ACT"]+st["TEMP"]+st["GRAD"])
	case ours == "before gradients" && b.Temporaries > 0 && st["TEMP"]+st["GRAD"] == 0:
		// The peak inside a block's forward (DSA's indexer): the engine
		// counts that block's live tensors as temporaries until it
		// returns, the tracker everything the forward makes as ACT.
		cat("optimizer states", int64(b.OptimizerStates), st["OPT"])
		cat("activations and the forward's temporaries", int64(b.Activations+b.Temporaries+b.Gradients), st["ACT"])
	default:
		cat("optimizer states", int64(b.OptimizerStates), st["OPT"])
		cat("activations", int64(b.Activations), st["ACT"])
		cat("temporaries and gradients", int64(b.Temporaries+b.Gradients), st["TEMP"]+st["GRAD"])
	}
	return row
}

// TestTransformers5Traces: the trace grid's small steps traced under
// transformers 5.23.0 and torch 2.15.0 (testdata/trace5, examples/measure
// grid in a 5.23 environment, the same file names as testdata/trace), each
// set against the engine's rules, which follow 4.57.6, with the 4.57 trace
// test's comparisons and tolerances (compareTrace5). A family is unchanged
// when every trace of it is within them, changed otherwise. The result is
// the generated table testdata/trace5/summary.golden and the engine's
// transformers5Traced (transformers5_traced.go), which lets a plan naming
// 5.23.0 run with the 4.57 rules for the unchanged families and refuses the
// changed ones with the measured difference; -update rewrites both.
func TestTransformers5Traces(t *testing.T) {
	oneGoroutineTable(t)
	files, _ := filepath.Glob(filepath.Join("testdata", "trace5", "*.json"))
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "not_run.json" })
	if len(files) < 5 {
		t.Fatalf("only %d transformers 5 traces in testdata/trace5", len(files))
	}
	sort.Strings(files)
	// Each trace against the 4.57 rules, and against the rules a plan
	// naming 5.23.0 gets: the same but where a family's recipe keys a
	// behaviour on 5.x (noTrainingCache, say).
	byFamily, byFamily5 := map[string][]trace5Row{}, map[string][]trace5Row{}
	for _, f := range files {
		row := compareTrace5(t, f, "")
		byFamily[row.family] = append(byFamily[row.family], row)
		row5 := compareTrace5(t, f, "5.23.0")
		byFamily5[row5.family] = append(byFamily5[row5.family], row5)
	}
	keys := make([]string, 0, len(byFamily))
	for k := range byFamily {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	var sum bytes.Buffer
	unchanged, changed, inconclusive, modelledN := 0, 0, 0, 0
	new5Modelled, new5Refused := 0, 0 // the transformers 5 models (family.only5)
	fmt.Fprintf(&sum, "# transformers 5.23.0 + torch 2.15.0 traces (testdata/trace5) against the engine's %s rules,\n", Transformers)
	fmt.Fprintf(&sum, "# compared as TestTraceMatchesMemTracker compares the %s traces: peak within 2 %% of both trackers',\n", Transformers)
	fmt.Fprintf(&sum, "# parameters exact, the phase of the peak, each category within 2 %%; buffers: the 5.23 trace's\n")
	fmt.Fprintf(&sum, "# less the 4.57 trace's (5.x registers original_inv_freq and Gemma's embed_scale as buffers), not counted.\n")
	fmt.Fprintf(&sum, "# Generated by go test ./vram -run TestTransformers5Traces -update; do not edit.\n")
	table := map[string]traced5JSON{}
	for _, k := range keys {
		rows, rows5 := byFamily[k], byFamily5[k]
		worstOf := func(rows []trace5Row) (worst float64, worstTrace string, outside []string) {
			for _, r := range rows {
				if max(r.peak, -r.peak) > max(worst, -worst) || worstTrace == "" {
					worst, worstTrace = r.peak, r.name
				}
				if len(r.outside) > 0 {
					outside = append(outside, r.name+": "+strings.Join(r.outside, ", "))
				}
			}
			return
		}
		worst, worstTrace, outside := worstOf(rows)
		worst5, worstTrace5, outside5 := worstOf(rows5)
		// modelled: outside under the 4.57 rules, or the 5.x rules the
		// recipes key on the release giving other peaks, and every trace
		// within under the 5.x rules.
		differs := false
		for i := range rows {
			differs = differs || rows5[i].peak != rows[i].peak
		}
		modelled := (len(outside) > 0 || differs) && len(outside5) == 0
		// A family whose every traced peak is in the optimizer step has
		// not had its activations compared: not enough to lift it.
		stepSeen := false
		for _, r := range rows {
			stepSeen = stepSeen || !strings.HasPrefix(r.phase, "optimizer")
		}
		verdict := "unchanged"
		new5 := only5(rows[0].model)
		if new5 {
			// A transformers 5 model: its own rules, nothing of 4.57's to
			// set them against.
			modelled = len(outside5) == 0
		}
		switch {
		case new5 && modelled && stepSeen:
			verdict = fmt.Sprintf("transformers 5 model, modelled (none of %d traces outside its rules)", len(rows))
			new5Modelled++
		case new5:
			verdict = fmt.Sprintf("transformers 5 model, not modelled (%d of %d traces outside its rules)", len(outside5), len(rows))
			new5Refused++
		case modelled && stepSeen:
			verdict = fmt.Sprintf("changed, modelled (%d of %d traces outside under the 4.57 rules, none under the 5.x rules; worst peak under them %+.2f%%, %s)", len(outside), len(rows), 100*worst5, worstTrace5)
			if len(outside) == 0 {
				verdict = fmt.Sprintf("changed, modelled (the 5.x rules give other peaks, every trace within under them and under the 4.57 rules; worst peak under the 5.x rules %+.2f%%, %s)", 100*worst5, worstTrace5)
			}
			modelledN++
		case len(outside) > 0:
			verdict = fmt.Sprintf("changed (%d of %d traces outside)", len(outside), len(rows))
			changed++
		case !stepSeen:
			verdict = "inconclusive (every traced peak is in the optimizer step)"
			inconclusive++
		default:
			unchanged++
		}
		fmt.Fprintf(&sum, "\n%s: %s, %d traces, worst peak %+.2f%% (%s)\n", k, verdict, len(rows), 100*worst, worstTrace)
		for i, r := range rows {
			mt := fmt.Sprintf("MemTracker %+.2f%%", 100*r.peakMT)
			if r.mtSkipped {
				mt = "MemTracker (unreached graph) " + fmt.Sprintf("%+.2f%%", 100*r.peakMT)
			}
			fmt.Fprintf(&sum, "  %-52s peak %+.2f%% (%s) at %s, buffers %+d B; %s", r.name, 100*r.peak, mt, r.phase, r.buffersDiff, strings.Join(r.cats, ", "))
			if len(r.outside) > 0 {
				fmt.Fprintf(&sum, " | outside: %s", strings.Join(r.outside, ", "))
			}
			if r5 := rows5[i]; r5.peak != r.peak || len(r5.outside) != len(r.outside) {
				fmt.Fprintf(&sum, " | 5.x rules: peak %+.2f%%; %s", 100*r5.peak, strings.Join(r5.cats, ", "))
				if len(r5.outside) > 0 {
					fmt.Fprintf(&sum, "; outside: %s", strings.Join(r5.outside, ", "))
				}
			}
			sum.WriteString("\n")
		}
		lifted := len(outside5) == 0 && stepSeen
		row := traced5JSON{Unchanged: lifted, Traces: len(rows), Trace: rows[0].name, Worst: round2(100 * worst), WorstTrace: worstTrace,
			Buffers: rows[0].buffersDiff, Outside: outside5}
		if modelled {
			row.Worst, row.WorstTrace = round2(100*worst5), worstTrace5
		}
		if modelled && stepSeen {
			row.Modelled, row.Worst457, row.WorstTrace457 = true, round2(100*worst), worstTrace
		}
		if new5 {
			row.Worst457, row.WorstTrace457 = 0, ""
		}
		row.Inconclusive = !stepSeen && len(outside5) == 0
		table[k] = row
	}
	// The grid points transformers 5.23 could not run, as the trace run
	// recorded them (testdata/trace5/not_run.json).
	var notRun map[string]string
	if b, err := os.ReadFile(filepath.Join("testdata", "trace5", "not_run.json")); err == nil {
		if err := json.Unmarshal(b, &notRun); err != nil {
			t.Fatalf("not_run.json: %v", err)
		}
	}
	if len(notRun) > 0 {
		fmt.Fprintf(&sum, "\nnot run under transformers 5.23 (testdata/trace5/not_run.json, the trace run's errors):\n")
		for _, n := range slices.Sorted(maps.Keys(notRun)) {
			if _, err := os.Stat(filepath.Join("testdata", "trace", n+".json")); err != nil {
				t.Errorf("not_run.json: %s is no 4.57 trace", n)
			}
			if _, err := os.Stat(filepath.Join("testdata", "trace5", n+".json")); err == nil {
				t.Errorf("not_run.json: %s has a 5.23 trace", n)
			}
			fmt.Fprintf(&sum, "  %-52s %s\n", n, notRun[n])
		}
	}
	fmt.Fprintf(&sum, "\n%d families, %d traces (%d grid points not run): %d unchanged, %d changed and modelled by 5.x rules, %d changed, %d inconclusive; %d transformers 5 models modelled by their own rules, %d not\n", len(keys), len(files), len(notRun), unchanged, modelledN, changed, inconclusive, new5Modelled, new5Refused)
	src, err := json.MarshalIndent(table, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	src = append(src, '\n')
	t.Logf("%d families traced under transformers 5.23: %d unchanged, %d modelled, %d changed, %d inconclusive", len(keys), unchanged, modelledN, changed, inconclusive)

	for _, g := range []struct {
		path string
		data []byte
	}{{filepath.Join("testdata", "trace5", "summary.golden"), sum.Bytes()}, {"transformers5_traced.json", src}} {
		if *updateGolden {
			if err := os.WriteFile(g.path, g.data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(g.path)
		if err != nil {
			t.Fatalf("%v (go test ./vram -run TestTransformers5Traces -update)", err)
		}
		if !bytes.Equal(want, g.data) {
			t.Errorf("%s is not what the traces give (go test ./vram -run TestTransformers5Traces -update):\n%s", g.path, g.data)
		}
	}
	if *updateGolden {
		return // the engine's table is rewritten; the next run checks it
	}

	// A plan naming transformers 5.23.0 runs with the 4.57 rules for an
	// unchanged family, the same peak and a note citing the trace; a
	// changed family is refused with the measured difference.
	for _, k := range keys {
		row := byFamily[k][0]
		var ms traceMeasurement
		tr := loadMeasurement(t, filepath.Join("testdata", "trace5", row.name+".json"), &ms, func() measuredPlan { return ms.Plan })
		want, err := tr.Estimate()
		if err != nil {
			continue // recorded in the table
		}
		tr.Transformers = "5.23.0"
		got, err := tr.Estimate()
		if transformers5Traced[k].unchanged {
			if err != nil {
				t.Errorf("%s under transformers 5.23.0: %v", k, err)
				continue
			}
			if !transformers5Traced[k].modelled && got.Peak != want.Peak {
				t.Errorf("%s under transformers 5.23.0: peak %v, the 4.57 rules give %v", k, got.Peak, want.Peak)
			}
			cite := "traced unchanged at 5.23.0 (testdata/trace5/" + row.name + ".json"
			if transformers5Traced[k].modelled {
				cite = "within the 4.57 traces' tolerances at 5.23.0 (testdata/trace5/" + row.name + ".json"
			}
			if only5(row.model) {
				// A transformers 5 model, or one whose 4.x modeling the
				// engine does not model (family.has4): unset is 5.23.0, a
				// 4.x release refused.
				cite = "traced at 5.23.0 (testdata/trace5/" + row.name + ".json"
				note, refusal := "is a transformers 5 model", "is not in transformers 4.x"
				if lookupFamily(row.model.Family).has4 != "" {
					note, refusal = "is modelled as transformers 5 builds and trains it", "not as 4.x does"
				}
				if got.Peak != want.Peak || !strings.Contains(strings.Join(want.Notes, "\n"), note) {
					t.Errorf("%s with no transformers release: peak %v (5.23.0: %v), notes %q", k, want.Peak, got.Peak, want.Notes)
				}
				tr.Transformers = Transformers
				if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), refusal) {
					t.Errorf("%s under transformers %s: %v, want it refused", k, Transformers, err)
				}
			}
			if !strings.Contains(strings.Join(got.Notes, "\n"), cite) {
				t.Errorf("%s under transformers 5.23.0: notes %q cite no trace", k, got.Notes)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "not yet written") {
			t.Errorf("%s under transformers 5.23.0: %v, want the refusal of a changed family", k, err)
		}
	}
}

// TestTransformers5Refusals: a 5.x release before the traced one, and a
// family not traced under it, are refused; a later release is modelled as
// the traced one, with a note, or refused as it would be.
func TestTransformers5Refusals(t *testing.T) {
	tr := Training{Model: Model{Family: "llama", Layers: 2, Hidden: 256, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 1000, MaxPosition: 256},
		SeqLen: 128, MicroBatch: 1, Transformers: "5.22.0"}
	if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), "5.23.0 is traced") {
		t.Errorf("transformers 5.22.0: %v", err)
	}
	tr.Transformers = "5.23.0"
	at523, err := tr.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	tr.Transformers = "5.25.0"
	later, err := tr.Estimate()
	if err != nil || later.Peak != at523.Peak || !strings.Contains(strings.Join(later.Notes, " "), "transformers 5.25.0 is newer than the newest traced 5.x release; modelled as 5.23.0") {
		t.Errorf("transformers 5.25.0: %v, %v (5.23.0: %v); notes %q", later.Peak.Total(), err, at523.Peak.Total(), later.Notes)
	}
	changed := tr
	changed.Model = MustPreset("qwen3-next-80b-a3b")
	if tr5, ok := transformers5Traced["qwen3_next"]; ok && !tr5.unchanged {
		if _, err := changed.Estimate(); err == nil || !strings.Contains(err.Error(), "modelled as 5.23.0, the newest traced") {
			t.Errorf("qwen3_next under transformers 5.25.0: %v", err)
		}
	}
	tr.Model = Model{Family: "gptj", Layers: 2, Hidden: 256, Heads: 4, FFN: 1024, Vocab: 1000, MaxPosition: 256}
	tr.Transformers = "5.23.0"
	if _, ok := transformers5Traced["gptj"]; ok {
		t.Skip("gptj is traced under 5.23")
	}
	if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), "not traced under transformers 5") {
		t.Errorf("gptj under transformers 5.23.0: %v", err)
	}
}

// TestTransformers5Plan: a plan naming transformers 5.23.0 for a model of a
// family 5.23 left unchanged answers with the 4.57 rules, and its releases
// say so, citing the trace; for a changed family it is refused.
func TestTransformers5Plan(t *testing.T) {
	p, err := ParsePlan([]byte(`{"model": "qwen3-8b", "gpu": "H100-80GB", "train": {"seq_len": 2048, "micro_batch": 1}, "versions": {"transformers": "5.23.0"}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if !transformers5Traced["qwen3"].unchanged {
		t.Skip("qwen3 changed at 5.23")
	}
	rel, err := p.Releases()
	var tf *Modelled
	for i := range rel {
		if rel[i].Library == "transformers" {
			tf = &rel[i]
		}
	}
	if err != nil || tf == nil || tf.Asked != "5.23.0" || tf.Release != Transformers || !strings.Contains(tf.Note, "traced unchanged at 5.23.0 (testdata/trace5/qwen3-tiny-") {
		t.Errorf("releases %+v, %v", rel, err)
	}
	five, err := p.Training.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	p.Training.Transformers = ""
	four, err := p.Training.Estimate()
	if err != nil || four.Peak != five.Peak {
		t.Errorf("qwen3-8b: peak %v at 5.23.0, %v at %s (%v)", five.Peak, four.Peak, Transformers, err)
	}
	for _, k := range traced5Families() {
		if tr := transformers5Traced[k]; tr.unchanged || strings.Contains(k, "(") {
			continue
		}
		q, err := ParsePlan([]byte(`{"model": "qwen3-8b", "train": {"seq_len": 8, "micro_batch": 1}, "versions": {"transformers": "5.23.0"}}`), "")
		if err != nil {
			t.Fatal(err)
		}
		q.Training.Model.Family = k // only the refusal is read
		if _, err := q.Releases(); err == nil || !strings.Contains(err.Error(), "not yet written") {
			t.Errorf("%s: releases %v, want the refusal", k, err)
		}
		break
	}
}

// TestTransformers5TrainingCache: Gemma 3 built no KV cache in training
// before transformers 5 and builds one from 5.0, as Llama does
// (recipe.noTrainingCache keyed on the release): the tiny Gemma 3's fp32
// step without checkpointing, whose peak is the end of the forward, is
// within 0.1 % of its 4.57 trace under the 4.57 rules and of its 5.23
// trace under 5.23's, the two apart by the cache's keys and values.
func TestTransformers5TrainingCache(t *testing.T) {
	name := "gemma3-tiny-fp32-eager-none-adamw"
	for _, c := range []struct{ dir, release string }{{"trace", ""}, {"trace5", "5.23.0"}} {
		var ms traceMeasurement
		tr := loadMeasurement(t, filepath.Join("testdata", c.dir, name+".json"), &ms, func() measuredPlan { return ms.Plan })
		tr.Transformers = c.release
		est, err := tr.Estimate()
		if err != nil {
			t.Fatalf("%s at %q: %v", name, c.release, err)
		}
		st := peakOf(ms.Storage.Iteration1, ms.Storage.Iteration2)
		got := int64(est.Peak.Total() - est.Peak.Other)
		if d := float64(got-st["Total"]) / float64(st["Total"]); d > 0.001 || d < -0.001 {
			t.Errorf("%s (%s) at transformers %q: peak %d, traced %d (%+.3f%%)", name, c.dir, c.release, got, st["Total"], 100*d)
		}
	}
}

// TestTransformers5Gemma2Attention: transformers 5 dropped Gemma 2's SDPA
// (5.23 modeling_gemma2.py:352), so a 5.23.0 plan asking for it by name is
// refused as from_pretrained refuses it, and one leaving attention unset
// runs eager, noted; under 4.57 SDPA runs.
func TestTransformers5Gemma2Attention(t *testing.T) {
	var ms traceMeasurement
	tr := loadMeasurement(t, filepath.Join("testdata", "trace5", "gemma2-tiny-fp32-eager-none-adamw.json"), &ms, func() measuredPlan { return ms.Plan })
	tr.Attention = "sdpa"
	if _, err := tr.Estimate(); err != nil {
		t.Fatalf("gemma2 sdpa under %s: %v", Transformers, err)
	}
	tr.Transformers = "5.23.0"
	if transformers5Traced["gemma2"].unchanged {
		if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), "raises ValueError for gemma2") {
			t.Errorf("gemma2 sdpa by name under 5.23.0: %v", err)
		}
		tr.Attention = ""
		est, err := tr.Estimate()
		if err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "only eager and flash2 and flash3 attention") {
			t.Errorf("gemma2 attention unset under 5.23.0: %v, notes %q", err, est.Notes)
		}
	}
}

// round2 rounds a percentage to two decimals, as the table shows it.
func round2(p float64) float64 { return math.Round(100*p) / 100 }
