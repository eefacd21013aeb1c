package importer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/internal/pyconf"
)

// An engine's startup log says what it took of the GPU. ReadEngineLog
// reads the figures vLLM and SGLang print, as each release prints them
// (file:line at that release):
//
//	vLLM 0.33.0: "Model loading took 14.99 GiB memory and 5.2 seconds" (v1/worker/gpu_model_runner.py:5089),
//	  "Available KV cache memory: 52.34 GiB" (v1/worker/gpu_worker.py:773),
//	  "GPU KV cache size: 428,768 tokens, Maximum concurrency for 8,192 tokens per request: 52.34x"
//	  (v1/core/kv_cache_utils.py:1149, one line), "Graph capturing finished in 7 secs, took 0.53 GiB"
//	  (v1/worker/gpu_model_runner.py:6517), "vLLM server version 0.33.0, serving model …"
//	  (entrypoints/common/startup.py:18), "non-default args: {…}" (entrypoints/common/startup.py:96).
//	vLLM 0.14.1: the same words; loading gpu_model_runner.py:3906, available gpu_worker.py:359, tokens
//	  and concurrency kv_cache_utils.py:1305 and :1311 (two lines), graphs gpu_model_runner.py:4857,
//	  "vLLM API server version" entrypoints/openai/api_server.py:1272, args entrypoints/utils.py:263.
//	vLLM 0.11.0: "Model loading took 14.9878 GiB and 5.1 seconds" (v1/worker/gpu_model_runner.py:2653),
//	  available v1/worker/gpu_worker.py:298, tokens and concurrency v1/core/kv_cache_utils.py:1087 and
//	  :1091, "vLLM API server version" entrypoints/openai/api_server.py:1839, args entrypoints/utils.py:233.
//	SGLang 0.5.23: "Load weight end. … avail mem=60.12 GB, mem usage=15.01 GB."
//	  (srt/model_executor/model_runner.py:1373), "KV Cache is allocated. dtype: torch.bfloat16, #tokens:
//	  412345, K size: 25.2 GB, V size: 25.2 GB" (srt/mem_cache/memory_pool.py:2088), "max_total_num_tokens=
//	  412345, chunked_prefill_size=8192, …, max_running_requests=4096, context_len=131072,
//	  available_gpu_mem=6.21 GB" (srt/managers/scheduler.py:1269), "Capture target decode CUDA graph end.
//	  … mem usage=0.61 GB, avail mem=5.6 GB." (model_runner_components/cuda_graph_setup.py:788).
//	SGLang 0.5.3: "Load weight end. …" (srt/model_executor/model_runner.py:837), "KV Cache is allocated.
//	  #tokens: …, K size: …" (srt/mem_cache/memory_pool.py:362), "max_total_num_tokens=…"
//	  (srt/managers/scheduler.py:497), "Capture cuda graph end. Time elapsed: … mem usage=0.61 GB."
//	  (srt/model_executor/model_runner.py:1848).
//	SGLang's args: "server_args=ServerArgs(…)" (0.5.3 srt/entrypoints/engine.py:768) and
//	  "server_args={…}" (0.5.23 srt/entrypoints/engine.py:1185), read as enginelog_sglang.go says.
//
// The first capture a log prints is read. vLLM's GiB are 2³⁰ bytes and
// SGLang's GB are too (its GB constant is 1024³, memory_pool.py); both
// round to two decimals (vLLM 0.11.0's loading line to four), so a figure
// read is good to half a hundredth of a GiB. A figure printed again (by
// another tensor-parallel rank) keeps its first value.

// MaxEngineLog is the most of a log ReadEngineLog reads; MaxLogLine the
// longest line it looks into (longer lines are passed over).
const (
	MaxEngineLog = 16 << 20
	MaxLogLine   = 1 << 20
)

