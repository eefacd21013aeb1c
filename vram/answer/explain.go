package answer

import (
	"errors"
	"fmt"
	"math"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/importer"
)

// Explanation is an engine's startup log beside the answer for the plan it
// ran: each figure the log printed with the figure predicted for it.
type Explanation struct {
	Log    importer.EngineLog `json:"log"`
	Checks []LogCheck         `json:"checks"`
	// Notes say what was assumed: the release the log names taken as the
	// plan's, a figure the plan's engine does not predict.
	Notes  []string `json:"notes,omitempty"`
	Report Report   `json:"report"`
	// LlamaCppLoad is the load a llama.cpp log is set beside, and FitArgs
	// llama-fit-params' line beside the one the fit predicts.
	LlamaCppLoad *vram.LlamaCppLoad `json:"llama_cpp_load,omitempty"`
	FitArgs      *TextCheck         `json:"fit_args,omitempty"`
}

// LogCheck is one figure of the log beside its prediction; for a memory
// figure Log and Predicted are bytes, else counts (tokens, requests, a
// concurrency).
type LogCheck struct {
	What string `json:"what"`
	// Device is the buffer or device of a llama.cpp figure (host buffers
	// summed, their names joined by "+").
	Device    string  `json:"device,omitempty"`
	Line      int     `json:"line"`
	Log       float64 `json:"log"`
	Predicted float64 `json:"predicted"`
	// Diff is Predicted − Log, and Percent that over Log.
	Diff    float64 `json:"diff"`
	Percent float64 `json:"percent"`
	// Agrees says the two are equal to the log's precision: its GiB are
	// rounded to hundredths, its counts exact.
	Agrees bool `json:"agrees"`
	// Why says what explains a difference (llama.cpp's figures).
	Why string `json:"why,omitempty"`
}

// ExplainEngineLog reads an engine's startup log and sets it beside plan
// p, or, where p is nil, beside the plan the log's own args make (vLLM's
// non-default args, SGLang's server_args); gpu, when set, is the GPU it ran
// on (instead of the plan's). Nothing but the log's text is read: the args
// are imported sealed.
func ExplainEngineLog(log []byte, p *vram.Plan, gpu string) (Explanation, error) {
	l, err := importer.ReadEngineLog(log)
	if err != nil {
		return Explanation{}, err
	}
	var plan vram.Plan
	var imp *importer.Imported
	var notes []string
	switch {
	case p != nil:
		plan = *p
	case l.Args != "":
		kind := importer.KindVLLM
		if l.Engine == "sglang" {
			kind = importer.KindSGLang
		}
		x, err := importer.Import("log.sh", []byte(l.Args), importer.Options{Kind: kind, GPU: gpu, Sealed: true})
		if err != nil {
			return Explanation{Log: l}, fmt.Errorf("log: its args (%s): %w", l.Args, err)
		}
		plan, imp = x.Plan, &x
		if l.ArgsDefaults != "" {
			notes = append(notes, "the plan is the log's server_args: the fields that differ from SGLang "+l.ArgsDefaults+"'s defaults (the line's form is that release's), "+
				"with the values SGLang resolved at startup (its mem_fraction_static among them) as given")
		}
	case l.ArgsError != "":
		return Explanation{Log: l}, fmt.Errorf("plan: the log's args could not be read (%s); give the plan it ran", l.ArgsError)
	case l.Engine == "llama_cpp":
		return Explanation{Log: l}, errors.New(`plan: llama.cpp prints no command line; give the plan it ran, with its "llama_cpp" settings (plan -log FILE PLAN, or import the llama-server command first)`)
	default:
		return Explanation{Log: l}, errors.New("plan: the log names no command line (vLLM's non-default args line, SGLang's server_args line); give the plan it ran")
	}
	if gpu != "" {
		if _, err := vram.ParseCapacity(gpu); err != nil {
			return Explanation{Log: l}, fmt.Errorf("gpu: %w", err)
		}
		plan.GPU = gpu
	}
	ex, err := ExplainLog(plan, imp, l)
	ex.Notes = append(notes, ex.Notes...)
	return ex, err
}

