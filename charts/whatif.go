package charts

import (
	"fmt"
	"html"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/janpfeifer/gonb/gonbui"
	"github.com/janpfeifer/gonb/gonbui/comms"
	"github.com/janpfeifer/gonb/gonbui/dom"
	"github.com/janpfeifer/gonb/gonbui/widgets"
	"github.com/vramlab/vramlab/vram"
)

// Controls configures WhatIf. The zero value offers the plan's own model
// and a few common presets, the usual training GPUs, no headroom, and ends
// the cell after ten idle minutes.
type Controls struct {
	Models   []string      // presets to choose from, after the plan's own model
	GPUs     []string      // GPU catalog names; the first is selected
	Headroom float64       // share of the GPU kept free, as vram.Budget
	Idle     time.Duration // the cell ends after this long without a change
	// Probe is how long WhatIf, in a notebook Jupyter Server started,
	// waits for the browser to answer its first control before it draws
	// the plan once, without controls, and says so (the notebook run
	// through the server's API with no page open). Default 60 s: a
	// browser on a busy machine may load gonb's widget script slowly
	// (5 s was too short on a loaded two-core machine), and a headless
	// run (nbconvert, papermill) never waits (inServerSession).
	Probe time.Duration
}

var (
	defaultModels = []string{"qwen3-8b", "llama-3.1-8b", "gemma-3-4b-text", "smollm3-3b", "olmo-3-7b", "qwen3-14b", "mistral-small-24b", "qwen3-32b", "gpt-oss-20b", "qwen3-30b-a3b", "llama-2-7b", "gpt2"}
	defaultGPUs   = []string{"A100-80GB", "H100-80GB", "RTX-4090", "A100-40GB", "L4", "H200"}
	seqLens       = []int{128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768}
	microBatches  = []int{1, 2, 4, 8, 16, 32, 64} // the useful values a slider's pixels each get
	precisions    = []string{"fp32", "amp_bf16", "mixed_bf16", "bf16", "fp16"}
	optimizers    = []string{"adamw", "adamw_8bit", "adafactor", "lion", "sgd"}
	checkpoints   = []string{"none", "selective", "op", "full"}
)

// whatIf is the state behind the controls: the plan as the reader has set
// it, and the choices each control offers. It has no notebook in it, so it
// is tested as plain Go.
type whatIf struct {
	start   vram.Training // the plan the controls started from
	changed [][2]string   // the settings changed, in order (Remembered applies them)
	plan    vram.Training
	own     vram.Model // the plan's model, first in the model list
	models  []string
	gpus    []vram.GPU
	gpu     int
	room    float64
}

func newWhatIf(t vram.Training, c Controls) (*whatIf, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	w := &whatIf{start: t, plan: t, own: t.Model, room: c.Headroom}
	w.models = []string{t.Model.Name}
	ms := c.Models
	if len(ms) == 0 {
		ms = defaultModels
	}
	for _, m := range ms {
		p, err := vram.LookupPreset(m)
		if err != nil {
			return nil, fmt.Errorf("charts.Controls.Models: %w", err)
		}
		if p.Model.Name == t.Model.Name {
			continue // the plan's own model is first already
		}
		w.models = append(w.models, m)
	}
	gs := c.GPUs
	if len(gs) == 0 {
		gs = defaultGPUs
	}
	for _, name := range gs {
		g, err := vram.LookupGPU(name)
		if err != nil {
			return nil, fmt.Errorf("charts.Controls.GPUs: %w", err)
		}
		w.gpus = append(w.gpus, g)
	}
	if c.Headroom < 0 || c.Headroom >= 1 {
		return nil, fmt.Errorf("charts.Controls.Headroom: must be in [0, 1), got %v", c.Headroom)
	}
	return w, nil
}

// control is one control's name (the plan field it sets) and its choices.
type control struct {
	field   string
	label   string
	options []string // shown in a select; nil for a slider
	steps   []int    // a slider's values; it moves by index
	value   int      // initial index
}