// EngineLog is what an engine's startup log said.
type EngineLog struct {
	Engine  string `json:"engine"`            // "vllm", "sglang" or "llama_cpp"
	Version string `json:"version,omitempty"` // the release the log names (llama.cpp: its build, "b10573")
	Commit  string `json:"commit,omitempty"`  // llama.cpp: the build's commit
	// Figures are what the log printed, by what (LogFigure's constants).
	Figures []LogFigure `json:"figures"`
	// Errors are the log's out-of-memory and cache-sizing failures.
	Errors []string `json:"errors,omitempty"`
	// Args are the engine's args as the command line they stand for (to
	// import): vLLM's non-default args as `vllm serve …`, SGLang's
	// server_args as `python -m sglang.launch_server …` (enginelog_sglang.go).
	Args string `json:"args,omitempty"`
	// ArgsDefaults is the SGLang release whose defaults its server_args
	// were read against, by the line's form ("0.5.3", "0.5.23").
	ArgsDefaults string `json:"args_defaults,omitempty"`
	// ArgsError says why the log's args line could not be read.
	ArgsError string `json:"args_error,omitempty"`
	// StartupPlan is the fingerprint of a vLLM startup plan read in place
	// of a log (startupplan.go).
	StartupPlan string `json:"startup_plan,omitempty"`
	// FitArgs is llama-fit-params' line ("-c N -ngl N …") and FitArgsLine
	// its line (enginelog_llamacpp.go).
	FitArgs     string `json:"fit_args,omitempty"`
	FitArgsLine int    `json:"fit_args_line,omitempty"`
	// Notes say what the reader passed over, and why.
	Notes []string `json:"notes,omitempty"`
}

// LogFigure is one figure a log printed.
type LogFigure struct {
	What  string     `json:"what"`            // a LogWeights… constant
	Bytes vram.Bytes `json:"bytes,omitempty"` // a memory figure
	Count float64    `json:"count,omitempty"` // tokens, requests, a concurrency
	Line  int        `json:"line"`            // the log's line
	// Device is the buffer or device a llama.cpp figure is of (CUDA0,
	// CPU_Mapped, CUDA_Host, Host); empty for the others.
	Device string `json:"device,omitempty"`
}

// The figures a log prints.
const (
	LogWeights        = "weights"          // vLLM "Model loading took", SGLang "Load weight end … mem usage"
	LogKVCache        = "kv_cache"         // vLLM "Available KV cache memory", SGLang K size + V size
	LogKVTokens       = "kv_tokens"        // vLLM "GPU KV cache size", SGLang max_total_num_tokens
	LogMaxConcurrency = "max_concurrency"  // vLLM "Maximum concurrency for N tokens per request"
	LogMaxModelLen    = "max_model_len"    // the N of that line
	LogCUDAGraphs     = "cuda_graphs"      // vLLM "Graph capturing finished", SGLang "Capture cuda graph end"
	LogMaxRunning     = "max_running_reqs" // SGLang max_running_requests
	LogAvailAfter     = "available_after"  // SGLang available_gpu_mem once the pools are made
	// vLLM's --kv-cache-memory suggestion line (0.33 at info level; 0.11
	// and 0.14.1 at debug level) and its startup plan (startupplan.go).
	LogFreeAtStart    = "free_at_start"                 // "Free memory on device (X/Y GiB) on startup", free_memory_baseline
	LogSuggestedKV    = "suggested_kv_cache_memory"     // the first `--kv-cache-memory=N`, kv_cache_memory_bytes
	LogSuggestedKVGPU = "suggested_kv_cache_memory_gpu" // the second, "to fully utilize gpu memory"
	LogConsumed       = "consumed"                      // 0.33 "GiB for consumed memory (weights + non-torch)"
	LogPeakActivation = "peak_activation"               // "GiB for peak activation"
	LogNonTorch       = "non_torch"                     // 0.11 and 0.14.1 "GiB for non-torch memory"
)

