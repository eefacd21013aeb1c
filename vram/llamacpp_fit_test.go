package vram

import (
	"strings"
	"testing"
)

// The fit's cases, each choice derived by hand from common/fit.cpp at
// b10573 (llamacpp_fit.go cites the lines). Sizes at F16: Mistral-7B's
// block is 416 MiB + 32 KiB of norms (attention 80 MiB, FFN 336 MiB), its
// embedding and output 250 MiB each (+16 KiB final norm), its KV 4 KiB a
// cell a layer. The toy MoE (4 Mixtral blocks of width 1024, 8 experts of
// 4096) has a block of 8 MiB + 40 KiB dense (attention, norms, an F32
// router) and 192 MiB of experts (64 MiB each of gate, up, down), an
// embedding and output of 62.5 MiB (+4 KiB), and 32 MiB of KV a layer at
// 8192 cells.
func TestFitLlamaCpp(t *testing.T) {
	mistral := Model{Family: "mistral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 32768}
	moe := Model{Family: "mixtral", Layers: 4, Hidden: 1024, Heads: 8, KVHeads: 8, FFN: 4096, Experts: 8, ExpertsPerToken: 2, Vocab: 32000, MaxPosition: 8192}
	const K = KiB
	moeUp := `blk\.1\.ffn_(gate|gate_up|down).*=CPU`
	exps := func(il string) string { return `blk\.` + il + `\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU` }
	for _, c := range []struct {
		name    string
		m       Model
		l       LlamaCpp
		status  string
		ctx     int
		args    string
		used    []Bytes
		layers  []int
		host    Bytes // host model bytes
		stepHas string
	}{
		// Whole model 13563 MiB + 16 KiB, KV 8192 × 4 KiB × 32 = 1 GiB,
		// compute 500 MiB: 15087 MiB + 16 KiB of 24 GiB leaves 9488 MiB
		// >= 1024: no changes (l.269-274).
		{"dense fits whole", mistral, LlamaCpp{CtxSize: 8192, DeviceFree: []Bytes{24 * GiB}, ComputeBuffers: []Bytes{500 * MiB}},
			"unchanged", 8192, "-c 8192 -ngl -1", []Bytes{15087*MiB + 16*K}, []int{33}, 250 * MiB, "no changes needed"},
		// -c unset: the trained 32768 (KV 4 GiB) wants 17659 MiB + 16 KiB
		// of 16 GiB. Target 16384 − 1024 = 15360 MiB; at 4096 cells
		// 14075 MiB + 16 KiB; 4096 + 28672·(1285 MiB − 16 KiB)/3584 MiB
		// = 4096 + 10279 = 14375, rounded down to 256: 14336 (l.342-344),
		// and one GPU stops there (l.350-352): 13563 MiB + 16 KiB + 1792.
		{"dense shrinks its context", mistral, LlamaCpp{DeviceFree: []Bytes{16 * GiB}},
			"fitted", 14336, "-c 14336 -ngl -1", []Bytes{15355*MiB + 16*K}, []int{33}, 250 * MiB, "context size reduced from 32768 to 14336"},
		// 990.5 MiB + 164 KiB whole on 600 MiB free, margin 64 MiB:
		// target 536 MiB. Dense-only 222.5 MiB + 164 KiB leaves a surplus
		// (l.529-557). Step 3 (l.587-641): all 5 layers, 4 partial (block
		// 0 full), 414.5 MiB + 164 KiB fits. Step 4 (l.663-720): all full
		// is 990.5; the false position tries 2 full, 606.5 MiB: over;
		// one more layer (l.722-772): block 1 keeping its up experts
		// (UP, 64 MiB) is 478.5 MiB + 132 KiB < 536, keeping gate too
		// 542.5 MiB: over. Host: the embedding, block 1's gate and down
		// experts and router, blocks 2-3's experts: 574.5 MiB + 32 KiB.
		{"MoE experts to the CPU", moe, LlamaCpp{CtxSize: 8192, DeviceFree: []Bytes{600 * MiB}, FitTarget: []int{64}},
			"fitted", 8192, `-c 8192 -ngl 5 -ot "` + moeUp + "," + exps("2") + "," + exps("3") + "," + exps("4") + `"`,
			[]Bytes{478*MiB + 512*K + 132*K}, []int{5}, 574*MiB + 512*K + 32*K, "total surplus"},
		// Two GPUs of 8 GiB: a block is 448 MiB + 32 KiB with its KV.
		// CUDA1 first (l.587-641): all 33 layers 14587 MiB + 16 KiB >
		// 7168; step 33·7168/14587.02 = 16: 15 blocks + output, 6970 MiB
		// + 496 KiB, fits; 17 does not. CUDA0: 17 blocks 7616 MiB + 544
		// KiB > 7168; step 17·7168/7616.53 = 15: 6720 MiB + 480 KiB fits,
		// 16 (7168 MiB + 512 KiB) does not. Blocks 0-1 stay on the CPU.
		{"two GPUs", mistral, LlamaCpp{CtxSize: 8192, DeviceFree: []Bytes{8 * GiB, 8 * GiB}},
			"fitted", 8192, "-c 8192 -ngl 31 -ts 15,16", []Bytes{6720*MiB + 480*K, 6970*MiB + 496*K}, []int{15, 16}, 1082*MiB + 64*K, "CUDA0: 15 layers"},
		// -ngl set by the user: the fit gives up after the context step
		// (l.377-379), the load goes on with -ngl 20.
		{"-ngl set", mistral, LlamaCpp{CtxSize: 8192, GPULayers: 20, DeviceFree: []Bytes{8 * GiB}},
			"failed", 8192, "-c 8192 -ngl 20", nil, nil, 0, "n_gpu_layers already set by user to 20"},
	} {
		f, err := c.l.FitParams(c.m, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if f.Status != c.status || f.CtxSize != c.ctx || f.Args != c.args || f.Release.Release != "b10573" {
			t.Errorf("%s: %s, ctx %d, %q (%s); want %s, %d, %q\n%s", c.name, f.Status, f.CtxSize, f.Args, f.Release.Release, c.status, c.ctx, c.args, strings.Join(f.Steps, "\n"))
		}
		if !strings.Contains(strings.Join(f.Steps, "\n"), c.stepHas) {
			t.Errorf("%s: no step says %q:\n%s", c.name, c.stepHas, strings.Join(f.Steps, "\n"))
		}
		for i, u := range c.used {
			if d := f.Devices[i]; d.Used != u || d.Layers != c.layers[i] {
				t.Errorf("%s: CUDA%d uses %d B over %d layers, want %d B, %d", c.name, i, int64(d.Used), d.Layers, int64(u), c.layers[i])
			}
		}
		if c.host > 0 && f.Host.Model != c.host {
			t.Errorf("%s: host model %d B, want %d B", c.name, int64(f.Host.Model), int64(c.host))
		}
	}
}

// The same toy MoE read from a GGUF header's tensor names and sizes fits
// the same way: the names sort into the -ot patterns' parts.
func TestFitLlamaCppGGUF(t *testing.T) {
	moe := Model{Family: "mixtral", Layers: 4, Hidden: 1024, Heads: 8, KVHeads: 8, FFN: 4096, Experts: 8, ExpertsPerToken: 2, Vocab: 32000, MaxPosition: 8192}
	g := &GGUF{Tensors: []GGUFTensor{{Name: "token_embd.weight", Bytes: 32000 * 1024 * 2}, {Name: "output_norm.weight", Bytes: 4 * KiB}, {Name: "output.weight", Bytes: 32000 * 1024 * 2}}}
	for il := range 4 {
		p := "blk." + string(rune('0'+il)) + "."
		for _, x := range []struct {
			n string
			b Bytes
		}{{"attn_norm.weight", 4 * KiB}, {"ffn_norm.weight", 4 * KiB}, {"attn_q.weight", 2 * MiB}, {"attn_k.weight", 2 * MiB}, {"attn_v.weight", 2 * MiB},
			{"attn_output.weight", 2 * MiB}, {"ffn_gate_inp.weight", 32 * KiB}, {"ffn_gate_exps.weight", 64 * MiB}, {"ffn_up_exps.weight", 64 * MiB}, {"ffn_down_exps.weight", 64 * MiB}} {
			g.Tensors = append(g.Tensors, GGUFTensor{Name: p + x.n, Bytes: x.b})
		}
	}
	l := LlamaCpp{CtxSize: 8192, DeviceFree: []Bytes{600 * MiB}, FitTarget: []int{64}}
	a, err := l.FitParamsGGUF(moe, nil, g)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.FitParams(moe, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Args != b.Args || a.Devices[0].Used != b.Devices[0].Used || a.Host != b.Host {
		t.Errorf("GGUF %q %v %+v; model %q %v %+v", a.Args, a.Devices[0].Used, a.Host, b.Args, b.Devices[0].Used, b.Host)
	}
}

// Bad input is refused, naming the field; the fit is off where the plan
// or the build says so.
func TestFitLlamaCppInput(t *testing.T) {
	mistral := Model{Family: "mistral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 32768}
	on, off := true, false
	free := []Bytes{8 * GiB}
	for _, c := range []struct {
		l    LlamaCpp
		want string
	}{
		{LlamaCpp{}, "device_free"},
		{LlamaCpp{DeviceFree: []Bytes{-1}}, "device_free[0]"},
		{LlamaCpp{DeviceFree: free, GPUs: 2}, "gpus 2 and device_free"},
		{LlamaCpp{DeviceFree: free, GPUs: 17}, "gpus must be"},
		{LlamaCpp{DeviceFree: free, FitTarget: []int{-5}}, "fit_target"},
		{LlamaCpp{DeviceFree: free, FitTarget: make([]int, 16)}, "fit_target"},
		{LlamaCpp{DeviceFree: free, FitCtx: -1}, "fit_ctx"},
		{LlamaCpp{DeviceFree: free, ComputeBuffers: []Bytes{1, 2}}, "compute_buffers"},
		{LlamaCpp{DeviceFree: free, WeightType: "Q4_K_M"}, "weight_type"},
		{LlamaCpp{DeviceFree: free, CacheTypeK: "q3_k"}, "cache_type_k"},
		{LlamaCpp{DeviceFree: free, Version: "b6173", Fit: &on}, "fit: build b6173 has no --fit"},
	} {
		if _, err := c.l.FitParams(mistral, nil); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "llama.cpp: ") && !strings.HasPrefix(err.Error(), "versions.") {
			t.Errorf("%+v: %v, want an error naming %s", c.l, err, c.want)
		}
	}
	for _, l := range []LlamaCpp{{DeviceFree: free, Fit: &off}, {DeviceFree: free, Version: "b6173"}} {
		if f, err := l.FitParams(mistral, nil); err != nil || f.Status != "off" {
			t.Errorf("%+v: %+v, %v", l, f, err)
		}
	}
	// The plan's GPU gives the free memory: CUDA total less its context.
	g, err := LookupGPU("RTX-4090")
	if err != nil {
		t.Fatal(err)
	}
	f, err := (LlamaCpp{CtxSize: 4096}).FitParams(mistral, &g)
	if err != nil || f.Devices[0].Free != g.Total()-g.Context {
		t.Errorf("RTX 4090: %+v, %v", f.Devices, err)
	}
}

// TestJudgeLlamaCppPlan: a llama-server plan is judged as llama.cpp places
// it, not as transformers' generate: Qwen3-30B-A3B at q4_k fits a 24 GB
// card whole; with every layer forced onto an 8 GB card (-ngl set, so the
// fit gives up) it does not; on a 16 GB Mac the limit is Metal's cap.
func TestJudgeLlamaCppPlan(t *testing.T) {
	judge := func(gpu, extra string) Verdict {
		t.Helper()
		p, err := ParsePlanContent([]byte(`{"model": "qwen3-30b-a3b", "gpu": "` + gpu + `", "inference": {"batch": 1, "prompt_tokens": 4096}, "llama_cpp": {"weight_type": "q4_k"` + extra + `}}`))
		if err != nil {
			t.Fatal(err)
		}
		v, err := Budget{GPU: mustGPU(gpu), Headroom: DefaultHeadroom}.JudgePlan(p)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := judge("RTX-4090", ""); !v.Fits || !strings.HasPrefix(v.Engine, "llama.cpp") || !strings.Contains(v.Why, "compute buffers are not counted") {
		t.Errorf("RTX 4090: %+v", v)
	}
	if v := judge("RTX-4060", `, "n_gpu_layers": 99`); v.Fits || !strings.Contains(v.Why, "does not fit") {
		t.Errorf("every layer on an 8 GB card: %+v", v)
	}
	mac := mustGPU("Apple-M-16GB")
	if v := judge("Apple-M-16GB", ""); v.Limit != mac.Memory-mac.UnifiedReserve {
		t.Errorf("a 16 GB Mac's limit %v, want Metal's cap %v", v.Limit, mac.Memory-mac.UnifiedReserve)
	}
}
