package vram

import (
	"strconv"
	"strings"
	"testing"
)

// Sizes of llama3GGUF (Llama-3-8B, Q4_0 blocks, Q6_K output), by hand from
// ggml's type sizes: a block's weights are q and o 4096² at Q4_0
// (9,437,184 each), k and v 4096·1024 (2,359,296 each), gate, up and down
// 4096·14336 (33,030,144 each) and two F32 norms (16,384 each); the output
// layer is Q6_K 4096·128256 (2,052,096 blocks of 210 bytes) and its F32
// norm; the token embedding (Q4_0) stays on the CPU. One layer's f16 cache
// of C cells is K and V of 8 heads of 128: 2 · 1024 · C · 2 bytes.
const (
	l3Block  = Bytes(2*9437184 + 2*2359296 + 3*33030144 + 2*16384) // 122,716,160
	l3Output = Bytes(2052096*210 + 16384)                          // 430,956,544
	l3Embed  = Bytes(4096 * 128256 / 32 * 18)                      // 295,501,824
	l3Header = Bytes(1 << 20)
)

func l3KV(cells int) Bytes { return Bytes(4096 * cells) }

// ollamaGGUF is llama3GGUF with what a file has besides: its trained
// context and FFN width, and the tensors laid out after a 1 MiB header.
func ollamaGGUF(trained int64) *GGUF {
	g := llama3GGUF()
	g.Metadata["llama.context_length"] = trained
	g.Metadata["llama.feed_forward_length"] = int64(14336)
	g.DataOffset = int64(l3Header)
	off := uint64(0)
	for i := range g.Tensors {
		g.Tensors[i].Offset = off
		off += uint64(g.Tensors[i].Bytes)
	}
	return g
}

