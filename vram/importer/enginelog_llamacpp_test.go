package importer

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// llama.cpp's load as build b10573 prints it at -lv 4, each line written
// as its format string prints it (enginelog_llamacpp.go cites each
// file:line): llama-server, Mistral-7B on one GPU, -c unset, the fit
// shrinking the trained 32768 to 14336.
const llamaCpp10573Log = "cmn  common_param: common_params_print_info: build 10573 (d775b8967) with GNU 13.3.0 for Linux x86_64\n" + // 1 common.cpp:403
	"cmn  common_param: common_params_print_info: verbosity = 4 (adjust with the `-lv N` CLI arg)\n" + // 2 common.cpp:405
	"common_params_fit_impl: projected to use 17659 MiB of device memory vs. 16384 MiB of free device memory\n" + // 3 fit.cpp:267
	"common_params_fit_impl: cannot meet free memory target of 1024 MiB, need to reduce device memory by 2299 MiB\n" + // 4 fit.cpp:303
	"common_params_fit_impl: context size reduced from 32768 to 14336 -> need 2304 MiB less memory in total\n" + // 5 fit.cpp:348
	"common_params_fit_impl: entire model can be fit by reducing context\n" + // 6 fit.cpp:351
	"common_fit_params: successfully fit params to free device memory\n" + // 7 fit.cpp:804
	"common_fit_params: fitting params to free memory took 0.52 seconds\n" + // 8 fit.cpp:813
	"llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4090) (0000:01:00.0) - 16384 MiB free\n" + // 9 llama.cpp:305
	"load_tensors: offloading output layer to GPU\n" + // 10 llama-model.cpp:1678
	"load_tensors: offloading 32 repeating layers to GPU\n" + // 11 llama-model.cpp:1681
	"load_tensors: offloaded 33/33 layers to GPU\n" + // 12 llama-model.cpp:1686
	"load_tensors:   CPU_Mapped model buffer size =    70.31 MiB\n" + // 13 llama-model.cpp:1692
	"load_tensors:        CUDA0 model buffer size =  4095.05 MiB\n" + // 14
	"llama_context: constructing llama_context\n" + // 15 llama-context.cpp:92
	"llama_context: n_seq_max             = 4\n" + // 16 llama-context.cpp:306
	"llama_context: n_ctx                 = 14336\n" + // 17 :307
	"llama_context: n_ctx_seq             = 14336\n" + // 18 :308
	"llama_context: n_ctx_seq (14336) < n_ctx_train (32768) -- the full capacity of the model will not be utilized\n" + // 19 :321
	"llama_kv_cache:      CUDA0 KV buffer size =  1792.00 MiB\n" + // 20 llama-kv-cache.cpp:289
	"llama_kv_cache: size = 1792.00 MiB ( 14336 cells,  32 layers,  4/1 seqs), K (f16):  896.00 MiB, V (f16):  896.00 MiB\n" + // 21 :299
	"sched_reserve:      CUDA0 compute buffer size =   560.00 MiB\n" + // 22 llama-context.cpp:681
	"sched_reserve:  CUDA_Host compute buffer size =    36.01 MiB\n" + // 23
	"srv    load_model: initializing, n_slots = 4, n_ctx_slot = 14336, kv_unified = 'true'\n" // 24 server-context.cpp:1231

