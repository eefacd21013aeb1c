package importer

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// llama.cpp's startup log (llama-server, llama-cli, llama-completion) and
// llama-fit-params' output, as build b10573 prints them (file:line at tag
// b10573, d775b8967), with the forms of older builds:
//
//	"common_params_print_info: build 10573 (d775b8967) with … for …" (common/common.cpp:403; trace level);
//	  "build: 6173 (4227c9be) with … for …" before (4227c9be common/common.cpp:364, c05e8c99 l.385)
//	"llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4090) (0000:01:00.0) - 23512 MiB free"
//	  (src/llama.cpp:305; 4227c9be src/llama.cpp:218 without the id)
//	"load_tensors: offloaded 33/33 layers to GPU" (src/llama-model.cpp:1686; c05e8c99 llm_load_tensors)
//	"load_tensors:        CUDA0 model buffer size =  4095.05 MiB" and CPU_Mapped, CUDA_Host, CPU (src/llama-model.cpp:1692)
//	"llama_kv_cache:      CUDA0 KV buffer size =  4096.00 MiB" (src/llama-kv-cache.cpp:289;
//	  llama_kv_cache_unified at 4227c9be, llama_kv_cache_init at c05e8c99)
//	"llama_kv_cache: size = 4096.00 MiB ( 32768 cells,  32 layers,  1/1 seqs), K (f16): …, V (f16): …"
//	  (src/llama-kv-cache.cpp:299); c05e8c99: "llama_kv_cache_init: kv_size = 32768, offload = 1, …" (src/llama-kv-cache.cpp:37)
//	  and "llama_new_context_with_model: KV self size  = 4352.00 MiB, K (q8_0): …" (src/llama.cpp:12243)
//	"llama_kv_cache_iswa: creating non-SWA KV cache, size = N cells", "creating     SWA KV cache, …" (src/llama-kv-cache-iswa.cpp:83, 100)
//	"llama_memory_recurrent:      CUDA0 RS buffer size = … MiB" (src/llama-memory-recurrent.cpp:115)
//	"llama_context: n_seq_max = 4", "n_ctx = 32768", "n_ctx_seq = 32768" (src/llama-context.cpp:306-308, padded;
//	  4227c9be l.127-129 and c05e8c99 llama_new_context_with_model: n_ctx_per_seq)
//	"llama_context:      CUDA0 compute buffer size =   560.00 MiB" (src/llama-context.cpp:681; c05e8c99 llama_new_context_with_model)
//	"srv    load_model: initializing, n_slots = 4, n_ctx_slot = 32768, kv_unified = 'true'" (tools/server/server-context.cpp:1231)
//	"common_memory_breakdown_print: | - CUDA0 (RTX 4090) | 24077 = 945 + (19187 = 17904 + 384 + 898) + 3945 |"
//	  and "| - Host | 58271 = 58259 + 0 + 12 |" (common/fit.cpp:817-957, whole MiB; llama_memory_breakdown_print
//	  in tools/fit-params/README.md's b6895 example)
//	the fit (common/fit.cpp, trace level; llama_params_fit_impl in the README's example): "projected to use X MiB of
//	  device memory vs. Y MiB of free device memory" (l.267), "  - CUDA0 (…): T total, U used, F free vs. target of M"
//	  (l.262), "context size reduced from A to B -> …" (l.348, 357), "  - CUDA0 (…): N layers (P overflowing), U MiB used,
//	  F MiB free" (l.639, 776, 784), "failed to fit params to free device memory: …" (l.806),
//	  "fitting params to free memory took X seconds" (l.813)
//	llama-fit-params' stdout: "-c N -ngl N [-ts a,b] [-ot "pattern=BUFT,…"]" (tools/fit-params/fit-params.cpp:44-68)
//	  and with --fit-print on, "CUDA0 model context compute" and "Host …" in whole MiB (common/fit.cpp:971-984), after
//	  "printing estimated memory in MiB to stdout (device, model, context, compute) ..." (fit-params.cpp:70)
//
// From b9161 (67b2b7f2f, "logs : reduce") llama's info lines are trace
// level (common/log.cpp:449-460) and the default verbosity is 3
// (common/common.h:524): the load's lines above need -lv 4.