var (
	ansi        = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	gib         = `([0-9]+(?:\.[0-9]+)?)`
	count       = `([0-9][0-9,]*)`
	logPatterns = []struct {
		engine, what string
		re           *regexp.Regexp
	}{
		{"vllm", LogWeights, regexp.MustCompile(`Model loading took ` + gib + ` GiB`)},
		{"vllm", LogKVCache, regexp.MustCompile(`Available KV cache memory: ` + gib + ` GiB`)},
		{"vllm", LogKVTokens, regexp.MustCompile(`\bKV cache size: ` + count + ` tokens`)},
		{"vllm", LogMaxModelLen, regexp.MustCompile(`Maximum concurrency for ` + count + ` tokens per request`)},
		{"vllm", LogMaxConcurrency, regexp.MustCompile(`tokens per request: ` + gib + `x`)},
		{"vllm", LogCUDAGraphs, regexp.MustCompile(`Graph capturing finished in [0-9]+ secs?, took ` + gib + ` GiB`)},
		{"vllm", LogFreeAtStart, regexp.MustCompile(`Free memory on device \(` + gib + `/` + gib + ` GiB\) on startup`)},
		{"vllm", LogConsumed, regexp.MustCompile(`Actual usage is ` + gib + ` GiB for consumed memory`)},
		{"vllm", LogPeakActivation, regexp.MustCompile(` ` + gib + ` GiB for peak activation`)},
		{"vllm", LogNonTorch, regexp.MustCompile(` ` + gib + ` GiB for non-torch memory`)},
		{"vllm", LogSuggestedKV, regexp.MustCompile(`Applying persisted startup plan \(fingerprint [0-9a-f]+\): kv_cache_memory_bytes=([0-9]+)`)},
		{"sglang", LogWeights, regexp.MustCompile(`Load weight end\..*mem usage=` + gib + ` GB`)},
		{"sglang", LogKVTokens, regexp.MustCompile(`\bmax_total_num_tokens=` + count + `, chunked_prefill_size`)},
		{"sglang", LogMaxRunning, regexp.MustCompile(`\bmax_running_requests=` + count)},
		{"sglang", LogAvailAfter, regexp.MustCompile(`available_gpu_mem=` + gib + ` GB`)},
		{"sglang", LogCUDAGraphs, regexp.MustCompile(`Capture [^.]*graph end\..*mem usage=` + gib + ` GB`)},
	}
	vllmSuggest = regexp.MustCompile("`--kv-cache-memory=([0-9]+)`[^`]*to fit into requested memory, or `--kv-cache-memory=(-?[0-9]+)`")
	sglangKV    = regexp.MustCompile(`KV Cache is allocated\..*#tokens: ` + count + `, (?:K size: ` + gib + ` GB, V size: ` + gib + ` GB|KV size: ` + gib + ` GB)`)
	vllmVersion = regexp.MustCompile(`vLLM (?:API )?server version ([0-9][0-9A-Za-z.+-]*)|█.*\bversion\s+([0-9][0-9A-Za-z.+-]*)`)
	vllmArgs    = regexp.MustCompile(`non-default args: (\{.*\})\s*$`)
	sglangArgs  = regexp.MustCompile(`\bserver_args=([A-Za-z_]\w*\(.*|\{.*)$`)
	logFailures = regexp.MustCompile(`(CUDA out of memory|OutOfMemoryError|No available memory for the cache blocks|larger than the available KV cache memory|Not enough memory|` +
		`cudaMalloc failed: out of memory|failed to allocate (?:buffer|compute|graph)|failed to load model|failed to create context|failed to fit params to free device memory|failed to fit CLI arguments)`)
	maxLogErrors = 5
)