func TestReadLlamaCppLog(t *testing.T) {
	l, err := ReadEngineLog([]byte(llamaCpp10573Log))
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine != "llama_cpp" || l.Version != "b10573" || l.Commit != "d775b8967" || len(l.Errors) != 0 || len(l.Notes) != 0 {
		t.Errorf("engine %q version %q commit %q errors %q notes %q", l.Engine, l.Version, l.Commit, l.Errors, l.Notes)
	}
	mib := func(x float64) vram.Bytes { return vram.Bytes(x * (1 << 20)) }
	want := []LogFigure{
		{What: LogFitProjected, Bytes: mib(17659), Line: 3}, {What: LogFitCtxReduced, Count: 14336, Line: 5},
		{What: LogFreeAtStart, Device: "CUDA0", Bytes: mib(16384), Line: 9},
		{What: LogOffloaded, Count: 33, Line: 12}, {What: LogOffloadable, Count: 33, Line: 12},
		{What: LogModelBuffer, Device: "CPU_Mapped", Bytes: mib(70.31), Line: 13}, {What: LogModelBuffer, Device: "CUDA0", Bytes: mib(4095.05), Line: 14},
		{What: LogNSeqMax, Count: 4, Line: 16}, {What: LogNCtx, Count: 14336, Line: 17}, {What: LogNCtxSeq, Count: 14336, Line: 18},
		{What: LogKVBuffer, Device: "CUDA0", Bytes: mib(1792), Line: 20}, {What: LogKVSize, Bytes: mib(1792), Line: 21}, {What: LogKVCells, Count: 14336, Line: 21},
		{What: LogComputeBuffer, Device: "CUDA0", Bytes: mib(560), Line: 22}, {What: LogComputeBuffer, Device: "CUDA_Host", Bytes: mib(36.01), Line: 23},
		{What: LogSlots, Count: 4, Line: 24}, {What: LogCtxSlot, Count: 14336, Line: 24},
	}
	if len(l.Figures) != len(want) {
		t.Fatalf("%d figures, want %d: %+v", len(l.Figures), len(want), l.Figures)
	}
	for i, w := range want {
		if l.Figures[i] != w {
			t.Errorf("figure %d: %+v, want %+v", i, l.Figures[i], w)
		}
	}
}