// engineLlamaCpp is a llama.cpp log's EngineLog.Engine (the plan's section).
const engineLlamaCpp = "llama_cpp"

// llama.cpp's figures. A buffer's figure names its buffer (Device: CUDA0,
// CPU_Mapped, CUDA_Host, Host); the fit's and the breakdown's a device.
const (
	LogModelBuffer   = "model_buffer"       // "model buffer size", per buffer, summed
	LogKVBuffer      = "kv_buffer"          // "KV buffer size", per buffer, summed (SWA and not)
	LogRSBuffer      = "rs_buffer"          // "RS buffer size": recurrent state
	LogComputeBuffer = "compute_buffer"     // "compute buffer size": not modelled
	LogKVSize        = "kv_size"            // the cache's "size = X MiB", "KV self size", summed
	LogKVCells       = "kv_cells"           // "N cells" of the first cache, kv_size = N
	LogSWACells      = "swa_cells"          // "creating SWA KV cache, size = N cells"
	LogNCtx          = "n_ctx"              // llama_context: n_ctx
	LogNCtxSeq       = "n_ctx_seq"          // n_ctx_seq (n_ctx_per_seq before b10573)
	LogNSeqMax       = "n_seq_max"          // n_seq_max
	LogOffloaded     = "layers_offloaded"   // the N of "offloaded N/M layers to GPU"
	LogOffloadable   = "layers_offloadable" // the M
	LogSlots         = "n_slots"            // llama-server's slots
	LogCtxSlot       = "n_ctx_slot"         // a slot's context
	// The memory breakdown, whole MiB.
	LogBreakdownModel   = "breakdown_model"
	LogBreakdownContext = "breakdown_context"
	LogBreakdownCompute = "breakdown_compute"
	// The fit: llama-fit-params' line, its --fit-print rows and its log.
	LogFitCtx          = "fit_ctx"           // -c (0: the context left as it was)
	LogFitNGL          = "fit_ngl"           // -ngl
	LogFitSplit        = "fit_tensor_split"  // -ts, a device's layers
	LogFitOverrides    = "fit_overrides"     // how many -ot patterns
	LogFitPrintModel   = "fit_print_model"   // --fit-print on: the settings' projection
	LogFitPrintContext = "fit_print_context" //
	LogFitPrintCompute = "fit_print_compute" //
	LogFitProjected    = "fit_projected"     // step 1: "projected to use X MiB" (Device ""), a device's "U used"
	LogFitCtxReduced   = "fit_ctx_reduced"   // "context size reduced from A to B"
	LogFitLayers       = "fit_layers"        // a device's layers as the fit left them
	LogFitUsed         = "fit_used"          // its projected MiB
)

// WholeMiB reports whether a llama.cpp figure is printed in whole MiB
// (rounded down) rather than to hundredths.
func WholeMiB(what string) bool {
	switch what {
	case LogFreeAtStart, LogBreakdownModel, LogBreakdownContext, LogBreakdownCompute,
		LogFitPrintModel, LogFitPrintContext, LogFitPrintCompute, LogFitProjected, LogFitUsed:
		return true
	}
	return false
}

const (
	lcFunc       = `\b(?:llama_\w+|llm_load_tensors|load_tensors|sched_reserve|graph_reserve): +`
	lcFitFunc    = `\b(?:llama|common)_params_fit_impl: `
	maxLogDevice = 64 // buffers or devices a figure is read for
)