func (w *whatIf) controls() []control {
	return []control{
		{field: "model", label: "model", options: w.models},
		stepped("seq_len", "sequence length", seqLens, w.plan.SeqLen),
		stepped("micro_batch", "micro-batch", microBatches, w.plan.MicroBatch),
		{field: "precision", label: "precision", options: precisions, value: indexOr(precisions, w.plan.Precision)},
		{field: "optimizer", label: "optimizer", options: optimizers, value: indexOr(optimizers, w.plan.Optimizer)},
		{field: "grad_checkpointing", label: "checkpointing", options: checkpoints, value: indexOr(checkpoints, string(w.plan.Checkpointing))},
		{field: "gpu", label: "GPU", options: gpuNames(w.gpus)},
	}
}

func gpuNames(gs []vram.GPU) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Name)
	}
	return out
}

// stepped is a slider over steps with the plan's own value among them
// (kept in order), starting there.
func stepped(field, label string, steps []int, own int) control {
	vs := append([]int(nil), steps...)
	if !slices.Contains(vs, own) {
		vs = append(vs, own)
		slices.Sort(vs)
	}
	return control{field: field, label: label, steps: vs, value: slices.Index(vs, own)}
}

// indexOr is s's index in xs; an empty s is the first (the default).
func indexOr(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return 0
}

// set applies a control's new value (a select's index, a slider's value).
func (w *whatIf) set(c control, v int) error {
	if c.options != nil && (v < 0 || v >= len(c.options)) {
		return fmt.Errorf("%s: choice %d out of range", c.label, v)
	}
	switch c.field {
	case "model":
		if v == 0 {
			w.plan.Model = w.own
			w.record("model", "")
		} else {
			w.plan.Model = vram.FromPreset(w.models[v])
			w.record("model", w.models[v])
		}
		return nil
	case "gpu":
		w.gpu = v
		return nil
	}
	if c.steps != nil {
		if v < 0 || v >= len(c.steps) {
			return fmt.Errorf("%s: step %d out of range", c.label, v)
		}
		v = c.steps[v]
	}
	value := strconv.Itoa(v)
	if c.options != nil {
		value = c.options[v]
	}
	t, err := w.plan.Set(c.field, value)
	if err != nil {
		return err
	}
	w.plan = t
	w.record(c.field, value)
	return nil
}

// record notes a setting the controls changed, for Remembered; a later
// change of the same field replaces it.
func (w *whatIf) record(field, value string) {
	w.changed = slices.DeleteFunc(w.changed, func(s [2]string) bool { return s[0] == field })
	w.changed = append(w.changed, [2]string{field, value})
}

