package vram

import (
	"fmt"
	"strconv"
	"strings"
)

// llama.cpp's automatic fit (--fit, on by default from b7416; llama-fit-params
// prints what it chose), as build b10573 runs it: common/fit.cpp
// common_params_fit_impl (l.178-789). llama.cpp measures each candidate by a
// dry run (a model load and context with no_alloc, l.29-153) that reports
// each device's model, context and compute bytes; here each candidate is
// sized by the engine's own rules: the weights tensor by tensor (the model's
// tensors at the GGUF's ggml type, or a GGUF header's stored sizes), the KV
// cache and recurrent state per layer (llamacpp.go, on the layer's device),
// and the compute buffers as the plan gives them (not modelled). The order
// it gives things up in, step by step, with the lines:
//
//  1. l.194-288: with the user's settings, each device's projected use
//     against its free memory; done if every device keeps its margin
//     (--fit-target, default 1024 MiB).
//  2. l.290-372: short in all, an unset -c (the trained context) shrinks:
//     linear between the trained context and --fit-ctx (4096), rounded down
//     to 256; with one GPU that is the answer.
//  3. l.373-400: it gives up if the user set -ngl, -ts (several GPUs) or
//     -ot. l.402-645: layers are placed back to front, each device from the
//     last to the first taking as many as fit (false position); a MoE
//     model's layers go on without their routed experts (left to the CPU by
//     -ot patterns) where the model's dense weights fit.
//  4. l.647-788: then, front to back, those layers get their experts back
//     while they fit, and one more layer part of its FFN (up, up and gate,
//     or attention only), overflowing to the next device or the CPU.

// LlamaCppFit is what the fit chooses and what each device is projected to
// hold with it.
type LlamaCppFit struct {
	Release Modelled `json:"release"`
	// Status is "off" (--fit off, or a build without it), "unchanged"
	// (the settings fit: "no changes needed"), "fitted", or "failed": the
	// fit gave up; llama-fit-params exits 1 and llama-server loads with
	// what the fit had already set (common.cpp:1294-1302 ignores the
	// status).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"` // why it failed, in its words
	// CtxSize is the context the load gets (the trained one where -c is
	// left 0); CtxArg is the -c llama-fit-params prints (0: untouched).
	CtxSize int `json:"ctx_size"`
	CtxArg  int `json:"ctx_arg"`
	// GPULayers is -ngl: -1 leaves every layer on the GPUs.
	GPULayers int `json:"n_gpu_layers"`
	// TensorSplit is -ts, layers a device (several GPUs only).
	TensorSplit []int `json:"tensor_split,omitempty"`
	// Overrides are -ot: the tensors of a partly offloaded layer that stay
	// in another buffer (CPU, or the next GPU's).
	Overrides []LlamaCppOverride `json:"overrides,omitempty"`
	// Args is llama-fit-params' line (fit-params.cpp:44-68).
	Args    string              `json:"args"`
	Devices []LlamaCppFitDevice `json:"devices"`
	// Host is what stays in system memory (the fit takes it as unlimited).
	Host LlamaCppUse `json:"host"`
	// Projected is each device's use with the settings as given (step 1,
	// fit.cpp:194-288; what llama-fit-params --fit-print on prints), and
	// ProjectedHost the host's.
	Projected     []LlamaCppUse `json:"projected,omitempty"`
	ProjectedHost LlamaCppUse   `json:"projected_host"`
	Steps         []string      `json:"steps"`
	Notes         []string      `json:"notes,omitempty"`
}

// LlamaCppOverride is one -ot pattern=buffer.
type LlamaCppOverride struct {
	Pattern string `json:"pattern"`
	Buffer  string `json:"buffer"`
}

// LlamaCppUse is a buffer's bytes by what holds them, as llama.cpp's memory
// breakdown prints them.
type LlamaCppUse struct {
	Model   Bytes `json:"model"`   // weights
	Context Bytes `json:"context"` // KV cache and recurrent state
	Compute Bytes `json:"compute"` // the compute buffer (as given)
	// State is Context's recurrent state ("RS buffer size"); the rest of
	// Context is the KV cache ("KV buffer size").
	State Bytes `json:"state,omitempty"`
}

// Total is model + context + compute.
func (u LlamaCppUse) Total() Bytes { return u.Model + u.Context + u.Compute }

// LlamaCppFitDevice is one GPU under the fit's choice.
type LlamaCppFitDevice struct {
	Name   string `json:"name"`   // CUDA0, CUDA1, …
	Free   Bytes  `json:"free"`   // at start
	Margin Bytes  `json:"margin"` // --fit-target
	LlamaCppUse
	Used Bytes `json:"used"` // projected: model + context + compute
	// Layers are the layers it holds (the output layer counts as one),
	// Partial those of them whose FFN or routed experts stay elsewhere.
	Layers  int `json:"layers"`
	Partial int `json:"partial,omitempty"`
}

// FitParams is llama.cpp's automatic fit of m on the plan's GPU g (nil when
// DeviceFree gives each GPU's free memory), the weights sized from the
// model's tensors at WeightType.
func (l LlamaCpp) FitParams(m Model, g *GPU) (LlamaCppFit, error) {
	return l.fitParams(m, g, nil)
}

