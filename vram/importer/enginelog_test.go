package importer

import (
	"os"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// Logs written as the releases' format strings print them (enginelog.go
// cites each).
const (
	vllm033Log = "\x1b[1;36m(EngineCore_DP0 pid=811)\x1b[0;0m INFO 12-01 10:00:00 [startup.py:20] vLLM server version 0.33.0, serving model meta-llama/Llama-3.1-8B-Instruct\n" +
		"INFO 12-01 10:00:00 [startup.py:96] non-default args: {'model_tag': 'meta-llama/Llama-3.1-8B-Instruct', 'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 8192, 'gpu_memory_utilization': 0.85, 'enforce_eager': True, 'enable_prefix_caching': False}\n" +
		"(Worker_TP0 pid=1) INFO [gpu_model_runner.py:5089] Model loading took 14.99 GiB memory and 5.212345 seconds\n" +
		"(Worker_TP1 pid=2) INFO [gpu_model_runner.py:5089] Model loading took 15.01 GiB memory and 5.312345 seconds\n" +
		"(Worker_TP0 pid=1) INFO [gpu_worker.py:773] Available KV cache memory: 52.34 GiB\n" +
		"INFO [kv_cache_utils.py:1149] GPU KV cache size: 428,768 tokens, Maximum concurrency for 8,192 tokens per request: 52.34x\n" +
		"INFO [gpu_model_runner.py:6517] Graph capturing finished in 7 secs, took 0.53 GiB\n"
	vllm011Log = "INFO 10-01 vLLM API server version 0.11.0\n" +
		"INFO [gpu_model_runner.py:2653] Model loading took 14.9878 GiB and 5.123456 seconds\n" +
		"INFO [gpu_worker.py:298] Available KV cache memory: 52.30 GiB\n" +
		"INFO [kv_cache_utils.py:1087] GPU KV cache size: 428,448 tokens\n" +
		"INFO [kv_cache_utils.py:1091] Maximum concurrency for 131,072 tokens per request: 3.27x\n"
	sglang053Log = "[2025-10-01 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.86 GB, mem usage=15.03 GB.\n" +
		"[2025-10-01 TP0] KV Cache is allocated. #tokens: 412345, K size: 25.17 GB, V size: 25.17 GB\n" +
		"[2025-10-01 TP0] Capture cuda graph end. Time elapsed: 7.10 s. mem usage=0.61 GB. avail mem=5.60 GB.\n" +
		"[2025-10-01 TP0] max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, available_gpu_mem=5.60 GB\n"
	vllm0141Log = "INFO vLLM API server version 0.14.1\n" +
		"INFO non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 4096, 'max_model_len': 8192}\n" +
		"INFO Model loading took 14.99 GiB memory and 5.123456 seconds\n" +
		"INFO GPU KV cache size: 428,768 tokens\nINFO Maximum concurrency for 8,192 tokens per request: 52.34x\n"
	sglang0523Log = "[2026-12-01 10:00:00 TP0] Load weight end. elapsed=12.31 s, type=LlamaForCausalLM, avail mem=63.86 GB, mem usage=15.03 GB.\n" +
		"[2026-12-01 10:00:01 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 412345, K size: 25.17 GB, V size: 25.17 GB\n" +
		"[2026-12-01 10:00:09 TP0] Capture target decode CUDA graph end. elapsed=7.10 s, mem usage=0.61 GB, avail mem=5.60 GB.\n" +
		"[2026-12-01 10:00:10 TP0] max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, available_gpu_mem=5.60 GB\n"
)

func TestReadEngineLog(t *testing.T) {
	gb := func(x float64) vram.Bytes { return vram.Bytes(x * (1 << 30)) }
	for _, c := range []struct {
		name, log, engine, version string
		want                       map[string]LogFigure
		args                       string
	}{
		{"vllm 0.33.0, two ranks, colours", vllm033Log, "vllm", "0.33.0", map[string]LogFigure{
			LogWeights: {Bytes: gb(14.99), Line: 3}, LogKVCache: {Bytes: gb(52.34), Line: 5}, LogKVTokens: {Count: 428768, Line: 6},
			LogMaxModelLen: {Count: 8192, Line: 6}, LogMaxConcurrency: {Count: 52.34, Line: 6}, LogCUDAGraphs: {Bytes: gb(0.53), Line: 7}},
			"vllm serve meta-llama/Llama-3.1-8B-Instruct --no-enable-prefix-caching --enforce-eager --gpu-memory-utilization 0.85 --max-model-len 8192"},
		{"vllm 0.11.0", vllm011Log, "vllm", "0.11.0", map[string]LogFigure{
			LogWeights: {Bytes: gb(14.9878), Line: 2}, LogKVTokens: {Count: 428448, Line: 4}, LogMaxModelLen: {Count: 131072, Line: 5}}, ""},
		{"vllm 0.14.1, a key twice (the last holds, as in Python)", vllm0141Log, "vllm", "0.14.1", map[string]LogFigure{
			LogWeights: {Bytes: gb(14.99), Line: 3}, LogKVTokens: {Count: 428768, Line: 4}, LogMaxConcurrency: {Count: 52.34, Line: 5}},
			"vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192"},
		{"sglang 0.5.3", sglang053Log, "sglang", "", map[string]LogFigure{
			LogWeights: {Bytes: gb(15.03), Line: 1}, LogKVCache: {Bytes: gb(25.17) * 2, Line: 2}, LogKVTokens: {Count: 412345, Line: 4},
			LogCUDAGraphs: {Bytes: gb(0.61), Line: 3}}, ""},
		{"sglang 0.5.23", sglang0523Log, "sglang", "", map[string]LogFigure{
			LogWeights: {Bytes: gb(15.03), Line: 1}, LogKVCache: {Bytes: gb(25.17) * 2, Line: 2}, LogKVTokens: {Count: 412345, Line: 4},
			LogMaxRunning: {Count: 4096, Line: 4}, LogCUDAGraphs: {Bytes: gb(0.61), Line: 3}, LogAvailAfter: {Bytes: gb(5.60), Line: 4}}, ""},
	} {
		l, err := ReadEngineLog([]byte(c.log))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if l.Engine != c.engine || l.Version != c.version || l.Args != c.args {
			t.Errorf("%s: engine %q version %q args %q, want %q %q %q", c.name, l.Engine, l.Version, l.Args, c.engine, c.version, c.args)
		}
		for what, w := range c.want {
			f, ok := l.Figure(what)
			w.What = what
			if !ok || f != w {
				t.Errorf("%s: %s = %+v, want %+v", c.name, what, f, w)
			}
		}
	}
}

// TestEngineLogArgsImport: the command line a vLLM log's non-default args
// make imports as vLLM's (sealed: no file, no network).
func TestEngineLogArgsImport(t *testing.T) {
	l, err := ReadEngineLog([]byte(vllm033Log))
	if err != nil {
		t.Fatal(err)
	}
	imp, err := Import("log.sh", []byte(l.Args), Options{Kind: KindVLLM, GPU: "H100-80GB", Sealed: true})
	if err != nil {
		t.Fatal(err)
	}
	if v := imp.Plan.VLLM; v == nil || v.GPUMemoryUtilization != 0.85 || v.MaxModelLen != 8192 {
		t.Errorf("imported vLLM settings %+v, want 0.85 and 8192", imp.Plan.VLLM)
	}
}

func TestReadEngineLogRefuses(t *testing.T) {
	for _, c := range []struct{ log, want string }{
		{"hello\nworld\n", "none of the lines vLLM or SGLang print"},
		{strings.Repeat("x", MaxLogLine+1), "longer than"},
		{strings.Repeat("a\n", MaxEngineLog/2+1), "more than the"},
	} {
		if _, err := ReadEngineLog([]byte(c.log)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.20q: %v, want %q", c.log, err, c.want)
		}
	}
	// Hostile args lines: nesting past the Python reader's depth, a long
	// chain of operators, a key doubled many times: the figures are read,
	// the args refused (no command line), nothing panics or hangs.
	for _, args := range []string{
		"{'model': " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "}",
		"{'model': 'x', 'max_model_len': " + strings.Repeat("1+", 200000) + "1}",
		"{" + strings.Repeat("'model': 'x', ", 40000) + "'max_model_len': 8}",
	} {
		l, err := ReadEngineLog([]byte("INFO non-default args: " + args + "\nINFO Model loading took 1.00 GiB memory and 1 seconds\n"))
		if err != nil || len(l.Figures) != 1 {
			t.Errorf("%.40q: %v %v", args, l.Figures, err)
		}
	}
	// Many short lines: a log of a million, within the budget, read whole.
	many := strings.Repeat("x\n", 1<<20) + "INFO Available KV cache memory: 1.00 GiB\n"
	if l, err := ReadEngineLog([]byte(many)); err != nil || len(l.Figures) != 1 || l.Figures[0].Line != 1<<20+1 {
		t.Errorf("a million short lines: %+v %v", l.Figures, err)
	}
	l, err := ReadEngineLog([]byte("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"))
	if err != nil || len(l.Errors) != 1 {
		t.Errorf("an OOM log: %v %v", l.Errors, err)
	}
}

func FuzzReadEngineLog(f *testing.F) {
	for _, s := range []string{vllm033Log, vllm011Log, vllm0141Log, sglang053Log, sglang0523Log, vllm033Suggest, vllm011Suggest, vllmStartupPlan,
		"`--kv-cache-memory=99999999999999999999999` to fit into requested memory, or `--kv-cache-memory=1`", "non-default args: {'model': [[[[[[", "non-default args: {'model': 'x', 'a': {'b': None}}",
		"[x] server_args={'model_path': 'x', 'tp_size': 2}\nLoad weight end. mem usage=1.00 GB.", "server_args=ServerArgs(model_path='x', tp_size=[[[[",
		// llama.cpp (enginelog_llamacpp.go): a load, the fit's dry runs
		// dropped, a draft passed over, --fit-print rows, the fit's line.
		llamaCpp10573Log, "load_tensors:        CUDA0 model buffer size = 1.00 MiB\nsched_reserve:      CUDA0 compute buffer size = 2.00 MiB\ncommon_fit_params: fitting params to free memory took 0.5 seconds\nload_tensors: offloaded 99999999999999999999/1 layers to GPU",
		"CUDA0 17904 384 898 \nHost 58259 0 12 \n", "-c 4096 -ngl -1 -ts 1,2,3 -ot \"blk\\.1\\.ffn_down.*=CUDA1,x=CPU\"",
		"llama_memory_breakdown_print: | memory breakdown [MiB] |\nllama_memory_breakdown_print: |   - CUDA0 (RTX 4090)   | 24077 =  945 + (19187 = 17904 +     384 +     898) +        3945 |",
		"llama_kv_cache: size = 1792.00 MiB ( 14336 cells,  32 layers,  4/1 seqs), K (f16):  896.00 MiB, V (f16):  896.00 MiB\nbuild: 6173 (4227c9be) with cc for x"} {
		f.Add([]byte(s))
	}
	for _, file := range []string{"llama-fit-params-b6895.log", "llama-server-b6895.log"} {
		if b, err := os.ReadFile("testdata/enginelog/" + file); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ReadEngineLog(data) // never panics, within its budgets
	})
}