// ExplainLog reads a log beside the plan p that ran it (imp as For takes
// it): a serving plan of the log's engine, on the GPU it ran on. Where the
// plan names no release of the engine, the release the log names is
// modelled.
func ExplainLog(p vram.Plan, imp *importer.Imported, l importer.EngineLog) (Explanation, error) {
	ex := Explanation{Log: l}
	if l.Engine == "llama_cpp" {
		return explainLlamaCpp(p, imp, l)
	}
	switch {
	case p.GPU == "":
		return ex, errors.New(`gpu: the GPU the log ran on is needed to carve it (a catalog name or a capacity)`)
	case l.Engine == "vllm" && p.VLLM == nil, l.Engine == "sglang" && p.SGLang == nil:
		return ex, fmt.Errorf("plan: the log is %s's; give the plan %s served (its %q settings) or the log's command line", l.Engine, l.Engine, l.Engine)
	}
	if l.Version != "" && l.Engine == "vllm" && p.VLLM.Version == "" {
		if _, err := vram.ParseVersion("vllm", l.Version); err == nil {
			p.VLLM.Version, p.Versions.VLLM = l.Version, l.Version
			ex.Notes = append(ex.Notes, "the plan names no vLLM release: the log's, "+l.Version+", is modelled")
		}
	}
	if l.StartupPlan != "" {
		ex.Notes = append(ex.Notes, "a vLLM startup plan (fingerprint "+l.StartupPlan+"): its kv_cache_memory_bytes is the suggestion to fit the requested memory, "+
			"which counts the CUDA graphs twice where the release profiles them (0.33: vllm#57936), and a later boot applies it only with free_memory_baseline free")
	}
	rep, err := For(p, imp)
	if err != nil {
		return ex, err
	}
	ex.Report = rep
	predicted := predictions(rep)
	for _, f := range l.Figures {
		want, ok := predicted[f.What]
		if !ok {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s (line %d): not predicted for this plan", f.What, f.Line))
			continue
		}
		ex.Checks = append(ex.Checks, check(f, want))
	}
	return ex, nil
}

// predictions are the answer's figures under the names a log gives them.
func predictions(rep Report) map[string]float64 {
	out := map[string]float64{}
	if c := rep.VLLM; c != nil {
		kv := c.KVCache
		out[importer.LogWeights] = float64(c.Weights)
		out[importer.LogCUDAGraphs] = float64(c.CUDAGraphs)
		if c.Starts {
			out[importer.LogFreeAtStart] = float64(c.FreeAtStart)
			out[importer.LogSuggestedKV] = float64(c.SuggestedKVCacheMemory)
			out[importer.LogSuggestedKVGPU] = float64(c.SuggestedKVCacheMemoryGPU)
			out[importer.LogConsumed] = float64(c.Consumed())
			out[importer.LogPeakActivation] = float64(c.PeakActivation())
			out[importer.LogNonTorch] = float64(c.NonTorch)
			out[importer.LogKVCache] = float64(kv.Available)
			out[importer.LogKVTokens] = float64(kv.Tokens)
			out[importer.LogMaxConcurrency] = kv.MaxConcurrency
			out[importer.LogMaxModelLen] = float64(kv.MaxModelLen)
		}
	}
	if s := rep.SGLang; s != nil {
		out[importer.LogWeights] = float64(s.Weights)
		if s.Err == "" {
			out[importer.LogKVTokens] = float64(s.Tokens)
			out[importer.LogKVCache] = float64(vram.Bytes(s.Tokens) * s.CellSize)
			if s.RunningCap > 0 {
				out[importer.LogMaxRunning] = float64(s.RunningCap)
			}
		}
	}
	return out
}

// check sets a log's figure beside its prediction.
func check(f importer.LogFigure, predicted float64) LogCheck {
	log, tol := f.Count, 0.0
	if f.Bytes != 0 {
		log, tol = float64(f.Bytes), 0.005*(1<<30) // two decimals of GiB
	}
	if f.What == importer.LogMaxConcurrency {
		tol = 0.005 // two decimals
	}
	c := LogCheck{What: f.What, Line: f.Line, Log: log, Predicted: predicted, Diff: predicted - log}
	if log != 0 {
		c.Percent = math.Round(10000*c.Diff/log) / 100
	}
	c.Agrees = math.Abs(c.Diff) <= tol
	return c
}