// FitParamsGGUF is FitParams with the weights as the GGUF header f stores
// them, tensor by tensor (m gives the attention shapes for the cache).
func (l LlamaCpp) FitParamsGGUF(m Model, g *GPU, f *GGUF) (LlamaCppFit, error) {
	if f == nil {
		return LlamaCppFit{}, fmt.Errorf("llama.cpp: no GGUF header")
	}
	return l.fitParams(m, g, f)
}

// lcPart is what a tensor of a block is to the fit's -ot patterns.
type lcPart uint8

const (
	lcAttn   lcPart = iota // attention, norms: stays with the layer
	lcRouter               // ffn_gate_inp
	lcUp                   // ffn_up, ffn_up_shexp
	lcGate
	lcDown
	lcGateUp
	lcUpExps // ffn_up_exps: routed experts
	lcGateExps
	lcDownExps
	lcGateUpExps
)

func (p lcPart) experts() bool { return p >= lcUpExps }

// lcFraction is how much of a layer stays on its device
// (common_layer_fraction_t, fit.cpp:17-23).
type lcFraction uint8

const (
	lcFracAttn lcFraction = iota + 1 // attention only
	lcFracUp                         // attention + up
	lcFracGate                       // attention + up + gate
	lcFracMoE                        // all but the routed experts
)

// pattern is the -ot regex of layer il's fraction f (fit.cpp:407-444).
func (f lcFraction) pattern(il int) string {
	blk := `blk\.` + strconv.Itoa(il) + `\.`
	switch f {
	case lcFracAttn:
		return blk + `ffn_(gate|up|gate_up|down).*`
	case lcFracUp:
		return blk + `ffn_(gate|gate_up|down).*`
	case lcFracGate:
		return blk + `ffn_down.*`
	}
	return blk + `ffn_(up|down|gate_up|gate)_(ch|)exps`
}

// moves reports whether f's pattern catches a tensor of part p: ATTN every
// ffn_ tensor (routers, dense and shared FFN, experts), UP all but the up
// projections, GATE the down projections, MOE the routed experts.
func (f lcFraction) moves(p lcPart) bool {
	switch f {
	case lcFracAttn:
		return p != lcAttn
	case lcFracUp:
		return p != lcAttn && p != lcUp && p != lcUpExps
	case lcFracGate:
		return p == lcDown || p == lcDownExps
	}
	return p.experts()
}

// lcTensor is one weight: its layer (-1 the input layer, n_layer the
// output layer), part and bytes.
type lcTensor struct {
	layer int
	part  lcPart
	bytes Bytes
}

// lcNGL is one device's layers (fit.cpp:446-457 ngl_t).
type lcNGL struct {
	layers, part int
	overflow     lcFraction
}

func (n lcNGL) full() int { return n.layers - n.part }

// lcLayout is a candidate: n_gpu_layers, the split and the overrides.
type lcLayout struct {
	ngl    int       // -1: every layer
	split  []float64 // per device (nil or all zero: by free memory)
	ov     map[int]lcOverride
	cpuMoE bool // every routed expert on the CPU (fit.cpp:529-557)
}

type lcOverride struct {
	frac lcFraction
	buf  int // -1 the CPU, else a device
}

// lcFitter holds what every candidate is sized from.
type lcFitter struct {
	l       LlamaCpp
	rel     llamaCppRelease
	m       Model
	nd      int
	free    []Bytes
	margin  []Bytes
	compute []Bytes
	tensors []lcTensor
	kv      map[int][2][]Bytes // context → per-layer KV and state
	hasExps bool
}

func (l LlamaCpp) fitParams(m Model, g *GPU, f *GGUF) (LlamaCppFit, error) {
	m = m.Normalize()
	if err := m.Validate(); err != nil {
		return LlamaCppFit{}, err
	}
	rel, mod, err := l.release()
	if err != nil {
		return LlamaCppFit{}, err
	}
	out := LlamaCppFit{Release: mod, Status: "off"}
	switch {
	case l.Fit != nil && *l.Fit && !rel.fit:
		return LlamaCppFit{}, fmt.Errorf("llama.cpp: fit: build %s has no --fit (it came in b7416); name versions.llama_cpp b10573 or leave fit out", rel.Version)
	case l.Fit != nil && !*l.Fit, !rel.fit:
		return out, nil
	}
	ft, err := l.fitter(m, g, f, rel)
	if err != nil {
		return LlamaCppFit{}, err
	}
	if err := ft.run(&out); err != nil {
		return LlamaCppFit{}, err
	}
	return out, nil
}