// render is the result area: the verdict on the chosen GPU, the three
// measures, and the breakdown at the peak. An invalid combination (fp16
// with a model that has none, …) shows its error instead.
func (w *whatIf) render() string {
	g := w.gpus[w.gpu]
	t := w.plan
	head := fmt.Sprintf("%s · %s tokens × micro-batch %d · %s · %s · checkpointing %s", t.Model.Name,
		vram.Grouped(int64(t.SeqLen)), t.MicroBatch, orDefault(t.Precision, "fp32"), orDefault(t.Optimizer, "adamw"), orDefault(string(t.Checkpointing), "none"))
	v, err := vram.Budget{GPU: g, Headroom: w.room}.Judge(t)
	if err != nil {
		return string(Join(Para(Bold(head)), Para("this combination is not a valid plan: ", err.Error())))
	}
	est, err := t.Estimate()
	if err != nil {
		return string(Join(Para(Bold(head)), Para("this combination is not a valid plan: ", err.Error())))
	}
	rows := [][2]string{
		{"verdict on " + g.Name, v.Why},
		{"peak allocated (max_memory_allocated)", gib(v.Allocated)},
	}
	// The verdict's allocated peak comes from the allocator replay and
	// includes cuBLAS's workspace; the chart shows the tensors of the plan.
	rows = append(rows, [2]string{"tensors live at the peak (the chart)", gib(est.Peak.Total())})
	if v.Reserved > 0 {
		rows = append(rows, [2]string{"peak reserved (max_memory_reserved)", gib(v.Reserved)})
		rows = append(rows, [2]string{"on the device (nvidia-smi)", gib(v.DeviceUsed)})
	}
	rows = append(rows, [2]string{"the GPU's memory (as CUDA reports it)", gib(g.Total())})
	rows = append(rows, [2]string{"peak at", est.PeakAt.Where()})
	c := Breakdown(est.Peak, t.Model.Name+": live at the peak")
	return `<div class="vramlab-whatif-result" data-allocated="` + strconv.FormatInt(int64(v.Allocated), 10) + `">` +
		string(Join(Para(Bold(head)), KeyValues(rows))) + HTML(c) + `</div>`
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// WhatIf shows controls for a training plan's main choices — model,
// sequence length, micro-batch, precision, optimizer, checkpointing and
// GPU — above the verdict, the three measures and the breakdown, which
// update in place as the controls move, without re-running the cell.
//
// The cell keeps running while the controls are live (the kernel runs no
// other cell meanwhile): press "done", or leave them idle for c.Idle, and
// the last result stays in the notebook as ordinary output. Without a
// front end (nbconvert, papermill) it draws the plan once and returns
// without touching gonb's widget channel.
func WhatIf(t vram.Training, c Controls) error {
	w, err := newWhatIf(t, c)
	if err != nil {
		return err
	}
	if !gonbui.IsNotebook {
		return nil
	}
	if c.Idle <= 0 {
		c.Idle = 10 * time.Minute
	}
	if c.Probe <= 0 {
		c.Probe = time.Minute
	}
	if !loaded() {
		Setup()
	}
	uid := gonbui.UniqueID()
	panel, result := "vramlab_whatif_controls_"+uid, "vramlab_whatif_result_"+uid
	box := "vramlab-whatif-" + uid
	// Keys pressed on a control are the control's: JupyterLab's notebook
	// shortcuts (arrows move between cells) never see them, so a focused
	// slider moves with the arrow keys.
	gonbui.UpdateHTML(panel, `<div id="`+box+`" class="vramlab-whatif" style="display:flex;flex-wrap:wrap;gap:6px 18px;align-items:center;font:13px sans-serif;margin:6px 0"></div>`+
		`<script>(function(){var b=document.getElementById("`+box+`");if(b){b.addEventListener("keydown",function(e){e.stopPropagation();});}})();</script>`)
	gonbui.UpdateHTML(result, w.render())
	gonbui.Sync()
	if !inServerSession() {
		gonbui.UpdateHTML(panel, "")
		gonbui.Sync()
		return nil
	}

	cs := w.controls()
	chans := make([]*comms.AddressChan[int], len(cs))
	// The first control answers only when a front end runs its script; a
	// headless run never does, and its builder would wait for ever.
	first := make(chan *comms.AddressChan[int], 1)
	go func() { first <- build(box, uid, cs[0]) }()
	select {
	case ch := <-first:
		chans[0] = ch
	case <-time.After(c.Probe):
		gonbui.UpdateHTML(panel, string(Para(fmt.Sprintf("No browser answered the controls in %.0f s (is the notebook open in JupyterLab?): the plan is drawn once, without controls. Run the cell again for them.", c.Probe.Seconds()))))
		gonbui.Sync()
		return nil
	}
	for i := 1; i < len(cs); i++ {
		chans[i] = build(box, uid, cs[i])
	}
	done := widgets.Button("done").AppendTo(box).Done().Listen()
	type change struct{ i, v int }
	changes := make(chan change, 16)
	for i, ch := range chans {
		go func() {
			for v := range ch.C {
				changes <- change{i, v}
			}
		}()
	}
	idle := time.NewTimer(c.Idle)
	defer idle.Stop()
	for {
		select {
		case ch := <-changes:
			if err := w.set(cs[ch.i], ch.v); err != nil {
				gonbui.UpdateHTML(result, string(Para("cannot apply the change: ", err.Error())))
				continue
			}
			if cs[ch.i].steps != nil {
				setValueText(uid, cs[ch.i], vram.Grouped(int64(cs[ch.i].steps[ch.v])))
			}
			gonbui.UpdateHTML(result, w.render())
			gonbui.Sync()
			idle.Reset(c.Idle)
		case <-done.C:
			return finish(panel, w)
		case <-idle.C:
			return finish(panel, w)
		}
	}
}

// inServerSession tells a kernel that Jupyter Server started for an open
// notebook (it sets JPY_SESSION_NAME, jupyter_server's
// SessionManager.get_kernel_env) from a headless run (nbclient, papermill),
// where no browser could answer the controls.
func inServerSession() bool { return os.Getenv("JPY_SESSION_NAME") != "" }

// finish replaces the controls with the settings they ended at, so the
// saved notebook says what the result shows.
func finish(panel string, w *whatIf) error {
	remember(w.start, w.gpus[0].Name, w.changed, w.plan, w.gpus[w.gpu].Name)
	gonbui.UpdateHTML(panel, string(Join(Para(Bold("what-if ended; the plan as last set:"), " ", w.summary()),
		Para("The cells below use it (charts.Remembered). To keep it in the plan's cell, change these fields:"),
		Pre(w.asCode()))))
	gonbui.Sync()
	return nil
}

// asCode is what the controls changed as the plan literal's fields, to
// paste.
func (w *whatIf) asCode() string {
	t := w.plan
	var b strings.Builder
	for _, s := range w.changed {
		switch s[0] {
		case "model":
			fmt.Fprintf(&b, "Model: vram.FromPreset(%q),\n", orDefault(s[1], w.own.Name))
		case "seq_len":
			fmt.Fprintf(&b, "SeqLen: %d,\n", t.SeqLen)
		case "micro_batch":
			fmt.Fprintf(&b, "MicroBatch: %d,\n", t.MicroBatch)
		case "precision":
			fmt.Fprintf(&b, "Precision: %q,\n", t.Precision)
		case "optimizer":
			fmt.Fprintf(&b, "Optimizer: %q,\n", t.Optimizer)
		case "grad_checkpointing":
			fmt.Fprintf(&b, "Checkpointing: %q,\n", t.Checkpointing)
		}
	}
	if g := w.gpus[w.gpu].Name; g != w.gpus[0].Name {
		fmt.Fprintf(&b, "// and the GPU: %q\n", g)
	}
	if b.Len() == 0 {
		return "// nothing changed"
	}
	return b.String()
}

func (w *whatIf) summary() string {
	t := w.plan
	return fmt.Sprintf("model %s, seq_len %d, micro_batch %d, precision %s, optimizer %s, grad_checkpointing %s, GPU %s",
		t.Model.Name, t.SeqLen, t.MicroBatch, orDefault(t.Precision, "fp32"), orDefault(t.Optimizer, "adamw"),
		orDefault(string(t.Checkpointing), "none"), w.gpus[w.gpu].Name)
}

// build draws one labelled control in the box and returns its updates.
func build(box, uid string, c control) *comms.AddressChan[int] {
	dom.Append(box, `<label style="display:inline-flex;gap:6px;align-items:center"><span>`+html.EscapeString(c.label)+`</span><span id="`+controlID(uid, c)+`"></span></label>`)
	if c.options != nil {
		opts := make([]string, len(c.options))
		for i, o := range c.options {
			opts[i] = html.EscapeString(o) // gonb writes options as markup
		}
		s := widgets.Select(opts).SetDefault(c.value).AppendTo(controlID(uid, c)).Done()
		return s.Listen().LatestOnly()
	}
	s := widgets.Slider(0, len(c.steps)-1, c.value).AppendTo(controlID(uid, c)).Done()
	val := vram.Grouped(int64(c.steps[c.value]))
	dom.Append(controlID(uid, c), `<output id="`+controlID(uid, c)+`-value" style="min-width:4em;font-variant-numeric:tabular-nums">`+html.EscapeString(val)+`</output>`)
	return s.Listen().LatestOnly()
}

func controlID(uid string, c control) string { return "vramlab-whatif-" + uid + "-" + c.field }

func setValueText(uid string, c control, text string) {
	dom.SetInnerText(controlID(uid, c)+"-value", text)
}