var (
	lcBuild      = regexp.MustCompile(`\bbuild:? ([0-9]+) \(([0-9a-f]{4,40}|unknown)\) with |\bbuild = ([0-9]+) \(([0-9a-f]{4,40})\)|^version: ([0-9]+) \(([0-9a-f]{4,40})\)|^version: \S+ \(build ([0-9]+), commit ([0-9a-f]{4,40}|unknown)\)`)
	lcVerbosity  = regexp.MustCompile(`\bcommon_params_print_info: verbosity = ([0-9]+)`)
	lcFree       = regexp.MustCompile(`\bllama_model_load_from_file\w*: using device (\S+) \(.*\) - ([0-9]+) MiB free`)
	lcOffloaded  = regexp.MustCompile(`\b(?:llm_)?load_tensors: offloaded ([0-9]+)/([0-9]+) layers to GPU`)
	lcBuffer     = regexp.MustCompile(lcFunc + `(\S+) (model|KV|RS|compute) buffer size = +([0-9]+\.[0-9]+) MiB`)
	lcKVSize     = regexp.MustCompile(`\bllama_kv_cache\w*: size = +([0-9]+\.[0-9]+) MiB \( *([0-9]+) cells, +[0-9]+ layers, +[0-9]+/[0-9]+ seqs\)`)
	lcKVSelf     = regexp.MustCompile(lcFunc + `KV self size += +([0-9]+\.[0-9]+) MiB`)
	lcKVInit     = regexp.MustCompile(`\bllama_kv_cache_init: kv_size = ([0-9]+), `)
	lcISWA       = regexp.MustCompile(`\bllama_kv_cache\w*: creating +(non-SWA|SWA) KV cache, size = ([0-9]+) cells`)
	lcContext    = regexp.MustCompile(`\b(?:llama_context|llama_new_context_with_model|llama_init_from_model): (n_seq_max|n_ctx|n_ctx_seq|n_ctx_per_seq) += ([0-9]+)\s*$`)
	lcSlots      = regexp.MustCompile(`\binitializing, n_slots = ([0-9]+), n_ctx_slot = ([0-9]+)`)
	lcTable      = regexp.MustCompile(`\b\w+_memory_breakdown_print: \| memory breakdown \[MiB\]`)
	lcTableGPU   = regexp.MustCompile(`\b\w+_memory_breakdown_print: \|\s+- (\S+) \(.*\)\s+\|\s*[0-9]+ = +[0-9]+ \+ \(\s*[0-9]+ = +([0-9]+) \+ +([0-9]+) \+ +([0-9]+)\) \+ +-?[0-9]+ \|`)
	lcTableOther = regexp.MustCompile(`\b\w+_memory_breakdown_print: \|\s+- (\S+)\s+\|\s+[0-9]+ = +([0-9]+) \+ +([0-9]+) \+ +([0-9]+)\s+\|`)
	lcFitLine    = regexp.MustCompile(`^-c ([0-9]+) -ngl (-?[0-9]+)(?: -ts ([0-9]+(?:,[0-9]+)*))?(?: -ot ("?)([^"\s]+)("?))?\s*$`)
	lcFitPrint   = regexp.MustCompile(`printing estimated memory in MiB to stdout \(device, model, context, compute\)`)
	lcFitRow     = regexp.MustCompile(`^([A-Za-z][\w.-]*) ([0-9]+) ([0-9]+) ([0-9]+) ?$`)
	lcFitUse     = regexp.MustCompile(lcFitFunc + `projected to use ([0-9]+) MiB of device memory vs\. [0-9]+ MiB of free device memory`)
	lcFitDevUse  = regexp.MustCompile(lcFitFunc + `\s+- (\S+) \(.*\): +[0-9]+ total, +([0-9]+) used, +-?[0-9]+ free vs\. target of`)
	lcFitReduced = regexp.MustCompile(lcFitFunc + `context size reduced from [0-9]+ to ([0-9]+)`)
	lcFitDevice  = regexp.MustCompile(lcFitFunc + `\s+- (\S+) \(.*\): +([0-9]+) layers(?: \( *[0-9]+ overflowing\))?, +([0-9]+) MiB used, +-?[0-9]+ MiB free`)
	lcFitEnd     = regexp.MustCompile(`: fitting params to free memory took [0-9.]+ seconds`)
)

// lcKey is a figure and the buffer or device it is of.
type lcKey struct{ what, device string }