// fitter checks the fit's settings and sizes the weights.
func (l LlamaCpp) fitter(m Model, g *GPU, f *GGUF, rel llamaCppRelease) (*lcFitter, error) {
	nd := l.GPUs
	switch {
	case nd < 0 || nd > 16:
		return nil, fmt.Errorf("llama.cpp: gpus must be in [1, 16] (llama_max_devices), got %d", nd)
	case nd > 0 && len(l.DeviceFree) > 0 && nd != len(l.DeviceFree):
		return nil, fmt.Errorf("llama.cpp: gpus %d and device_free's %d devices differ", nd, len(l.DeviceFree))
	case nd == 0:
		nd = max(1, len(l.DeviceFree))
	}
	if nd > 16 {
		return nil, fmt.Errorf("llama.cpp: device_free names %d devices, at most 16 (llama_max_devices)", nd)
	}
	ft := &lcFitter{l: l, rel: rel, m: m, nd: nd, kv: map[int][2][]Bytes{}}
	for i := range nd {
		var free Bytes
		switch {
		case len(l.DeviceFree) > 0:
			free = l.DeviceFree[i]
		case g != nil:
			free = g.FreeAtStart()
		default:
			return nil, fmt.Errorf("llama.cpp: device_free: give each GPU's free memory, or the plan's gpu")
		}
		if free <= 0 || free > 1<<50 {
			return nil, fmt.Errorf("llama.cpp: device_free[%d] must be positive and under 1 PiB, got %d bytes", i, int64(free))
		}
		ft.free = append(ft.free, free)
	}
	// --fit-target: one value for every device, else one per device, the
	// rest at 1024 MiB; 16 or more values are refused (arg.cpp:2870-2894).
	if len(l.FitTarget) >= 16 {
		return nil, fmt.Errorf("llama.cpp: fit_target gives %d values, but llama.cpp takes fewer than 16 (llama_max_devices)", len(l.FitTarget))
	}
	for i := range nd {
		mib := 1024
		switch {
		case len(l.FitTarget) == 1:
			mib = l.FitTarget[0]
		case i < len(l.FitTarget):
			mib = l.FitTarget[i]
		}
		if mib < 0 || mib > 1<<24 {
			return nil, fmt.Errorf("llama.cpp: fit_target must be MiB in [0, %d], got %d", 1<<24, mib)
		}
		ft.margin = append(ft.margin, Bytes(mib)*MiB)
	}
	if l.FitCtx < 0 || l.FitCtx > MaxTokens {
		return nil, fmt.Errorf("llama.cpp: fit_ctx must be in [1, %d], got %d", MaxTokens, l.FitCtx)
	}
	if n := len(l.ComputeBuffers); n > 1 && n != nd {
		return nil, fmt.Errorf("llama.cpp: compute_buffers gives %d values for %d GPUs: give one, or one a GPU", n, nd)
	}
	for i := range nd {
		var c Bytes
		switch len(l.ComputeBuffers) {
		case 0:
		case 1:
			c = l.ComputeBuffers[0]
		default:
			c = l.ComputeBuffers[i]
		}
		if c < 0 || c > 1<<50 {
			return nil, fmt.Errorf("llama.cpp: compute_buffers[%d] must be in [0, 1 PiB), got %d bytes", i, int64(c))
		}
		ft.compute = append(ft.compute, c)
	}
	if l.GPULayers < -1 || len(l.TensorSplit) > 0 && len(l.TensorSplit) != nd && nd > 1 {
		if l.GPULayers < -1 {
			return nil, fmt.Errorf("llama.cpp: n_gpu_layers must be -1 (unset) or a count, got %d", l.GPULayers)
		}
		return nil, fmt.Errorf("llama.cpp: tensor_split names %d devices for %d GPUs", len(l.TensorSplit), nd)
	}
	// The settings the dry runs start from, checked as the cache checks
	// them (an architecture the cache model refuses is refused here too).
	base, err := l.withDefaults(m, rel)
	if err != nil {
		return nil, err
	}
	if _, err := base.kvCache(m, rel); err != nil {
		return nil, err
	}
	if f != nil {
		ft.tensors, err = lcGGUFTensors(f, m.Layers)
	} else {
		ft.tensors, err = lcModelTensors(m, l.WeightType)
	}
	if err != nil {
		return nil, err
	}
	for _, t := range ft.tensors {
		ft.hasExps = ft.hasExps || t.part.experts()
	}
	return ft, nil
}