// ReadEngineLog reads a vLLM, SGLang or llama.cpp startup log, or
// llama-fit-params' output (at most MaxEngineLog bytes). A log with none
// of the figures is refused, saying what was looked for.
func ReadEngineLog(data []byte) (EngineLog, error) {
	if len(data) > MaxEngineLog {
		return EngineLog{}, fmt.Errorf("log: %d bytes, more than the %d read (give the startup: the lines up to the first request)", len(data), MaxEngineLog)
	}
	if isStartupPlan(data) {
		return readStartupPlan(data)
	}
	var l EngineLog
	seen := map[string]bool{}
	lc := newLCReader()
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxLogLine)
	for n := 1; ; n++ {
		if !sc.Scan() {
			if errors.Is(sc.Err(), bufio.ErrTooLong) {
				return l, fmt.Errorf("log: line %d is longer than %d bytes; an engine's log lines are not", n, MaxLogLine)
			}
			break
		}
		s := ansi.ReplaceAllString(sc.Text(), "")
		l.readLine(s, n, seen)
		if l.Engine == "" || l.Engine == engineLlamaCpp {
			lc.read(&l, s, n)
		}
	}
	lc.finish(&l)
	if len(l.Figures) == 0 && len(l.Errors) == 0 {
		msg := `log: none of the lines vLLM or SGLang print at startup ("Model loading took", "Available KV cache memory", "GPU KV cache size", "Load weight end", "KV Cache is allocated", "max_total_num_tokens=") ` +
			`nor llama.cpp's ("load_tensors: CUDA0 model buffer size", "KV buffer size", "compute buffer size", "offloaded N/M layers to GPU", llama-fit-params' "-c N -ngl N") is in it`
		if lc.verbosity >= 0 && lc.verbosity < 4 {
			msg += fmt.Sprintf("; llama.cpp printed it at verbosity %d: from b9161 (#23021) its load lines are trace level: run it with -lv 4", lc.verbosity)
		}
		return l, errors.New(msg)
	}
	return l, nil
}

// readLine adds what line n says.
func (l *EngineLog) readLine(s string, n int, seen map[string]bool) {
	if m := vllmVersion.FindStringSubmatch(s); m != nil && l.Version == "" {
		l.Engine, l.Version = "vllm", m[1]+m[2]
	}
	if m := vllmArgs.FindStringSubmatch(s); m != nil && l.Args == "" && l.ArgsError == "" {
		l.Engine = "vllm"
		if args, err := serveArgs(m[1]); err != nil {
			l.ArgsError = fmt.Sprintf("line %d: %v", n, err)
		} else {
			l.Args = args
		}
	}
	if m := sglangArgs.FindStringSubmatch(s); m != nil {
		if l.Args == "" && l.ArgsError == "" {
			l.Engine = "sglang"
			if args, release, err := sglangServerArgs(m[1]); err != nil {
				l.ArgsError = fmt.Sprintf("line %d: %v", n, err)
			} else {
				l.Args, l.ArgsDefaults = args, release
			}
		}
		return // its fields (0.5.3's max_running_requests=…) are no figures
	}
	if m := logFailures.FindString(s); m != "" && len(l.Errors) < maxLogErrors {
		l.Errors = append(l.Errors, fmt.Sprintf("line %d: %s", n, strings.TrimSpace(truncate(s, 300))))
	}
	if m := vllmSuggest.FindStringSubmatch(s); m != nil && !seen[LogSuggestedKV] {
		kv, ok1 := intBytes(m[1])
		gpu, ok2 := intBytes(m[2])
		if ok1 && ok2 {
			seen[LogSuggestedKV], seen[LogSuggestedKVGPU], l.Engine = true, true, "vllm"
			l.Figures = append(l.Figures, LogFigure{What: LogSuggestedKV, Bytes: kv, Line: n}, LogFigure{What: LogSuggestedKVGPU, Bytes: gpu, Line: n})
		}
	}
	if m := sglangKV.FindStringSubmatch(s); m != nil && !seen[LogKVCache] {
		seen[LogKVCache], l.Engine = true, "sglang"
		kv := gibBytes(m[2]) + gibBytes(m[3]) + gibBytes(m[4])
		l.Figures = append(l.Figures, LogFigure{What: LogKVCache, Bytes: kv, Line: n})
	}
	for _, p := range logPatterns {
		m := p.re.FindStringSubmatch(s)
		if m == nil || seen[p.what] || (l.Engine != "" && l.Engine != p.engine) {
			continue
		}
		seen[p.what], l.Engine = true, p.engine
		f := LogFigure{What: p.what, Line: n}
		switch p.what {
		case LogKVTokens, LogMaxModelLen, LogMaxRunning, LogMaxConcurrency:
			f.Count, _ = strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
		case LogSuggestedKV:
			var ok bool
			if f.Bytes, ok = intBytes(m[1]); !ok { // a byte count
				continue
			}
		default:
			f.Bytes = gibBytes(m[1])
		}
		l.Figures = append(l.Figures, f)
	}
}