// lcReader reads a llama.cpp log line by line. The load's figures are
// those of the model's one load: lines the fit's dry runs printed before
// "fitting params to free memory took" (at -lv 5) are dropped, and a
// second model's load (a draft model) after the first context is made is
// not read.
type lcReader struct {
	figs      map[lcKey]*LogFigure
	order     []lcKey
	ctxMade   int // line of the load's first compute buffer (0: none yet)
	second    int // line where a second model's load began
	dropped   int // load figures the fit's dry runs printed, dropped
	table     int // line of the memory breakdown read (0: none)
	inTable   bool
	printMark bool        // llama-fit-params' --fit-print marker seen
	rows      []LogFigure // --fit-print rows, kept if the marker is seen or the whole text is rows
	other     bool        // a non-blank line that is no --fit-print row
	verbosity int         // common_params_print_info's verbosity (-1: not printed)
	any       bool        // a llama.cpp line was seen
}

func newLCReader() *lcReader { return &lcReader{figs: map[lcKey]*LogFigure{}, verbosity: -1} }

// loadKinds are the figures of the load (dropped with the dry runs).
var loadKinds = map[string]bool{LogModelBuffer: true, LogKVBuffer: true, LogRSBuffer: true, LogComputeBuffer: true, LogKVSize: true,
	LogKVCells: true, LogSWACells: true, LogNCtx: true, LogNCtxSeq: true, LogNSeqMax: true, LogOffloaded: true, LogOffloadable: true,
	LogFreeAtStart: true, LogBreakdownModel: true, LogBreakdownContext: true, LogBreakdownCompute: true}

// how a figure printed again is read: summed (a buffer type's buffers,
// a cache's two halves), the last kept (the fit's device lines, its final
// choice last), else the first kept.
const (
	lcFirst = iota
	lcSum
	lcLast
)

// put records a figure: bytes or a count, how a repeat is read.
func (r *lcReader) put(what, device string, line int, b vram.Bytes, count float64, how int) {
	r.any = true
	if loadKinds[what] && r.second > 0 && what != LogBreakdownModel && what != LogBreakdownContext && what != LogBreakdownCompute {
		return
	}
	k := lcKey{what, device}
	f, ok := r.figs[k]
	if !ok {
		if len(r.order) >= maxLogDevice*32 {
			return
		}
		n := 0
		for _, o := range r.order {
			if o.what == what {
				n++
			}
		}
		if n >= maxLogDevice {
			return
		}
		r.figs[k] = &LogFigure{What: what, Device: device, Bytes: b, Count: count, Line: line}
		r.order = append(r.order, k)
		return
	}
	switch how {
	case lcSum:
		f.Bytes += b
		f.Count += count
	case lcLast:
		f.Bytes, f.Count, f.Line = b, count, line
	}
}

// dropLoad drops the load's figures read so far: they were the fit's dry
// runs'.
func (r *lcReader) dropLoad() {
	keep := r.order[:0]
	for _, k := range r.order {
		if loadKinds[k.what] {
			delete(r.figs, k)
			r.dropped++
			continue
		}
		keep = append(keep, k)
	}
	r.order, r.ctxMade, r.second, r.table, r.inTable = keep, 0, 0, 0, false
}

func mib(s string) vram.Bytes {
	v, _ := strconv.ParseFloat(s, 64)
	return vram.Bytes(v * (1 << 20))
}