// lcWeightType reads weight_type: a ggml type's name.
func lcWeightType(s string) (GGMLType, error) {
	if s == "" {
		return 1, nil // F16
	}
	for t, tt := range ggmlTypes {
		if strings.EqualFold(tt.name, s) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("llama.cpp: weight_type %q: want a ggml type (%s); a file type such as Q4_K_M mixes types: name its main one, or read the GGUF header", s, strings.Join(GGMLTypes(), ", "))
}

// lcModelTensors sizes m's weights at the ggml type wt: 2-D weights at wt
// (a row not a whole number of its blocks at F16), 1-D tensors and routers
// at F32. The token embedding stays on the CPU (llama-model.cpp:1374-1376);
// tied embeddings are loaded again as the output (TENSOR_DUPLICATED).
func lcModelTensors(m Model, wt string) ([]lcTensor, error) {
	t, err := lcWeightType(wt)
	if err != nil {
		return nil, err
	}
	var out []lcTensor
	var embed Bytes
	lmHead := false
	for _, x := range m.Tensors() {
		if x.part != textPart {
			continue // a vision or audio tower is llama.cpp's separate mmproj file
		}
		n := x.Numel()
		var b Bytes
		if len(x.Shape) >= 2 && x.Role != "router" {
			if b, err = GGMLSize(t, n); err != nil || x.Shape[len(x.Shape)-1]%ggmlTypes[t].block != 0 {
				b = FP16.Size(n)
			}
		} else {
			b = FP32.Size(n)
		}
		lt := lcTensor{layer: x.Layer, bytes: b}
		switch {
		case x.head:
			lt.layer = m.Layers
			lmHead = lmHead || x.Role == "lm_head"
		case x.Layer < 0:
			lt.layer = -1
			if x.Role == "embedding" {
				embed += b
			}
		default:
			lt.part = lcPartOf(x)
		}
		out = append(out, lt)
	}
	if !lmHead {
		out = append(out, lcTensor{layer: m.Layers, bytes: embed})
	}
	return out, nil
}

func lcPartOf(x Tensor) lcPart {
	exp := x.Expert >= 0 || x.Stacked > 0
	base := map[string]lcPart{"up_proj": lcUp, "gate_proj": lcGate, "down_proj": lcDown, "gate_up_proj": lcGateUp}
	p, ok := base[x.Role]
	switch {
	case x.Role == "router":
		return lcRouter
	case !ok:
		return lcAttn
	case exp:
		return p + lcUpExps - lcUp
	}
	return p
}

// lcGGUFTensors sorts a GGUF's tensors by layer and part, as llama.cpp's
// names and the fit's patterns read them.
func lcGGUFTensors(f *GGUF, layers int) ([]lcTensor, error) {
	var out []lcTensor
	var embed Bytes
	output := false
	for _, t := range f.Tensors {
		lt := lcTensor{layer: -1, bytes: t.Bytes}
		switch {
		case t.Name == "token_embd.weight":
			embed = t.Bytes
		case t.Name == "output.weight":
			lt.layer, output = layers, true
		case strings.HasPrefix(t.Name, "output_norm."):
			lt.layer = layers
		case strings.HasPrefix(t.Name, "blk."):
			num, rest, _ := strings.Cut(t.Name[4:], ".")
			il, err := strconv.Atoi(num)
			if err != nil || il < 0 || il >= layers {
				return nil, fmt.Errorf("llama.cpp: GGUF tensor %s: not a block of the model's %d layers", t.Name, layers)
			}
			lt.layer, lt.part = il, lcPartOfName(rest)
		}
		out = append(out, lt)
	}
	if !output {
		out = append(out, lcTensor{layer: layers, bytes: embed})
	}
	return out, nil
}

func lcPartOfName(rest string) lcPart {
	name, _, _ := strings.Cut(rest, ".")
	for _, e := range []struct {
		prefix string
		part   lcPart
	}{{"ffn_gate_inp", lcRouter}, {"ffn_up_exps", lcUpExps}, {"ffn_up_chexps", lcUpExps}, {"ffn_gate_up_exps", lcGateUpExps},
		{"ffn_gate_up_chexps", lcGateUpExps}, {"ffn_gate_exps", lcGateExps}, {"ffn_gate_chexps", lcGateExps},
		{"ffn_down_exps", lcDownExps}, {"ffn_down_chexps", lcDownExps}, {"ffn_gate_up", lcGateUp}, {"ffn_gate", lcGate},
		{"ffn_up", lcUp}, {"ffn_down", lcDown}} {
		if strings.HasPrefix(name, e.prefix) {
			return e.part
		}
	}
	return lcAttn
}

// perLayer is each layer's KV and recurrent state at context nctx (0:
// the trained context).
func (ft *lcFitter) perLayer(nctx int) ([]Bytes, []Bytes, error) {
	if c, ok := ft.kv[nctx]; ok {
		return c[0], c[1], nil
	}
	l := ft.l
	l.CtxSize = nctx
	l, err := l.withDefaults(ft.m, ft.rel)
	if err != nil {
		return nil, nil, err
	}
	kv, err := l.cells(ft.m, ft.rel)
	if err != nil {
		return nil, nil, err
	}
	kvs, states := make([]Bytes, ft.m.Layers), make([]Bytes, ft.m.Layers)
	for il := range ft.m.Layers {
		if kvs[il], err = l.layerKV(ft.m, kv, ft.rel, il); err != nil {
			return nil, nil, err
		}
		if ft.m.RecurrentLayer(il) {
			states[il] = llamaCppState(ft.m) * Bytes(kv.StateCells)
		}
	}
	ft.kv[nctx] = [2][]Bytes{kvs, states}
	return kvs, states, nil
}

// devices is each layer's device under lay (-1: the CPU), the output
// layer at index n_layer (llama-model.cpp:1333-1383: split points by
// tensor_split, or by free memory where all are zero; layer il on the
// first device whose point is past (il − i_gpu_start)/act, in float;
// i_gpu_start by the build, llamaCppRelease.outputFirst).
func (ft *lcFitter) devices(lay lcLayout) []int {
	n := ft.m.Layers
	ngl := lay.ngl
	if ngl < 0 {
		ngl = n + 1
	}
	start, act := max(n+1-ngl, 0), min(ngl, n+1)
	if !ft.rel.outputFirst {
		start = max(n-ngl, 0) // before b7475 the output layer went last
	}
	points := make([]float32, ft.nd)
	zero := true
	for _, s := range lay.split {
		zero = zero && s == 0
	}
	var sum float32
	for i := range ft.nd {
		if zero {
			sum += float32(ft.free[i])
		} else {
			sum += float32(lay.split[i])
		}
		points[i] = sum
	}
	for i := range points {
		points[i] /= sum
	}
	out := make([]int, n+1)
	for il := range out {
		if il < start || il-start >= act {
			out[il] = -1
			continue
		}
		x := float32(il-start) / float32(act)
		d := ft.nd - 1
		for j, p := range points {
			if p > x {
				d = j
				break
			}
		}
		out[il] = d
	}
	return out
}

// measure is the dry run of lay at context nctx: each device's and the
// host's model, context and compute bytes (fit.cpp:29-153).
func (ft *lcFitter) measure(nctx int, lay lcLayout) ([]LlamaCppUse, LlamaCppUse, error) {
	kvs, states, err := ft.perLayer(nctx)
	if err != nil {
		return nil, LlamaCppUse{}, err
	}
	dev := ft.devices(lay)
	use := make([]LlamaCppUse, ft.nd)
	var host LlamaCppUse
	add := func(d int, model, kv, state Bytes) {
		u := &host
		if d >= 0 {
			u = &use[d]
		}
		u.Model, u.Context, u.State = u.Model+model, u.Context+kv+state, u.State+state
	}
	for _, t := range ft.tensors {
		d := -1
		if t.layer >= 0 {
			d = dev[t.layer]
		}
		if o, ok := lay.ov[t.layer]; ok && o.frac.moves(t.part) {
			d = o.buf
		}
		if lay.cpuMoE && t.part.experts() {
			d = -1
		}
		add(d, t.bytes, 0, 0)
	}
	for il := range ft.m.Layers {
		add(dev[il], 0, kvs[il], states[il]) // llama-kv-cache.cpp:214-215: the layer's device
	}
	for i := range use {
		use[i].Compute = ft.compute[i]
	}
	return use, host, nil
}

func (ft *lcFitter) used(use []LlamaCppUse) []int64 {
	out := make([]int64, len(use))
	for i, u := range use {
		out[i] = int64(u.Total())
	}
	return out
}

// layout is set_ngl_tensor_split_tbo (fit.cpp:462-500): n_gpu_layers the
// sum, the split the layers a device, and on each device after its full
// layers its partial ones: the first with the device's overflow fraction
// to its overflow buffer, the others' routed experts to the CPU.
func (ft *lcFitter) layout(ngl []lcNGL, bufs []int) (lcLayout, []LlamaCppOverride) {
	lay := lcLayout{ov: map[int]lcOverride{}}
	for _, n := range ngl {
		lay.ngl += n.layers
		lay.split = append(lay.split, float64(n.layers))
	}
	il0 := ft.m.Layers + 1 - lay.ngl
	var ots []LlamaCppOverride
	for id, n := range ngl {
		il0 += n.full()
		for il := il0; il < il0+n.part; il++ {
			o := lcOverride{frac: lcFracMoE, buf: -1}
			if il == il0 {
				o = lcOverride{frac: n.overflow, buf: bufs[id]}
			}
			lay.ov[il] = o
			buf := "CPU"
			if o.buf >= 0 {
				buf = "CUDA" + strconv.Itoa(o.buf)
			}
			ots = append(ots, LlamaCppOverride{Pattern: o.frac.pattern(il), Buffer: buf})
		}
		il0 += n.part
	}
	return lay, ots
}

func mibOf(b int64) int64 { return b / int64(MiB) }

// lcRun is one fit's state, common_params_fit_impl's locals: the context
// (0: the trained one), the user's layout, each device's layers, overflow
// buffer, projected use and target.
type lcRun struct {
	*lcFitter
	out     *LlamaCppFit
	nctx    int
	user    lcLayout
	userNGL bool // -ngl set (0 and -1 are the default: every layer)
	ngl     []lcNGL
	bufs    []int
	mem     []int64
	targets []int64
	dense   int // id_dense_start
}

func (r *lcRun) say(format string, a ...any) {
	r.out.Steps = append(r.out.Steps, fmt.Sprintf(format, a...))
}

// run is common_params_fit_impl (fit.cpp:178-789).
func (ft *lcFitter) run(out *LlamaCppFit) error {
	r := &lcRun{lcFitter: ft, out: out, nctx: ft.l.CtxSize, user: lcLayout{ngl: -1, split: ft.l.TensorSplit}, userNGL: ft.l.GPULayers > 0}
	if r.userNGL {
		r.user.ngl = ft.l.GPULayers
	}
	out.GPULayers = r.user.ngl
	if len(ft.l.ComputeBuffers) == 0 {
		out.Notes = append(out.Notes, "compute buffers: none counted (ggml's graph allocator sizes them in llama.cpp's dry run; VRAM Lab does not model them): give llama_cpp.compute_buffers from the log's \"CUDA0 compute buffer size\" or llama-fit-params --fit-print on")
	}
	if ft.l.WeightType == "" {
		out.Notes = append(out.Notes, "weights: the model's tensors at F16 (weight_type unset); name the GGUF's type (Q4_K, Q8_0, …) or read its header")
	}
	if done, err := r.contextStep(); done || err != nil {
		return err
	}
	// l.373-400: what the fit may not change.
	switch {
	case r.userNGL:
		return r.fail(fmt.Sprintf("n_gpu_layers already set by user to %d, abort", ft.l.GPULayers))
	case ft.nd > 1 && anyNonZero(ft.l.TensorSplit):
		return r.fail("model_params::tensor_split already set by user, abort")
	}
	surplus, err := r.denseSurplus()
	if err != nil {
		return err
	}
	if err := r.backToFront(); err != nil {
		return err
	}
	if ft.hasExps && surplus > 0 {
		if err := r.frontToBack(); err != nil {
			return err
		}
	}
	return r.done()
}

// contextStep is steps 1 and 2 (l.194-372): no change where every device
// keeps its margin; else an unset context shrinks, which is the answer on
// one GPU. It reports whether the fit is done.
func (r *lcRun) contextStep() (bool, error) {
	nd := r.nd
	full, host, err := r.measure(r.nctx, r.user)
	if err != nil {
		return false, err
	}
	used := r.used(full)
	r.out.Projected, r.out.ProjectedHost = full, host
	var sumFree, sumProjFree, sumProjUsed, sumProjModel, sumMargins int64
	changes := false
	for i := range nd {
		sumFree += int64(r.free[i])
		sumProjUsed += used[i]
		sumProjFree += int64(r.free[i]) - used[i]
		sumProjModel += int64(full[i].Model)
		sumMargins += int64(r.margin[i])
		changes = changes || int64(r.free[i])-used[i] < int64(r.margin[i])
	}
	r.say("l.194-288: projected to use %d MiB of device memory vs. %d MiB of free device memory", mibOf(sumProjUsed), mibOf(sumFree))
	if !changes {
		if nd == 1 {
			r.say("l.270-273: will leave %d >= %d MiB of free device memory, no changes needed", mibOf(sumProjFree), mibOf(int64(r.margin[0])))
		} else {
			r.say("l.283-285: targets for free memory can be met on all devices, no changes needed")
		}
		return true, r.finish("unchanged", full, host, nil)
	}
	surplus := sumProjFree - sumMargins
	if surplus >= 0 {
		return false, nil
	}
	r.say("l.301-309: cannot meet the free memory target(s): %d MiB too much in total", mibOf(-surplus))
	ctxMin, hpNct := r.l.FitCtx, r.m.MaxPosition
	if ctxMin == 0 {
		ctxMin = 4096 // common.h:470
	}
	switch {
	case r.nctx != 0:
		r.say("l.368-369: context size set by user to %d -> no change", r.nctx)
		return false, nil
	case hpNct <= ctxMin:
		r.say("l.363-365: default model context size is %d which is <= the min. context size of %d -> no change", hpNct, ctxMin)
		return false, nil
	}
	target := sumFree - sumMargins
	if nd > 1 {
		perLayer := sumProjModel / int64(min(r.m.Layers, ngAll(r.user.ngl)))
		div := int64(2)
		if r.hasExps {
			div = 6
		}
		target -= int64(nd+1) * perLayer / div // l.320-328
	}
	r.nctx = ctxMin
	minUse, _, err := r.measure(r.nctx, r.user)
	if err != nil {
		return false, err
	}
	var usedMin int64
	for _, u := range r.used(minUse) {
		usedMin += u
	}
	if target <= usedMin {
		r.say("l.355-358: context size reduced from %d to %d, not enough: the layers move next", hpNct, r.nctx)
		return false, nil
	}
	r.nctx += int(int64(hpNct-ctxMin) * (target - usedMin) / (sumProjUsed - usedMin)) // l.342-343
	r.nctx = max(r.nctx-r.nctx%256, ctxMin)                                           // l.344
	r.say("l.340-349: context size reduced from %d to %d (linear between %d and %d, rounded down to 256)", hpNct, r.nctx, ctxMin, hpNct)
	if nd > 1 {
		return false, nil
	}
	r.say("l.350-352: entire model can be fit by reducing context")
	use, host, err := r.measure(r.nctx, r.user)
	if err != nil {
		return false, err
	}
	return true, r.finish("fitted", use, host, nil)
}

// fail is the fit giving up (l.373-400): the load goes on with the
// context it set and the user's layout.
func (r *lcRun) fail(reason string) error {
	use, host, err := r.measure(r.nctx, r.user)
	if err != nil {
		return err
	}
	r.out.Reason = reason
	r.say("l.373-400: gives up: %s; llama-fit-params exits 1 and llama-server loads with the context as the fit left it", reason)
	return r.finish("failed", use, host, nil)
}

// denseSurplus is a MoE model's surplus with every routed expert on the
// CPU (l.529-557), and sets the targets (l.559-564) and the start: no
// layer anywhere, overflow to the CPU (l.566-573).
func (r *lcRun) denseSurplus() (int64, error) {
	var surplus int64
	if r.hasExps {
		use, _, err := r.measure(r.nctx, lcLayout{ngl: -1, cpuMoE: true})
		if err != nil {
			return 0, err
		}
		for i, u := range r.used(use) {
			surplus += int64(r.free[i]) - u - int64(r.margin[i])
		}
		if surplus > 0 {
			r.say("l.546-548: with only dense weights in device memory there is a total surplus of %d MiB", mibOf(surplus))
		} else {
			r.say("l.549-551: with only dense weights in device memory there is still a total deficit of %d MiB", mibOf(-surplus))
		}
	}
	r.targets, r.bufs, r.ngl = make([]int64, r.nd), make([]int, r.nd), make([]lcNGL, r.nd)
	for i := range r.nd {
		r.targets[i] = int64(r.free[i]) - int64(r.margin[i])
		r.bufs[i], r.ngl[i].overflow = -1, lcFracMoE
	}
	var err error
	r.mem, err = r.memOf(r.ngl, r.bufs)
	return surplus, err
}

func (r *lcRun) memOf(ngl []lcNGL, bufs []int) ([]int64, error) {
	lay, _ := r.layout(ngl, bufs)
	use, _, err := r.measure(r.nctx, lay)
	return r.used(use), err
}

func cloneNGL(x []lcNGL) []lcNGL { return append([]lcNGL(nil), x...) }

// backToFront is step 3 (l.575-641): from the last device to the first,
// all unassigned layers (a MoE's without their experts but the last
// device's first), else the most that fit by false position.
func (r *lcRun) backToFront() error {
	nd := r.nd
	for id := nd - 1; id >= 0; id-- {
		unassigned := r.m.Layers + 1
		for jd := id + 1; jd < nd; jd++ {
			unassigned -= r.ngl[jd].layers
		}
		high := cloneNGL(r.ngl)
		high[id].layers = unassigned
		if r.hasExps {
			high[id].part = high[id].layers
			if id == nd-1 {
				high[id].part--
			}
		}
		if high[id].layers > 0 {
			memHigh, err := r.memOf(high, r.bufs)
			if err != nil {
				return err
			}
			if memHigh[id] <= r.targets[id] {
				r.ngl, r.mem = high, memHigh
			}
			for delta := high[id].layers - r.ngl[id].layers; memHigh[id] > r.targets[id] && delta > 1; delta = high[id].layers - r.ngl[id].layers {
				step, err := falsePosition(delta, r.targets[id], r.mem[id], memHigh[id])
				if err != nil {
					return err
				}
				test := cloneNGL(r.ngl)
				test[id].layers += step
				if r.hasExps {
					if id == nd-1 && test[id].part == 0 {
						test[id].part += step - 1 // the output layer is always full
					} else {
						test[id].part += step
					}
				}
				memTest, err := r.memOf(test, r.bufs)
				if err != nil {
					return err
				}
				if memTest[id] <= r.targets[id] {
					r.ngl, r.mem = test, memTest
				} else {
					high, memHigh = test, memTest
				}
			}
		}
		r.say("l.637-640: CUDA%d: %d layers, %d MiB used, %d MiB free", id, r.ngl[id].layers, mibOf(r.mem[id]), mibOf(int64(r.free[id])-r.mem[id]))
	}
	return nil
}

// frontToBack is step 4 (l.647-788): front to back, dense-only layers
// made full while they fit, then part of one more layer.
func (r *lcRun) frontToBack() error {
	nd := r.nd
	r.dense = nd
	for id := nd - 1; id >= 0 && r.ngl[id].layers > 0; id-- {
		r.dense = id
	}
	for id := 0; id <= r.dense && r.dense < nd; id++ {
		high := cloneNGL(r.ngl)
		for jd := r.dense; jd < nd; jd++ {
			move := high[jd].layers
			if jd == nd-1 {
				move--
			}
			high[id].layers += move
			high[jd].layers -= move
			high[jd].part = 0
		}
		denseHigh := nd - 1
		memHigh, err := r.memOf(high, r.bufs)
		if err != nil {
			return err
		}
		if memHigh[id] <= r.targets[id] {
			r.ngl, r.mem, r.dense = high, memHigh, denseHigh
		}
		for delta := high[id].full() - r.ngl[id].full(); memHigh[id] > r.targets[id] && delta > 1; delta = high[id].full() - r.ngl[id].full() {
			step, err := falsePosition(delta, r.targets[id], r.mem[id], memHigh[id])
			if err != nil {
				return err
			}
			test := cloneNGL(r.ngl)
			denseTest, converted := r.dense, 0
			for ; denseTest < nd; denseTest++ {
				c := min(step-converted, test[denseTest].part)
				test[denseTest].layers -= c
				test[denseTest].part -= c
				test[id].layers += c
				converted += c
				if test[denseTest].part > 0 {
					break
				}
			}
			memTest, err := r.memOf(test, r.bufs)
			if err != nil {
				return err
			}
			if memTest[id] <= r.targets[id] {
				r.ngl, r.mem, r.dense = test, memTest, denseTest
			} else {
				high, memHigh, denseHigh = test, memTest, denseTest
			}
		}
		if err := r.oneMore(id); err != nil {
			return err
		}
		r.say("l.774-777: CUDA%d: %d layers (%d overflowing), %d MiB used, %d MiB free", id, r.ngl[id].layers, r.ngl[id].part, mibOf(r.mem[id]), mibOf(int64(r.free[id])-r.mem[id]))
	}
	for id := r.dense + 1; id < nd; id++ {
		r.say("l.781-786: CUDA%d: %d layers (%d overflowing), %d MiB used, %d MiB free", id, r.ngl[id].layers, r.ngl[id].part, mibOf(r.mem[id]), mibOf(int64(r.free[id])-r.mem[id]))
	}
	return nil
}

// oneMore tries part of one more layer on device id (l.722-772): its
// attention and up projections (UP), then with the gate (GATE), else its
// attention alone (ATTN), the rest to the next device or the CPU; each
// strictly under the targets of id and the next device.
func (r *lcRun) oneMore(id int) error {
	least := 1 // the last device keeps its output layer
	if id < r.nd-1 {
		least = 0
	}
	if r.dense >= r.nd || r.ngl[r.dense].layers <= least {
		return nil
	}
	test := cloneNGL(r.ngl)
	denseTest := r.dense
	test[denseTest].layers--
	test[denseTest].part--
	test[id].layers++
	test[id].part++
	if test[denseTest].part == 0 {
		denseTest++
	}
	bufs := append([]int(nil), r.bufs...)
	if id < r.nd-1 {
		bufs[id] = id + 1
	}
	try := func(f lcFraction) (bool, error) {
		test[id].overflow = f
		mt, err := r.memOf(test, bufs)
		if err != nil || !(mt[id] < r.targets[id] && (id+1 == r.nd || mt[id+1] < r.targets[id+1])) {
			return false, err
		}
		r.ngl, r.bufs, r.mem, r.dense = cloneNGL(test), bufs, mt, denseTest
		return true, nil
	}
	ok, err := try(lcFracUp)
	switch {
	case err != nil:
		return err
	case ok:
		_, err = try(lcFracGate)
	default:
		_, err = try(lcFracAttn)
	}
	return err
}

// done sets the chosen layout (l.642-644, 788) and projects it.
func (r *lcRun) done() error {
	lay, ots := r.layout(r.ngl, r.bufs)
	use, host, err := r.measure(r.nctx, lay)
	if err != nil {
		return err
	}
	r.out.GPULayers, r.out.Overrides = lay.ngl, ots
	if r.nd > 1 {
		for _, n := range r.ngl {
			r.out.TensorSplit = append(r.out.TensorSplit, n.layers)
		}
		for len(r.out.TensorSplit) > 1 && r.out.TensorSplit[len(r.out.TensorSplit)-1] == 0 {
			r.out.TensorSplit = r.out.TensorSplit[:len(r.out.TensorSplit)-1] // fit-params.cpp:46-49
		}
	}
	return r.finish("fitted", use, host, r.ngl)
}

// finish writes the answer: the status, each device's projected use and
// llama-fit-params' line (fit-params.cpp:44-68).
func (r *lcRun) finish(status string, use []LlamaCppUse, host LlamaCppUse, ngl []lcNGL) error {
	out := r.out
	out.Status, out.Host = status, host
	out.CtxArg, out.CtxSize = r.nctx, r.nctx
	if r.nctx == 0 {
		out.CtxSize = r.m.MaxPosition
	}
	for i, u := range use {
		d := LlamaCppFitDevice{Name: "CUDA" + strconv.Itoa(i), Free: r.free[i], Margin: r.margin[i], LlamaCppUse: u, Used: u.Total()}
		if ngl != nil {
			d.Layers, d.Partial = ngl[i].layers, ngl[i].part
		}
		out.Devices = append(out.Devices, d)
	}
	if ngl == nil { // the user's layout: count each device's layers
		for _, d := range r.devices(r.user) {
			if d >= 0 {
				out.Devices[d].Layers++
			}
		}
	}
	args := fmt.Sprintf("-c %d -ngl %d", out.CtxArg, out.GPULayers)
	if len(out.TensorSplit) > 1 {
		ts := make([]string, len(out.TensorSplit))
		for i, x := range out.TensorSplit {
			ts[i] = strconv.Itoa(x)
		}
		args += " -ts " + strings.Join(ts, ",")
	}
	if len(out.Overrides) > 0 {
		ot := make([]string, len(out.Overrides))
		for i, o := range out.Overrides {
			ot[i] = o.Pattern + "=" + o.Buffer
		}
		args += ` -ot "` + strings.Join(ot, ",") + `"`
	}
	out.Args = args
	return nil
}

// falsePosition is the fit's next step (l.606-608): delta · (target −
// mem) / (high − mem) as uint32_t (a negative quotient wraps), clamped to
// [1, delta − 1].
func falsePosition(delta int, target, mem, high int64) (int, error) {
	if high == mem {
		return 0, fmt.Errorf("llama.cpp: the fit's projection did not grow with the layers (a division by zero in llama.cpp)")
	}
	step := uint32(int64(delta) * (target - mem) / (high - mem))
	return int(min(max(step, 1), uint32(delta-1))), nil
}

func ngAll(ngl int) int {
	if ngl < 0 {
		return 1 << 30 // uint32_t(-1)
	}
	return ngl
}

func anyNonZero(xs []float64) bool {
	for _, x := range xs {
		if x != 0 {
			return true
		}
	}
	return false
}