// vLLM's --kv-cache-memory suggestion line as 0.33 prints it (info level,
// gpu_worker.py:1046-1066) and as 0.11.0 prints it (debug level,
// gpu_worker.py:372-393), and a 0.33 startup plan (startup_plan.py:178-183).
const (
	vllm033Suggest = "(Worker pid=1) INFO [gpu_worker.py:1066] Free memory on device (78.68/79.19 GiB) on startup. Desired GPU memory utilization is (0.92, 72.85 GiB). " +
		"Actual usage is 15.42 GiB for consumed memory (weights + non-torch), 1.23 GiB for peak activation, and 0.53 GiB for CUDAGraph memory. " +
		"Replace gpu_memory_utilization config with `--kv-cache-memory=59012345678` (54.96 GiB) to fit into requested memory, or `--kv-cache-memory=65432109876` " +
		"(60.94 GiB) to fully utilize gpu memory. Current kv cache memory in use is 55.52 GiB.\n"
	vllm011Suggest = "DEBUG [gpu_worker.py:393] Free memory on device (78.68/79.19 GiB) on startup. Desired GPU memory utilization is (0.9, 71.27 GiB). " +
		"Actual usage is 14.99 GiB for weight, 1.23 GiB for peak activation, 0.43 GiB for non-torch memory, and 0.53 GiB for CUDAGraph memory. " +
		"Replace gpu_memory_utilization config with `--kv-cache-memory=57000000000` (53.08 GiB) to fit into requested memory, or `--kv-cache-memory=-5` " +
		"(-0.00 GiB) to fully utilize gpu memory. Current kv cache memory in use is 54.62 GiB.\n"
	vllmStartupPlan = `{"schema": 1, "fingerprint": "0123456789abcdef", "kv_cache_memory_bytes": 59012345678, "free_memory_baseline": 84481523712}`
)