// TestReadLlamaCppForms: the lines of other builds and tools. The b6895
// logs are tools/fit-params/README.md's example at b10573, verbatim; the
// b6173 and iswa lines are written as 4227c9be's format strings print them.
func TestReadLlamaCppForms(t *testing.T) {
	mib := func(x float64) vram.Bytes { return vram.Bytes(x * (1 << 20)) }
	read := func(name, text string) EngineLog {
		t.Helper()
		l, err := ReadEngineLog([]byte(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return l
	}
	has := func(name string, l EngineLog, w LogFigure) {
		t.Helper()
		for _, f := range l.Figures {
			if f.What == w.What && f.Device == w.Device {
				if f != w {
					t.Errorf("%s: %+v, want %+v", name, f, w)
				}
				return
			}
		}
		t.Errorf("%s: no %s %s in %+v", name, w.What, w.Device, l.Figures)
	}
	file := func(name string) string {
		b, err := os.ReadFile("testdata/enginelog/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// llama-fit-params (b6895): its log and its line, 30 -ot patterns.
	fp := read("fit-params b6895", file("llama-fit-params-b6895.log"))
	if fp.Version != "b6895" || fp.Commit != "4341dc8bc" || !strings.HasPrefix(fp.FitArgs, `-c 4096 -ngl 48 -ot blk\.14\.`) || fp.FitArgsLine != 15 {
		t.Errorf("fit-params: %q %q %q line %d", fp.Version, fp.Commit, fp.FitArgs, fp.FitArgsLine)
	}
	for _, w := range []LogFigure{{What: LogFitProjected, Bytes: mib(61807), Line: 6}, {What: LogFitCtxReduced, Count: 4096, Line: 8},
		{What: LogFitLayers, Device: "CUDA0", Count: 48, Line: 11}, {What: LogFitUsed, Device: "CUDA0", Bytes: mib(19187), Line: 11},
		{What: LogFitCtx, Count: 4096, Line: 15}, {What: LogFitNGL, Count: 48, Line: 15}, {What: LogFitOverrides, Count: 34, Line: 15}} {
		has("fit-params", fp, w)
	}
	// llama-server (b6895): the fit's line, the breakdown at exit.
	srv := read("server b6895", file("llama-server-b6895.log"))
	for _, w := range []LogFigure{{What: LogFitProjected, Bytes: mib(19187), Line: 14},
		{What: LogBreakdownModel, Device: "CUDA0", Bytes: mib(17904), Line: 24}, {What: LogBreakdownContext, Device: "CUDA0", Bytes: mib(384), Line: 24},
		{What: LogBreakdownCompute, Device: "CUDA0", Bytes: mib(898), Line: 24}, {What: LogBreakdownModel, Device: "Host", Bytes: mib(58259), Line: 25},
		{What: LogBreakdownCompute, Device: "Host", Bytes: mib(12), Line: 25}} {
		has("server", srv, w)
	}
	// --fit-print on: the rows alone (stdout) are read; after the marker
	// too; rows amid other lines without it are not.
	rows := "CUDA0 17904 384 898 \nHost 58259 0 12 \n"
	fpp := read("fit-print", rows)
	has("fit-print", fpp, LogFigure{What: LogFitPrintModel, Device: "CUDA0", Bytes: mib(17904), Line: 1})
	has("fit-print", fpp, LogFigure{What: LogFitPrintCompute, Device: "Host", Bytes: mib(12), Line: 2})
	marked := read("fit-print marked", "llama_fit_params: printing estimated memory in MiB to stdout (device, model, context, compute) ...\n"+rows)
	has("fit-print marked", marked, LogFigure{What: LogFitPrintContext, Device: "CUDA0", Bytes: mib(384), Line: 2})
	mixed := read("rows amid a load", "load_tensors: offloaded 1/33 layers to GPU\n"+rows)
	if _, ok := mixed.Figure(LogFitPrintModel); ok {
		t.Errorf("rows without the marker amid a log: read as --fit-print: %+v", mixed.Figures)
	}
	// b6173 (4227c9be): build line, n_ctx_per_seq, llama_kv_cache_unified,
	// an iswa cache's two halves summed, a recurrent state buffer.
	old := read("b6173", "build: 6173 (4227c9be) with cc (Ubuntu 13.3.0) 13.3.0 for x86_64-linux-gnu\n"+
		"llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4090) - 23512 MiB free\n"+
		"llama_context: n_ctx_per_seq = 4096\n"+
		"llama_kv_cache_unified_iswa: creating non-SWA KV cache, size = 8192 cells\n"+
		"llama_kv_cache_unified:      CUDA0 KV buffer size =   192.00 MiB\n"+
		"llama_kv_cache_unified: size =  192.00 MiB (  8192 cells,  12 layers,  1/1 seqs), K (f16):   96.00 MiB, V (f16):   96.00 MiB\n"+
		"llama_kv_cache_unified_iswa: creating     SWA KV cache, size = 1024 cells\n"+
		"llama_kv_cache_unified:      CUDA0 KV buffer size =    24.00 MiB\n"+
		"llama_kv_cache_unified: size =   24.00 MiB (  1024 cells,  12 layers,  1/1 seqs), K (f16):   12.00 MiB, V (f16):   12.00 MiB\n"+
		"llama_memory_recurrent:      CUDA0 RS buffer size =    16.00 MiB\n")
	if old.Version != "b6173" || old.Commit != "4227c9be" {
		t.Errorf("b6173: %q %q", old.Version, old.Commit)
	}
	for _, w := range []LogFigure{{What: LogFreeAtStart, Device: "CUDA0", Bytes: mib(23512), Line: 2}, {What: LogNCtxSeq, Count: 4096, Line: 3},
		{What: LogKVCells, Count: 8192, Line: 4}, {What: LogKVBuffer, Device: "CUDA0", Bytes: mib(216), Line: 5}, {What: LogKVSize, Bytes: mib(216), Line: 6},
		{What: LogSWACells, Count: 1024, Line: 7}, {What: LogRSBuffer, Device: "CUDA0", Bytes: mib(16), Line: 10}} {
		has("b6173", old, w)
	}
}

// TestReadLlamaCppCases: the llama.cpp lines the validation cases quote
// (examples/validate/testdata/cases.jsonl, "reported=", builds of 2025:
// b4462 and llama-cpp-python's) read as the case's measured value.
func TestReadLlamaCppCases(t *testing.T) {
	f, err := os.Open("../../examples/validate/testdata/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reported := regexp.MustCompile(`reported=(\S+: +\S+ (?:KV|compute) buffer size = +[0-9.]+ MiB)`)
	read := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct {
			ID       string
			Measured struct {
				What  string
				Value float64
			}
			Notes string
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		m := reported.FindStringSubmatch(c.Notes)
		if !strings.HasPrefix(c.ID, "llamacpp_") || m == nil {
			continue
		}
		l, err := ReadEngineLog([]byte(m[1]))
		if err != nil || len(l.Figures) != 1 || l.Engine != "llama_cpp" {
			t.Errorf("%s: %q: %+v %v", c.ID, m[1], l.Figures, err)
			continue
		}
		what := map[string]string{"llamacpp_kv_mib": LogKVBuffer, "llamacpp_compute_mib": LogComputeBuffer}[c.Measured.What]
		if got := l.Figures[0]; got.What != what || got.Bytes != vram.Bytes(c.Measured.Value*(1<<20)) || !strings.HasPrefix(got.Device, "CUDA") {
			t.Errorf("%s: %+v, want %s %v MiB", c.ID, got, what, c.Measured.Value)
		}
		read++
	}
	if read < 8 {
		t.Errorf("%d cases' lines read, want the 8 of llamacpp_01 and _02", read)
	}
}

// TestReadLlamaCppLoadOnce: the fit's dry runs (-lv 5 prints their load
// lines before "fitting params to free memory took") and a draft model's
// load after the first context are not read as the load.
func TestReadLlamaCppLoadOnce(t *testing.T) {
	dry := "load_tensors:        CUDA0 model buffer size = 13563.02 MiB\nsched_reserve:      CUDA0 compute buffer size =   560.00 MiB\n" +
		"load_tensors:        CUDA0 model buffer size = 13563.02 MiB\nllama_kv_cache:      CUDA0 KV buffer size =     0.00 MiB\n" +
		"common_fit_params: fitting params to free memory took 0.52 seconds\n"
	load := "load_tensors:        CUDA0 model buffer size =  4095.05 MiB\nllama_kv_cache:      CUDA0 KV buffer size =  1792.00 MiB\n" +
		"sched_reserve:      CUDA0 compute buffer size =   560.00 MiB\n"
	draft := "load_tensors:        CUDA0 model buffer size =   100.00 MiB\nllama_kv_cache:      CUDA0 KV buffer size =    20.00 MiB\n"
	l, err := ReadEngineLog([]byte(dry + load + draft))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := l.Figure(LogModelBuffer)
	kv, _ := l.Figure(LogKVBuffer)
	if weights := 4095.05; w.Bytes != vram.Bytes(weights*(1<<20)) || w.Line != 6 || kv.Bytes != 1792<<20 || len(l.Notes) != 2 ||
		!strings.Contains(l.Notes[0], "dry runs") || !strings.Contains(l.Notes[1], "second model's load from line 9") {
		t.Errorf("model %+v, KV %+v, notes %q", w, kv, l.Notes)
	}
}

func TestReadLlamaCppRefuses(t *testing.T) {
	// b10573 at its default verbosity: none of the load's lines.
	_, err := ReadEngineLog([]byte("cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)\nsrv  load_model: loading model 'x.gguf'\n"))
	if err == nil || !strings.Contains(err.Error(), "verbosity 3") || !strings.Contains(err.Error(), "-lv 4") {
		t.Errorf("a default-verbosity log: %v", err)
	}
	// Its slots line alone is read, with a note on what is missing.
	l, err := ReadEngineLog([]byte("cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)\n" +
		"srv    load_model: initializing, n_slots = 4, n_ctx_slot = 32768, kv_unified = 'true'\n"))
	if err != nil || len(l.Figures) != 2 || len(l.Notes) != 1 || !strings.Contains(l.Notes[0], "-lv 4") {
		t.Errorf("slots alone: %+v %q %v", l.Figures, l.Notes, err)
	}
	// An OOM and a failed fit are the log's failures.
	l, err = ReadEngineLog([]byte("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: out of memory\n" +
		"common_fit_params: failed to fit params to free device memory: n_gpu_layers already set by user to 20, abort\n"))
	if err != nil || len(l.Errors) != 2 {
		t.Errorf("failures: %q %v", l.Errors, err)
	}
	// Many buffers of distinct names: at most maxLogDevice a figure.
	var b strings.Builder
	for i := range 1000 {
		b.WriteString("load_tensors:  X" + strconv.Itoa(i) + " model buffer size =     1.00 MiB\n")
	}
	if l, err := ReadEngineLog([]byte(b.String())); err != nil || len(l.Figures) != maxLogDevice {
		t.Errorf("1000 buffers: %d figures, %v", len(l.Figures), err)
	}
}