func atof(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

// match is re's submatches in s, tried only where s holds word: the
// patterns are slow next to a substring search, and a log is up to
// 16 MiB.
func match(s, word string, re *regexp.Regexp) []string {
	if !strings.Contains(s, word) {
		return nil
	}
	return re.FindStringSubmatch(s)
}

// read adds what line n says.
func (r *lcReader) read(l *EngineLog, s string, n int) {
	trimmed := strings.TrimSpace(s)
	if strings.HasPrefix(trimmed, "-c ") || strings.Count(trimmed, " ") == 3 || strings.Contains(s, "printing estimated memory") {
		if r.readFitOutput(l, s, trimmed, n) {
			return
		}
	}
	if trimmed != "" {
		r.other = true
	}
	if r.readBuild(l, s, n) || r.readFit(s, n) || r.readTable(s, n) || r.readLoad(s, n) {
		r.any = true
	}
	if r.any && l.Engine == "" {
		l.Engine = engineLlamaCpp // the other engines' patterns are not tried on it
	}
}

// readBuild reads the build line and the verbosity line.
func (r *lcReader) readBuild(l *EngineLog, s string, n int) bool {
	m := match(s, "build", lcBuild)
	if m == nil {
		m = match(s, "version: ", lcBuild)
	}
	if m != nil {
		if l.Version == "" {
			for i := 1; i < len(m); i += 2 {
				if m[i] != "" {
					l.Version, l.Commit = "b"+m[i], m[i+1]
					break
				}
			}
		}
		return true
	}
	if m := match(s, "verbosity = ", lcVerbosity); m != nil {
		r.verbosity, _ = strconv.Atoi(m[1])
		return true
	}
	return false
}

// readFitOutput reads llama-fit-params' stdout: its line and its
// --fit-print rows.
func (r *lcReader) readFitOutput(l *EngineLog, s, trimmed string, n int) bool {
	if m := lcFitLine.FindStringSubmatch(trimmed); m != nil {
		if l.FitArgs == "" {
			l.FitArgs, l.FitArgsLine = trimmed, n
			r.put(LogFitCtx, "", n, 0, atof(m[1]), lcFirst)
			r.put(LogFitNGL, "", n, 0, atof(m[2]), lcFirst)
			if m[3] != "" {
				for i, x := range strings.Split(m[3], ",") {
					r.put(LogFitSplit, "CUDA"+strconv.Itoa(i), n, 0, atof(x), lcFirst)
				}
			}
			if m[5] != "" {
				r.put(LogFitOverrides, "", n, 0, float64(strings.Count(m[5], "=")), lcFirst)
			}
		}
		return true
	}
	if lcFitPrint.MatchString(s) {
		r.printMark, r.any = true, true
		return true
	}
	if m := lcFitRow.FindStringSubmatch(trimmed); m != nil && m[0] == trimmed && len(r.rows) < 3*maxLogDevice {
		for i, what := range []string{LogFitPrintModel, LogFitPrintContext, LogFitPrintCompute} {
			r.rows = append(r.rows, LogFigure{What: what, Device: m[1], Bytes: mib(m[2+i]), Line: n})
		}
		return true
	}
	return false
}

// readFit reads the fit's own log lines (trace level at b10573).
func (r *lcReader) readFit(s string, n int) bool {
	if match(s, "fitting params to free memory took", lcFitEnd) != nil {
		if len(r.order) > 0 {
			r.dropLoad()
		}
		return true
	}
	if !strings.Contains(s, "_params_fit_impl: ") {
		return false
	}
	if m := lcFitUse.FindStringSubmatch(s); m != nil {
		r.put(LogFitProjected, "", n, mib(m[1]), 0, lcFirst)
		return true
	}
	if m := lcFitDevUse.FindStringSubmatch(s); m != nil {
		r.put(LogFitProjected, m[1], n, mib(m[2]), 0, lcFirst)
		return true
	}
	if m := lcFitReduced.FindStringSubmatch(s); m != nil {
		r.put(LogFitCtxReduced, "", n, 0, atof(m[1]), lcFirst)
		return true
	}
	if m := lcFitDevice.FindStringSubmatch(s); m != nil {
		r.put(LogFitLayers, m[1], n, 0, atof(m[2]), lcLast)
		r.put(LogFitUsed, m[1], n, mib(m[3]), 0, lcLast)
		return true
	}
	return false
}

// readTable reads the first memory breakdown of the load.
func (r *lcReader) readTable(s string, n int) bool {
	if !strings.Contains(s, "_memory_breakdown_print: |") {
		return false
	}
	if lcTable.MatchString(s) {
		r.inTable = r.table == 0
		if r.inTable {
			r.table = n
		}
		return true
	}
	m := lcTableGPU.FindStringSubmatch(s)
	if m == nil {
		m = lcTableOther.FindStringSubmatch(s)
	}
	if m == nil {
		return false
	}
	if r.inTable {
		for i, what := range []string{LogBreakdownModel, LogBreakdownContext, LogBreakdownCompute} {
			r.put(what, m[1], n, mib(m[2+i]), 0, lcFirst)
		}
	}
	return true
}

// readLoad reads the load's lines: the devices, the layers, the buffers,
// the context and the cache.
func (r *lcReader) readLoad(s string, n int) bool {
	if m := match(s, " buffer size = ", lcBuffer); m != nil {
		what := map[string]string{"model": LogModelBuffer, "KV": LogKVBuffer, "RS": LogRSBuffer, "compute": LogComputeBuffer}[m[2]]
		switch {
		case what == LogModelBuffer && r.ctxMade > 0 && r.second == 0:
			r.second = n // a second model (a draft) begins
		case what == LogComputeBuffer && r.ctxMade == 0:
			r.ctxMade = n
		}
		r.put(what, m[1], n, mib(m[3]), 0, lcSum)
		return true
	}
	if m := match(s, "offloaded ", lcOffloaded); m != nil {
		if r.ctxMade > 0 && r.second == 0 {
			r.second = n
		}
		r.put(LogOffloaded, "", n, 0, atof(m[1]), lcFirst)
		r.put(LogOffloadable, "", n, 0, atof(m[2]), lcFirst)
		return true
	}
	if m := match(s, "MiB free", lcFree); m != nil {
		r.put(LogFreeAtStart, m[1], n, mib(m[2]), 0, lcFirst)
		return true
	}
	return r.readCache(s, n)
}

// readCache reads the cache's and the context's lines.
func (r *lcReader) readCache(s string, n int) bool {
	if m := match(s, " cells, ", lcKVSize); m != nil {
		r.put(LogKVSize, "", n, mib(m[1]), 0, lcSum)
		r.put(LogKVCells, "", n, 0, atof(m[2]), lcFirst)
		return true
	}
	if m := match(s, "KV self size", lcKVSelf); m != nil {
		r.put(LogKVSize, "", n, mib(m[1]), 0, lcSum)
		return true
	}
	if m := match(s, "kv_size = ", lcKVInit); m != nil {
		r.put(LogKVCells, "", n, 0, atof(m[1]), lcFirst)
		return true
	}
	if m := match(s, " KV cache, size = ", lcISWA); m != nil {
		what := LogKVCells
		if m[1] == "SWA" {
			what = LogSWACells
		}
		r.put(what, "", n, 0, atof(m[2]), lcFirst)
		return true
	}
	if m := match(s, ": n_", lcContext); m != nil {
		what := map[string]string{"n_seq_max": LogNSeqMax, "n_ctx": LogNCtx, "n_ctx_seq": LogNCtxSeq, "n_ctx_per_seq": LogNCtxSeq}[m[1]]
		r.put(what, "", n, 0, atof(m[2]), lcFirst)
		return true
	}
	if m := match(s, "n_slots = ", lcSlots); m != nil {
		r.put(LogSlots, "", n, 0, atof(m[1]), lcFirst)
		r.put(LogCtxSlot, "", n, 0, atof(m[2]), lcFirst)
		return true
	}
	return false
}

// finish writes the figures read into l, in the order of their lines,
// with what was passed over.
func (r *lcReader) finish(l *EngineLog) {
	if len(r.rows) > 0 && (r.printMark || !r.other) {
		for _, f := range r.rows {
			r.put(f.What, f.Device, f.Line, f.Bytes, 0, lcFirst)
		}
	}
	if !r.any {
		return
	}
	if l.Engine == "" {
		l.Engine = engineLlamaCpp
	}
	if l.Engine != engineLlamaCpp {
		return
	}
	for _, k := range r.order {
		l.Figures = append(l.Figures, *r.figs[k])
	}
	slices.SortStableFunc(l.Figures, func(a, b LogFigure) int { return a.Line - b.Line })
	if r.dropped > 0 {
		l.Notes = append(l.Notes, fmt.Sprintf("%d load figures printed by the fit's dry runs (before its \"fitting params to free memory took\" line) are not read: they size its candidates", r.dropped))
	}
	if r.second > 0 {
		l.Notes = append(l.Notes, fmt.Sprintf("a second model's load from line %d (a draft model) is not read: the figures are the first model's", r.second))
	}
	if _, ok := l.Figure(LogModelBuffer); !ok && r.verbosity >= 0 && r.verbosity < 4 {
		l.Notes = append(l.Notes, fmt.Sprintf("the log is at verbosity %d: from b9161 (#23021) llama.cpp prints its load lines (buffers, context, cache) at trace level, 4: run it with -lv 4", r.verbosity))
	}
}