// TestReadVLLMSuggestion: the suggestion line's figures, each release's
// form, and a startup plan read in place of a log.
func TestReadVLLMSuggestion(t *testing.T) {
	gb := func(x float64) vram.Bytes { return vram.Bytes(x * (1 << 30)) }
	for _, c := range []struct {
		name, log string
		want      map[string]vram.Bytes
	}{
		{"0.33", vllm033Suggest, map[string]vram.Bytes{LogFreeAtStart: gb(78.68), LogConsumed: gb(15.42), LogPeakActivation: gb(1.23),
			LogSuggestedKV: 59012345678, LogSuggestedKVGPU: 65432109876}},
		{"0.11", vllm011Suggest, map[string]vram.Bytes{LogFreeAtStart: gb(78.68), LogPeakActivation: gb(1.23), LogNonTorch: gb(0.43),
			LogSuggestedKV: 57000000000, LogSuggestedKVGPU: -5}},
		{"startup plan", vllmStartupPlan, map[string]vram.Bytes{LogSuggestedKV: 59012345678, LogFreeAtStart: 84481523712}},
		{"a later boot applies the plan", "INFO [startup_plan.py:148] Applying persisted startup plan (fingerprint 0123456789abcdef): kv_cache_memory_bytes=59012345678 (54.96 GiB), recorded free-memory baseline 78.68 GiB, current 78.70 GiB. Memory profiling will be skipped.\n",
			map[string]vram.Bytes{LogSuggestedKV: 59012345678}},
	} {
		l, err := ReadEngineLog([]byte(c.log))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if l.Engine != "vllm" || len(l.Figures) != len(c.want) {
			t.Errorf("%s: engine %q, figures %+v, want %d", c.name, l.Engine, l.Figures, len(c.want))
		}
		for what, b := range c.want {
			if f, ok := l.Figure(what); !ok || f.Bytes != b || !IsBytes(what) {
				t.Errorf("%s: %s = %+v, want %d B", c.name, what, f, int64(b))
			}
		}
	}
	// A suggestion no int64 holds is no figure (not a wrapped number).
	huge := strings.Replace(vllm033Suggest, "59012345678", "99999999999999999999999", 1)
	if l, err := ReadEngineLog([]byte(huge)); err != nil || len(l.Figures) != 3 {
		t.Errorf("a suggestion past int64: %+v, %v", l.Figures, err)
	}
	if l, _ := ReadEngineLog([]byte(vllmStartupPlan)); l.StartupPlan != "0123456789abcdef" {
		t.Errorf("startup plan's fingerprint: %q", l.StartupPlan)
	}
}

// TestReadStartupPlanRefuses: a startup plan that vLLM would not apply is
// refused, naming the field.
func TestReadStartupPlanRefuses(t *testing.T) {
	for plan, want := range map[string]string{
		`{"schema": 2, "fingerprint": "a", "kv_cache_memory_bytes": 1, "free_memory_baseline": 1}`:  "schema must be 1",
		`{"schema": 1, "fingerprint": "a", "free_memory_baseline": 1}`:                              "kv_cache_memory_bytes must be",
		`{"schema": 1, "fingerprint": "a", "kv_cache_memory_bytes": -3, "free_memory_baseline": 1}`: "kv_cache_memory_bytes must be",
		`{"schema": 1, "fingerprint": "a", "kv_cache_memory_bytes": 3}`:                             "free_memory_baseline must be",
		`{"schema": 1, "kv_cache_memory_bytes": 3, "free_memory_baseline": 1, "extra": 0}`:          `unknown field "extra"`,
		`{"schema": 1, "kv_cache_memory_bytes": 1.5e3}`:                                             "kv_cache_memory_bytes",
		`{"schema": 1`: "startup plan:",
	} {
		if _, err := ReadEngineLog([]byte(plan)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", plan, err, want)
		}
	}
}