// TestOllamaPlace: Ollama 0.32.15's load of Llama-3-8B Q4_0, each figure
// derived by hand from the rules (server/routes.go, server/sched.go,
// llm/llama_server.go; llama.cpp's fit puts the output layer and blocks
// back to front while a device keeps its 1024 MiB).
func TestOllamaPlace(t *testing.T) {
	file := l3Header + l3Embed + 32*l3Block + l3Output // 4,654,424,064
	layer := l3Block + l3KV(4096)                      // 139,493,376 a block at 4096 cells
	cases := []struct {
		name      string
		o         Ollama
		trained   int64
		ctx       int
		batch     int
		predicted Bytes
		gpus      []int
		layers    []int // each GPU's
		used      []Bytes
		status    string
		args      string
	}{
		// 24 GiB: the default num_ctx is 32768 (≥ 23 GiB), capped at
		// the trained 8192; everything fits: 32 blocks, the output
		// layer and 32 · 4096 · 8192 of cache; ctx 8192 > 4096 asks a
		// batch of 1024, which fits (predicted ≤ 75 %, 768 MiB left).
		{name: "fits whole", o: Ollama{DeviceFree: []Bytes{24 * GiB}, DeviceTotal: []Bytes{24 * GiB}}, trained: 8192,
			ctx: 8192, batch: 1024, predicted: file + 32*l3KV(8192), gpus: []int{0}, layers: []int{33},
			used: []Bytes{32*l3Block + l3Output + 32*l3KV(8192)}, status: "unchanged", args: "-c 8192 -np 1 --flash-attn auto -b 1024 -ub 1024"},
		// 4 GiB: the target is 3 GiB; the output layer (430,956,544)
		// and (3 GiB − it) / 139,493,376 = 20.003 → 20 blocks: 21
		// layers, 12 on the CPU.
		{name: "split with the CPU", o: Ollama{NumCtx: 4096, DeviceFree: []Bytes{4 * GiB}}, trained: 8192,
			ctx: 4096, batch: 512, predicted: file + 32*l3KV(4096), gpus: []int{0}, layers: []int{21},
			used: []Bytes{l3Output + 20*layer}, status: "fitted", args: "-c 4096 -np 1 --flash-attn auto -b 512 -ub 512"},
		// Two GPUs of 3 GiB: the prediction (4.8 GiB) is over 80 % of
		// either, so both run; back to front, CUDA1 takes the output
		// layer and (2 GiB − 430,956,544) / 139,493,376 = 12.3 → 12
		// blocks, CUDA0 2 GiB / 139,493,376 = 15.4 → 15; 5 on the CPU.
		{name: "two GPUs", o: Ollama{NumCtx: 4096, DeviceFree: []Bytes{3 * GiB, 3 * GiB}}, trained: 8192,
			ctx: 4096, batch: 512, predicted: file + 32*l3KV(4096), gpus: []int{0, 1}, layers: []int{15, 13},
			used: []Bytes{15 * layer, l3Output + 12*layer}, status: "fitted", args: "-c 4096 -np 1 --flash-attn auto -b 512 -ub 512"},
		// 8 and 12 GiB: the prediction fits 80 % of both; the one with
		// the most free memory runs alone, and holds everything.
		{name: "one of two GPUs", o: Ollama{NumCtx: 4096, DeviceFree: []Bytes{8 * GiB, 12 * GiB}}, trained: 8192,
			ctx: 4096, batch: 512, predicted: file + 32*l3KV(4096), gpus: []int{1}, layers: []int{33},
			used: []Bytes{32*layer + l3Output}, status: "unchanged", args: "-c 4096 -np 1 --flash-attn auto -b 512 -ub 512 --split-mode none --main-gpu 0"},
		// Two GPUs of 24 GiB total (48 GiB: the 262144 tier) capped at
		// the trained 131072, on 20 GiB free: a layer is 122,716,160 +
		// 4096 · 131072 = 659,587,072; the target 19 GiB takes the
		// output layer and 30.28 → 30 blocks; the context stays (Ollama
		// sets -c). The batch: 2048 by ctx, but the prediction (20.3
		// GiB) is past 80 % of 20 GiB: 1024, then 512.
		{name: "large num_ctx", o: Ollama{GPUs: 1, DeviceFree: []Bytes{20 * GiB}, DeviceTotal: []Bytes{48 * GiB}}, trained: 131072,
			ctx: 131072, batch: 512, predicted: file + 32*l3KV(131072), gpus: []int{0}, layers: []int{31},
			used: []Bytes{l3Output + 30*(l3Block+l3KV(131072))}, status: "fitted", args: "-c 131072 -np 1 --flash-attn auto -b 512 -ub 512"},
		// num_parallel 2 at 4096: -c 8192 -np 2, two streams of 4096
		// cells each; ctx 8192 > 4096 asks 1024, which fits.
		{name: "two sequences", o: Ollama{NumCtx: 4096, NumParallel: 2, DeviceFree: []Bytes{24 * GiB}}, trained: 8192,
			ctx: 4096, batch: 1024, predicted: file + 32*l3KV(8192), gpus: []int{0}, layers: []int{33},
			used: []Bytes{32*l3Block + l3Output + 32*l3KV(8192)}, status: "unchanged", args: "-c 8192 -np 2 --flash-attn auto -b 1024 -ub 1024"},
	}
	for _, c := range cases {
		p, err := c.o.PlaceGGUF(ollamaGGUF(c.trained), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if p.Release.Release != "0.32.15" || p.NumCtx != c.ctx || p.NumBatch != c.batch || p.Predicted != c.predicted || p.Fit.Status != c.status || p.Args != c.args {
			t.Errorf("%s: release %s, num_ctx %d, num_batch %d, predicted %d (want %d), %s, args %q", c.name, p.Release.Release, p.NumCtx, p.NumBatch, p.Predicted, c.predicted, p.Fit.Status, p.Args)
		}
		if len(p.GPUs) != len(c.gpus) || len(p.Fit.Devices) != len(c.layers) {
			t.Fatalf("%s: GPUs %v, devices %+v", c.name, p.GPUs, p.Fit.Devices)
		}
		onGPU := 0
		for i, d := range p.Fit.Devices {
			if p.GPUs[i] != c.gpus[i] || d.Layers != c.layers[i] || d.Used != c.used[i] {
				t.Errorf("%s: GPU %d: %d layers, %d used; want GPU %d, %d layers, %d", c.name, p.GPUs[i], d.Layers, d.Used, c.gpus[i], c.layers[i], c.used[i])
			}
			onGPU += d.Layers
		}
		if p.CPULayers != 33-onGPU || p.Layers != 33 {
			t.Errorf("%s: %d of %d layers on the CPU", c.name, p.CPULayers, p.Layers)
		}
	}
}

// TestOllamaPlaceHost: what stays on the CPU in the split case: the token
// embedding, 12 blocks and their cache.
func TestOllamaPlaceHost(t *testing.T) {
	p, err := Ollama{NumCtx: 4096, DeviceFree: []Bytes{4 * GiB}}.PlaceGGUF(ollamaGGUF(8192), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := p.Fit.Devices[0]
	if p.Fit.Host.Model != l3Embed+12*l3Block || p.Fit.Host.Context != 12*l3KV(4096) || d.Context != 20*l3KV(4096) || d.Model != l3Output+20*l3Block {
		t.Errorf("host %+v, device %+v", p.Fit.Host, d)
	}
	// A compute buffer given for the GPU counts against its target:
	// 3 GiB − 256 MiB − the output layer leaves room for 18 blocks.
	p, err = Ollama{NumCtx: 4096, DeviceFree: []Bytes{4 * GiB}, ComputeBuffers: []Bytes{256 * MiB}}.PlaceGGUF(ollamaGGUF(8192), nil)
	if err != nil || p.Fit.Devices[0].Layers != 19 || p.Fit.Devices[0].Compute != 256*MiB {
		t.Errorf("with a compute buffer: %+v, %v", p.Fit.Devices, err)
	}
}

// TestOllamaDefaultContext: the default num_ctx by the GPUs' total memory
// less OLLAMA_GPU_OVERHEAD each (server/routes.go:2043-2057), a vision
// model's floor of 2048 and the trained context's cap.
func TestOllamaDefaultContext(t *testing.T) {
	for _, c := range []struct {
		o    Ollama
		want int
	}{
		{Ollama{DeviceFree: []Bytes{16 * GiB}, DeviceTotal: []Bytes{16 * GiB}}, 4096},
		{Ollama{DeviceFree: []Bytes{20 * GiB}, DeviceTotal: []Bytes{23 * GiB}}, 32768},
		{Ollama{DeviceFree: []Bytes{20 * GiB, 20 * GiB}, DeviceTotal: []Bytes{24 * GiB, 24 * GiB}}, 262144},
		{Ollama{DeviceFree: []Bytes{20 * GiB, 20 * GiB}, DeviceTotal: []Bytes{24 * GiB, 24 * GiB}, GPUOverhead: GiB}, 32768}, // 46 GiB
		{Ollama{DeviceFree: []Bytes{20 * GiB}, DeviceTotal: []Bytes{23*GiB - 1}}, 4096},
		{Ollama{NumCtx: 1, DeviceFree: []Bytes{20 * GiB}}, 4},
		{Ollama{NumCtx: 1000, ProjectorBytes: 600 * MiB, DeviceFree: []Bytes{20 * GiB}}, 2048},
	} {
		p, err := c.o.PlaceGGUF(ollamaGGUF(1<<20), nil)
		if err != nil || p.NumCtx != c.want {
			t.Errorf("%+v: num_ctx %d, want %d (%v)", c.o, p.NumCtx, c.want, err)
		}
	}
	p, err := Ollama{DeviceFree: []Bytes{80 * GiB}, DeviceTotal: []Bytes{80 * GiB}}.PlaceGGUF(ollamaGGUF(8192), nil)
	if err != nil || p.NumCtx != 8192 || !strings.Contains(p.NumCtxFrom, "trained context 8192") {
		t.Errorf("80 GiB, trained 8192: %d (%s), %v", p.NumCtx, p.NumCtxFrom, err)
	}
}

// TestOllamaProjector: an offloaded projector sets LLAMA_ARG_FIT_TARGET to
// its size and 1 GiB in MiB, rounded up; a user's target is kept; a GPU
// without room keeps it on the CPU and the margin at 1024.
func TestOllamaProjector(t *testing.T) {
	for _, c := range []struct {
		o    Ollama
		want int
	}{
		{Ollama{NumCtx: 4096, ProjectorBytes: 600*MiB + 1, DeviceFree: []Bytes{20 * GiB}}, 1625},
		{Ollama{NumCtx: 4096, ProjectorBytes: 600 * MiB, FitTarget: 512, DeviceFree: []Bytes{20 * GiB}}, 512},
		{Ollama{NumCtx: 4096, ProjectorBytes: 600 * MiB, DeviceFree: []Bytes{GiB + 599*MiB}}, 1024},
	} {
		p, err := c.o.PlaceGGUF(ollamaGGUF(8192), nil)
		if err != nil || p.FitTarget != c.want || p.Fit.Devices[0].Margin != Bytes(c.want)*MiB {
			t.Errorf("%+v: fit target %d, want %d (%v)", c.o, p.FitTarget, c.want, err)
		}
	}
}

// TestOllamaPlaceModel: a model planned from its shape (the catalog's
// Llama-3-8B at Q4_0: every 2-D weight Q4_0, the output layer too) on 16
// GiB: the default num_ctx is 4096 (under 23 GiB) and everything fits.
func TestOllamaPlaceModel(t *testing.T) {
	m := MustPreset("llama-3-8b")
	p, err := Ollama{WeightType: "Q4_0", DeviceFree: []Bytes{16 * GiB}, DeviceTotal: []Bytes{16 * GiB}}.Place(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := Bytes(4096*128256/32*18 + 16384)
	d := p.Fit.Devices[0]
	if p.NumCtx != 4096 || p.Fit.Status != "unchanged" || d.Layers != 33 || d.Model != 32*l3Block+out || d.Context != 32*l3KV(4096) ||
		p.Predicted != l3Embed+32*l3Block+out+32*l3KV(4096) {
		t.Errorf("num_ctx %d, %s, %+v, predicted %d", p.NumCtx, p.Fit.Status, d, p.Predicted)
	}
}

// TestOllamaReleases: the table's rows parse, the current release is the
// newest, a release between rows takes the older one's rules, and the
// up-front release has no llama-server placement.
func TestOllamaReleases(t *testing.T) {
	for _, r := range ollamaReleases {
		if _, err := ParseVersion("ollama", r.Version); err != nil || r.Source == "" {
			t.Errorf("row %s: %v", r.Version, err)
		}
	}
	for _, c := range []struct{ asked, release, note string }{
		{"", "0.32.15", ""},
		{"v0.32.15", "0.32.15", ""},
		{"0.11.10", "0.11.10", ""},
		{"0.24.0", "0.11.10", "not modelled"},
		{"0.5.7", "0.11.10", "older than every"},
		{"0.40.0", "0.32.15", "newer than the newest"},
	} {
		m, err := Ollama{Version: c.asked}.Release()
		if err != nil || m.Release != c.release || !strings.Contains(m.Note, c.note) || (c.note == "") != (m.Note == "") {
			t.Errorf("%q: %+v, %v", c.asked, m, err)
		}
	}
	if up, _ := (Ollama{Version: "0.11.10"}).UpFront(); !up {
		t.Error("0.11.10: not up front")
	}
	if _, err := (Ollama{Version: "0.11.10", NumCtx: 4096, DeviceFree: []Bytes{GiB}}).PlaceGGUF(ollamaGGUF(8192), nil); err == nil || !strings.Contains(err.Error(), "versions.ollama 0.11.10") {
		t.Errorf("0.11.10's placement: %v", err)
	}
	if _, err := (Ollama{Version: "0.32"}).Release(); err != nil {
		t.Error(err)
	}
	if _, err := (Ollama{Version: "latest"}).Release(); err == nil || !strings.Contains(err.Error(), "versions.ollama") {
		t.Errorf("latest: %v", err)
	}
	if got := ModelledReleases()["ollama"]; strings.Join(got, " ") != "0.11.10 0.32.15" {
		t.Errorf("ModelledReleases: %v", got)
	}
}

// TestOllamaPlaceErrors: what is not modelled or not valid names its field.
func TestOllamaPlaceErrors(t *testing.T) {
	zero, minus := 0, -2
	gemma := ollamaGGUF(8192)
	for k, v := range gemma.Metadata {
		if strings.HasPrefix(k, "llama.") {
			delete(gemma.Metadata, k)
			gemma.Metadata["gemma3."+strings.TrimPrefix(k, "llama.")] = v
		}
	}
	gemma.Metadata["general.architecture"] = "gemma3"
	swa := ollamaGGUF(8192)
	swa.Metadata["llama.attention.sliding_window"] = int64(4096)
	for _, c := range []struct {
		o    Ollama
		f    *GGUF
		want string
	}{
		{Ollama{NumParallel: 2000, DeviceFree: []Bytes{GiB}}, nil, "num_parallel"},
		{Ollama{NumCtx: -1, DeviceFree: []Bytes{GiB}}, nil, "num_ctx"},
		{Ollama{NumBatch: -1, DeviceFree: []Bytes{GiB}}, nil, "num_batch"},
		{Ollama{NumGPU: &zero, DeviceFree: []Bytes{GiB}}, nil, "num_gpu 0"},
		{Ollama{NumGPU: &minus, DeviceFree: []Bytes{GiB}}, nil, "num_gpu"},
		{Ollama{KVCacheType: "q3_k", DeviceFree: []Bytes{GiB}}, nil, "kv_cache_type"},
		{Ollama{NumCtx: 4096}, nil, "device_free"},
		{Ollama{DeviceFree: []Bytes{GiB}}, nil, "device_total"},
		{Ollama{DeviceFree: []Bytes{GiB, GiB}, DeviceTotal: []Bytes{GiB}}, nil, "device_total names 1"},
		{Ollama{NumCtx: 4096, DeviceFree: []Bytes{-1}}, nil, "device_free[0]"},
		{Ollama{NumCtx: 4096, DeviceFree: []Bytes{GiB, GiB}, ComputeBuffers: []Bytes{1, 2, 3}}, nil, "compute_buffers"},
		{Ollama{DeviceFree: []Bytes{GiB}, DeviceTotal: []Bytes{GiB}, GPUOverhead: 2 * GiB}, nil, "gpu_overhead"},
		{Ollama{NumCtx: 4096, FitTarget: -1, DeviceFree: []Bytes{GiB}}, nil, "fit_target"},
		{Ollama{NumCtx: 4096, GPUs: 17}, nil, "gpus"},
		{Ollama{NumCtx: 4096, DeviceFree: []Bytes{GiB}}, gemma, `not "gemma3"`},
		{Ollama{NumCtx: 4096, DeviceFree: []Bytes{GiB}}, swa, "sliding_window"},
	} {
		f := c.f
		if f == nil {
			f = ollamaGGUF(8192)
		}
		if _, err := c.o.PlaceGGUF(f, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	if _, err := (Ollama{}).PlaceGGUF(nil, nil); err == nil {
		t.Error("no header: no error")
	}
}

// TestJudgeOllamaPlan: an Ollama plan is judged as Ollama places it: the
// catalog's Llama-3-8B at Q4_0 fits an RTX 4090 whole; with num_gpu 33
// forced onto an 8 GB card with 4 sequences of 8192 tokens (a 4 GiB cache)
// the fit gives up
// and the load does not fit.
func TestJudgeOllamaPlan(t *testing.T) {
	judge := func(gpu, extra string) Verdict {
		t.Helper()
		p, err := ParsePlanContent([]byte(`{"model": "llama-3-8b", "gpu": "` + gpu + `", "inference": {"batch": 1, "prompt_tokens": 4096}, "ollama": {"weight_type": "Q4_0"` + extra + `}}`))
		if err != nil {
			t.Fatal(err)
		}
		v, err := Budget{GPU: mustGPU(gpu), Headroom: DefaultHeadroom}.JudgePlan(p)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := judge("RTX-4090", ""); !v.Fits || !strings.HasPrefix(v.Engine, "Ollama 0.32.15") || !strings.Contains(v.Why, "compute buffers are not counted") {
		t.Errorf("RTX 4090: %+v", v)
	}
	if v := judge("RTX-4060", `, "num_gpu": 33, "num_parallel": 4, "num_ctx": 8192`); v.Fits || !strings.Contains(v.Why, "gave up") {
		t.Errorf("every layer on an 8 GB card: %+v", v)
	}
}

// TestOllamaOneSequence: an architecture Ollama keeps to one sequence
// (server/sched.go:507-510) loads with num_parallel 1 whatever is asked;
// the family's GGUF name decides it (LFM2: "lfm2"; Llama: not listed).
func TestOllamaOneSequence(t *testing.T) {
	for _, c := range []struct {
		preset string
		want   int
	}{{"lfm2-1.2b", 1}, {"llama-3.2-1b", 4}} {
		p, err := Ollama{NumCtx: 4096, NumParallel: 4, DeviceFree: []Bytes{24 * GiB}}.Place(MustPreset(c.preset), nil)
		if err != nil || p.NumParallel != c.want || !strings.HasPrefix(p.Args, "-c "+strconv.Itoa(4096*c.want)+" -np "+strconv.Itoa(c.want)) {
			t.Errorf("%s: num_parallel %d, args %q, want %d (%v)", c.preset, p.NumParallel, p.Args, c.want, err)
		}
	}
}