// Figure is the figure what, if the log printed it.
func (l EngineLog) Figure(what string) (LogFigure, bool) {
	i := slices.IndexFunc(l.Figures, func(f LogFigure) bool { return f.What == what })
	if i < 0 {
		return LogFigure{}, false
	}
	return l.Figures[i], true
}

// intBytes is a byte count as printed (a suggestion can be negative);
// false for one no int64 holds.
func intBytes(s string) (vram.Bytes, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	return vram.Bytes(v), err == nil
}

// IsBytes tells a memory figure from a count.
func IsBytes(what string) bool {
	switch what {
	case LogKVTokens, LogMaxConcurrency, LogMaxModelLen, LogMaxRunning,
		LogKVCells, LogSWACells, LogNCtx, LogNCtxSeq, LogNSeqMax, LogOffloaded, LogOffloadable, LogSlots, LogCtxSlot,
		LogFitCtx, LogFitNGL, LogFitSplit, LogFitOverrides, LogFitCtxReduced, LogFitLayers:
		return false
	}
	return true
}

func gibBytes(s string) vram.Bytes {
	if s == "" {
		return 0
	}
	v, _ := strconv.ParseFloat(s, 64)
	return vram.Bytes(v * (1 << 30))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// serveArgs turns vLLM's non-default args (a Python dict's repr) into the
// serve command line they came from: vllm serve MODEL --key value …
// (vllm/entrypoints/common/startup.py get_non_default_args: the
// EngineArgs fields that differ from their defaults, by field name).
func serveArgs(dict string) (string, error) {
	m, err := pyconf.Parse([]byte("def f():\n    return " + dict + "\n"))
	if err != nil {
		return "", fmt.Errorf("non-default args: %v", err)
	}
	v, _, err := m.Run("f")
	if err != nil {
		return "", fmt.Errorf("non-default args: %v", err)
	}
	args, ok := v.(map[string]any)
	if !ok {
		return "", errors.New("non-default args: not a dict")
	}
	model, _ := args["model"].(string)
	if model == "" {
		model, _ = args["model_tag"].(string)
	}
	if model == "" {
		return "", errors.New("non-default args: no model")
	}
	out := []string{"vllm", "serve", shellQuote(model)}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if k == "model" || k == "model_tag" || k == "subparser" || k == "dispatch_function" {
			continue
		}
		flag := "--" + strings.ReplaceAll(k, "_", "-")
		switch x := args[k].(type) {
		case nil:
		case bool:
			if x {
				out = append(out, flag)
			} else {
				out = append(out, "--no-"+flag[2:])
			}
		case string:
			out = append(out, flag, shellQuote(x))
		case map[string]any, []any:
			b, err := json.Marshal(x)
			if err == nil {
				out = append(out, flag, shellQuote(string(b)))
			}
		default:
			out = append(out, flag, shellQuote(fmt.Sprint(x)))
		}
	}
	return strings.Join(out, " "), nil
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
