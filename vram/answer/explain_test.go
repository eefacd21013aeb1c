package answer

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/importer"
)

// TestExplainLogRoundTrip: a log printed, as vLLM 0.33.0 and SGLang
// 0.5.23 print their startup figures, from the answer's own figures agrees
// with the answer figure by figure; one with a figure changed disagrees
// on that figure alone, by the change.
func TestExplainLogRoundTrip(t *testing.T) {
	gib := func(b vram.Bytes) string { return fmt.Sprintf("%.2f", float64(b)/(1<<30)) }
	for _, engine := range []string{"vllm", "sglang"} {
		plan := `{"model": "llama-3.1-8b", "inference": {"batch": 1, "prompt_tokens": 1024}, "gpu": "H100-80GB", "` + engine + `": {}}`
		p, err := vram.ParsePlanContent([]byte(plan))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := For(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		var log string
		if engine == "vllm" {
			c, kv := rep.VLLM, rep.VLLM.KVCache
			log = fmt.Sprintf("vLLM server version %s, serving model x\nModel loading took %s GiB memory and 5.2 seconds\nAvailable KV cache memory: %s GiB\nGPU KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx\n",
				c.Release.Release, gib(c.Weights), gib(kv.Available), commas(kv.Tokens), commas(int64(kv.MaxModelLen)), kv.MaxConcurrency)
		} else {
			s := rep.SGLang
			log = fmt.Sprintf("Load weight end. elapsed=1.00 s, type=LlamaForCausalLM, avail mem=60.00 GB, mem usage=%s GB.\nKV Cache is allocated. dtype: torch.bfloat16, #tokens: %d, KV size: %s GB\nmax_total_num_tokens=%d, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, available_gpu_mem=5.00 GB\n",
				gib(s.Weights), s.Tokens, gib(vram.Bytes(s.Tokens)*s.CellSize), s.Tokens)
		}
		for _, changed := range []bool{false, true} {
			text := log
			if changed { // the weights line one GiB more
				i := strings.Index(text, "GiB memory")
				if engine == "sglang" {
					i = strings.Index(text, " GB.\n")
				}
				j := strings.LastIndexAny(text[:i], "= ") + 1
				var w float64
				fmt.Sscan(text[j:i], &w)
				text = text[:j] + fmt.Sprintf("%.2f", w+1) + text[i:]
			}
			l, err := importer.ReadEngineLog([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			ex, err := ExplainLog(p, nil, l)
			if err != nil {
				t.Fatalf("%s: %v", engine, err)
			}
			if len(ex.Checks) < 3 {
				t.Errorf("%s: %d checks, want weights, KV cache and tokens at least: %+v", engine, len(ex.Checks), ex)
			}
			for _, c := range ex.Checks {
				wantAgree := !changed || c.What != importer.LogWeights
				if c.Agrees != wantAgree {
					t.Errorf("%s (changed %v): %s agrees %v, want %v: %+v", engine, changed, c.What, c.Agrees, wantAgree, c)
				}
				if !wantAgree && (c.Diff > -0.99*(1<<30) || c.Diff < -1.01*(1<<30)) {
					t.Errorf("%s: weights diff %v, want about −1 GiB", engine, c.Diff)
				}
			}
		}
	}
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func TestExplainLogRefuses(t *testing.T) {
	l := importer.EngineLog{Engine: "vllm", Figures: []importer.LogFigure{{What: importer.LogWeights, Bytes: 1 << 30, Line: 1}}}
	for _, c := range []struct{ plan, want string }{
		{`{"model": "llama-3.1-8b", "inference": {"batch": 1, "prompt_tokens": 16}, "vllm": {}}`, "gpu: the GPU the log ran on"},
		{`{"model": "llama-3.1-8b", "inference": {"batch": 1, "prompt_tokens": 16}, "gpu": "H100-80GB", "sglang": {}}`, "plan: the log is vllm's"},
	} {
		p, err := vram.ParsePlanContent([]byte(c.plan))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ExplainLog(p, nil, l); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.plan, err, c.want)
		}
	}
}

// TestExplainSGLangLog: an SGLang log alone names its plan, by its
// server_args line (both forms), as a vLLM log does by its non-default
// args; a line that cannot be read is refused, saying why.
func TestExplainSGLangLog(t *testing.T) {
	for _, file := range []string{"sglang-0.5.3.log", "sglang-0.5.23.log"} {
		text, err := os.ReadFile("../importer/testdata/enginelog/" + file)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := ExplainEngineLog(text, nil, "H100-80GB")
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if ex.Report.Model != "llama-3.1-8b" || len(ex.Checks) < 3 || len(ex.Notes) == 0 || !strings.Contains(ex.Notes[0], "server_args") {
			t.Errorf("%s: model %q, %d checks, notes %q", file, ex.Report.Model, len(ex.Checks), ex.Notes)
		}
		if s := ex.Report.SGLang; s == nil || s.MemFractionStatic < 0.82 || s.MemFractionStatic > 0.84 {
			t.Errorf("%s: the pool %+v, want the fraction the log names", file, s)
		}
	}
	_, err := ExplainEngineLog([]byte("server_args={'model_path': [[[\nLoad weight end. mem usage=1.00 GB.\n"), nil, "H100-80GB")
	if err == nil || !strings.Contains(err.Error(), "plan: the log's args could not be read (line 1: server_args:") {
		t.Errorf("an unreadable server_args line: %v", err)
	}
}

// TestExplainStartupPlan: a vLLM startup plan, and the suggestion line it
// comes from, set beside the carve's own figures: each agrees when written
// from the prediction, and one changed is found.
func TestExplainStartupPlan(t *testing.T) {
	p, err := vram.ParsePlanContent([]byte(`{"model": "llama-3.1-8b", "inference": {"batch": 1, "prompt_tokens": 1024}, "gpu": "H100-80GB", "vllm": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := For(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.VLLM
	gib := func(b vram.Bytes) string { return fmt.Sprintf("%.2f", float64(b)/(1<<30)) }
	line := fmt.Sprintf("Free memory on device (%s/79.19 GiB) on startup. Desired GPU memory utilization is (0.92, %s GiB). Actual usage is %s GiB for consumed memory (weights + non-torch), %s GiB for peak activation, and %s GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=%d` (x GiB) to fit into requested memory, or `--kv-cache-memory=%d` (y GiB) to fully utilize gpu memory.\n",
		gib(c.FreeAtStart), gib(c.Requested), gib(c.Consumed()), gib(c.PeakActivation()), gib(c.CUDAGraphs), int64(c.SuggestedKVCacheMemory), int64(c.SuggestedKVCacheMemoryGPU))
	for name, log := range map[string]string{
		"suggestion line": line,
		"startup plan":    fmt.Sprintf(`{"schema": 1, "fingerprint": "f", "kv_cache_memory_bytes": %d, "free_memory_baseline": %d}`, int64(c.SuggestedKVCacheMemory), int64(c.FreeAtStart)),
		"startup plan, 2 GiB more": fmt.Sprintf(`{"schema": 1, "fingerprint": "f", "kv_cache_memory_bytes": %d, "free_memory_baseline": %d}`,
			int64(c.SuggestedKVCacheMemory+2*vram.GiB), int64(c.FreeAtStart)),
	} {
		l, err := importer.ReadEngineLog([]byte(log))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ex, err := ExplainLog(p, nil, l)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(ex.Checks) != len(l.Figures) || len(ex.Checks) < 2 {
			t.Fatalf("%s: checks %+v for figures %+v", name, ex.Checks, l.Figures)
		}
		for _, ch := range ex.Checks {
			changed := strings.Contains(name, "more") && ch.What == importer.LogSuggestedKV
			if ch.Agrees == changed {
				t.Errorf("%s: %s agrees %v: %+v", name, ch.What, ch.Agrees, ch)
			}
		}
	}
}
