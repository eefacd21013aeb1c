package importer

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/internal/strictjson"
	"github.com/vramlab/vramlab/vram/internal/yaml"
)

// Serving command lines: `vllm serve MODEL --flag value …` (or python -m
// vllm.entrypoints.openai.api_server --model MODEL), SGLang's `python -m
// sglang.launch_server --model-path MODEL …` and llama.cpp's `llama-server
// -m FILE …`, with environment assignments before the command and shell
// line continuations. Flags as each program's argument parser names them
// (vllm/engine/arg_utils.py EngineArgs, sglang/srt/server_args.py
// ServerArgs, llama.cpp common/arg.cpp).

// maxCommandArgs bounds a command line's words.
const maxCommandArgs = 4096

// command drops environment assignments, `$ ` prompts and launchers
// before the program, returning them apart.
func command(words []string) (env map[string]string, rest []string) {
	env = map[string]string{}
	for len(words) > 0 {
		w := words[0]
		if k, v, ok := strings.Cut(w, "="); ok && k != "" && !strings.HasPrefix(w, "-") && strings.ToUpper(k) == k {
			env[k] = v
			words = words[1:]
			continue
		}
		if w == "$" || w == "env" || w == "CUDA_VISIBLE_DEVICES" {
			words = words[1:]
			continue
		}
		break
	}
	return env, words
}

// serveKind tells a serving command line.
func serveKind(words []string) Kind {
	_, w := command(words)
	if len(w) == 0 {
		return ""
	}
	joined := strings.Join(w[:min(len(w), 4)], " ")
	switch {
	case w[0] == "vllm" && len(w) > 1 && w[1] == "serve", strings.Contains(joined, "vllm.entrypoints"):
		return KindVLLM
	case strings.Contains(joined, "sglang.launch_server"):
		return KindSGLang
	case strings.HasSuffix(w[0], "llama-server") || strings.HasSuffix(w[0], "llama-cli"):
		return KindLlamaCpp
	}
	return ""
}

// flagSet is a command line's flags: each name (as norm spells it) with
// its last value, and where that value was given, so that of two
// spellings or aliases of one flag the later wins, as argparse takes the
// last (--max_model_len 1024 --max-model-len 131072 is 131072;
// --tensor-parallel-size 8 -tp 1 is 1).
type flagSet struct {
	vals map[string]string
	at   map[string]int // the word each value came from; -1 for a --config file's
}

// flags reads --name value, --name=value and -x value words after the
// program (a bare flag is "true"), and the positional words.
func flags(words []string, norm func(string) string) (flagSet, []string) {
	fs := flagSet{vals: map[string]string{}, at: map[string]int{}}
	var pos []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") || w == "-" {
			pos = append(pos, w)
			continue
		}
		name, at := strings.TrimLeft(w, "-"), i
		if k, v, ok := strings.Cut(name, "="); ok {
			fs.set(norm(k), v, at)
			continue
		}
		if i+1 < len(words) && (!strings.HasPrefix(words[i+1], "-") || isNumber(words[i+1])) {
			fs.set(norm(name), words[i+1], at)
			i++
		} else {
			fs.set(norm(name), "true", at)
		}
	}
	return fs, pos
}

func (fs flagSet) set(name, v string, at int) { fs.vals[name], fs.at[name] = v, at }

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// flagReader reads a command's flags by their names (dashes and
// underscores alike), recording what each became.
type flagReader struct {
	kind  Kind
	fs    flagSet
	used  map[string]bool
	asked map[string]bool // every name get looked for, given or not
	imp   *Imported
}

func normFlag(s string) string { return strings.ReplaceAll(s, "_", "-") }

func newFlagReader(kind Kind, fs flagSet, imp *Imported) *flagReader {
	return &flagReader{kind: kind, fs: fs, used: map[string]bool{}, asked: map[string]bool{}, imp: imp}
}

// get reads a flag by its names (aliases of one argparse destination):
// the one given last wins, and every alias given is read.
func (f *flagReader) get(names ...string) (string, string, bool) {
	best, at := "", 0
	for _, n := range names {
		n = normFlag(n)
		f.asked[n] = true
		if i, ok := f.fs.at[n]; ok && (best == "" || i > at) {
			best, at = n, i
		}
		if _, ok := f.fs.vals[n]; ok {
			f.used[n] = true
		}
	}
	if best == "" {
		return "", "", false
	}
	return best, f.fs.vals[best], true
}

func (f *flagReader) int(lo, hi int, names ...string) (int, bool, error) {
	n, v, ok := f.get(names...)
	if !ok {
		return 0, false, nil
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < lo || i > hi {
		return 0, false, fmt.Errorf("--%s %q: want a whole number in [%d, %d]", n, v, lo, hi)
	}
	return i, true, nil
}

func (f *flagReader) float(lo, hi float64, names ...string) (float64, bool, error) {
	n, v, ok := f.get(names...)
	if !ok {
		return 0, false, nil
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || !(x >= lo && x <= hi) {
		return 0, false, fmt.Errorf("--%s %q: want a number in [%v, %v]", n, v, lo, hi)
	}
	return x, true, nil
}

// fraction reads a share of the GPU in (0, 1]: an explicit 0 is not the
// default, and is refused for why.
func (f *flagReader) fraction(name, why string) (float64, bool, error) {
	x, ok, err := f.float(0, 1, name)
	if ok && x == 0 {
		return 0, false, fmt.Errorf("--%s 0: %s; leave the flag out for the default", name, why)
	}
	return x, ok, err
}

func (f *flagReader) mapped(format string, a ...any) {
	f.imp.Mapped = append(f.imp.Mapped, fmt.Sprintf(format, a...))
}

// rest files every flag not read: ignored when it does not touch memory,
// else not modelled.
func (f *flagReader) rest(irrelevant map[string]bool, notModelled map[string]string) {
	for k, v := range f.fs.vals {
		if f.used[k] {
			continue
		}
		switch why, ok := notModelled[k]; {
		case ok:
			f.imp.NotModelled = append(f.imp.NotModelled, fmt.Sprintf("--%s %s: %s", k, v, why))
		case irrelevant[k]:
			f.imp.Ignored = append(f.imp.Ignored, "--"+k)
		default:
			f.imp.NotModelled = append(f.imp.NotModelled, fmt.Sprintf("--%s %s: not read by the importer (it may change memory)", k, v))
		}
	}
	sortStrings(f.imp.NotModelled)
	sortStrings(f.imp.Ignored)
}

// servedQuant sets the weights' quantization a pre-quantized release's
// name says, where the catalog gave its base's architecture by name.
func servedQuant(imp *Imported, in *vram.Inference, id, ref string, opt Options) {
	if opt.Model != "" || ref == id || in.Weights.DType != vram.DTypeUnset {
		return
	}
	if q, ok := repoQuant(id); ok {
		in.Weights = q
		imp.Assumed = append(imp.Assumed, fmt.Sprintf("%s: %s weights, as its name says (give its folder with -model for its quantization_config)", id, q.DType))
	}
}

// configFileFlags reads the YAML file `--config FILE` names (vLLM's
// FlexibleArgumentParser and SGLang's ServerArgs take one: its keys are
// the flags' names) into the flags the command line does not set, as
// both parsers let the command line win.
func configFileFlags(imp *Imported, fs flagSet, opt Options) error {
	file, ok := fs.vals["config"]
	if !ok {
		return nil
	}
	delete(fs.vals, "config")
	delete(fs.at, "config")
	data, err := opt.readFile(file)
	if err != nil {
		imp.NotModelled = append(imp.NotModelled, fmt.Sprintf("--config %s: the file could not be read (%v); give it beside the command", file, err))
		return nil
	}
	v, err := yaml.Parse(data)
	if err != nil {
		return namedFileErr("--config", file, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("--config %s: want a mapping of flags, got %s", file, strictjson.Kind(v))
	}
	n := 0
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e, name := m[k], normFlag(k)
		if _, given := fs.at[name]; given && fs.at[name] >= 0 {
			continue // the command line wins
		}
		if _, twice := fs.at[name]; twice {
			return fmt.Errorf("--config %s: %s is given twice (as %s and %s)", file, name, strings.ReplaceAll(name, "-", "_"), name)
		}
		switch x := e.(type) {
		case bool:
			if x {
				fs.set(name, "true", -1)
			}
		case string, int64, float64:
			fs.set(name, fmt.Sprint(x), -1)
		default:
			return fmt.Errorf("--config %s: %s: want a flag's value, got %s", file, k, strictjson.Kind(e))
		}
		n++
	}
	imp.Mapped = append(imp.Mapped, fmt.Sprintf("--config %s → %d flags", file, n))
	return nil
}

// servingRequest is the request the generate replay of a serving plan
// runs; the engine's carve does not depend on it.
var servingRequest = vram.Inference{Batch: 1, PromptTokens: 1024, NewTokens: 256}

func importServe(imp *Imported, kind Kind, words []string, opt Options) error {
	env, w := command(words)
	if len(w) == 0 {
		return fmt.Errorf("no command line to read as %s: want the server's command, such as `vllm serve MODEL …`, `python -m sglang.launch_server --model-path MODEL …` or `llama-server -m FILE …`", kind)
	}
	switch kind {
	case KindVLLM:
		return importVLLM(imp, env, w, opt)
	case KindSGLang:
		return importSGLang(imp, w, opt)
	}
	return importLlamaServer(imp, w, opt)
}

// vllmIrrelevant are `vllm serve` flags that leave GPU memory alone.
var vllmIrrelevant = setOf("host", "port", "api-key", "served-model-name", "uvicorn-log-level", "disable-log-requests",
	"disable-log-stats", "trust-remote-code", "tokenizer", "tokenizer-mode", "revision", "download-dir", "seed",
	"chat-template", "enable-auto-tool-choice", "tool-call-parser", "reasoning-parser", "generation-config",
	"disable-fastapi-docs", "allowed-origins", "root-path", "response-role", "ssl-keyfile", "ssl-certfile", "load-format",
	"max-log-len", "enable-prefix-caching", "no-enable-prefix-caching", "async-scheduling", "distributed-executor-backend")

var vllmNotModelled = map[string]string{
	"cpu-offload-gb":     "weights offloaded to the CPU are not modelled (the carve counts them on the GPU)",
	"swap-space":         "host memory for preempted requests (no GPU memory)",
	"lora-modules":       "LoRA adapters served beside the model are not modelled",
	"enable-lora":        "LoRA serving buffers are not modelled",
	"max-lora-rank":      "LoRA serving buffers are not modelled",
	"data-parallel-size": "each data-parallel replica is carved alike; the carve is one GPU's",
	"kv-transfer-config": "a KV connector's buffers are not modelled (the hybrid KV manager is turned off)",
	"quantization":       "read from the checkpoint's config; a named method beside it is not modelled",
}

func importVLLM(imp *Imported, env map[string]string, w []string, opt Options) error {
	if len(w) > 1 && w[0] == "vllm" && w[1] == "serve" {
		w = w[2:]
	} else {
		for i, x := range w { // python -m vllm.entrypoints.openai.api_server …
			if strings.Contains(x, "vllm.entrypoints") {
				w = w[i+1:]
				break
			}
		}
	}
	fs, pos := flags(w, normFlag)
	if err := configFileFlags(imp, fs, opt); err != nil {
		return err
	}
	f := newFlagReader(KindVLLM, fs, imp)
	id := ""
	if len(pos) > 0 {
		id = pos[0]
	}
	if _, v, ok := f.get("model"); ok {
		id = v
	}
	m, ref, ck, err := importModel(id, opt)
	if err != nil {
		return err
	}
	f.mapped("model %s → %s", orDefault(id, "(from -model)"), orDefault(ref, m.Name))
	v := vram.VLLM{}
	if err := vllmFlags(f, env, imp, &v); err != nil {
		return err
	}
	if err := vllmSpeculative(f, imp, &v, opt); err != nil {
		return err
	}
	f.mapped("vllm: tensor_parallel_size %d, gpu_memory_utilization %s, max_model_len %s, max_num_seqs %s, max_num_batched_tokens %s",
		max(1, v.TP), orDefault(fmtNonZero(v.GPUMemoryUtilization), "the release's default"), orDefault(fmtNonZero(float64(v.MaxModelLen)), "the model's"),
		orDefault(fmtNonZero(float64(v.MaxNumSeqs)), "by GPU"), orDefault(fmtNonZero(float64(v.MaxNumBatchedTokens)), "by GPU"))
	f.rest(vllmIrrelevant, vllmNotModelled)
	in := servingRequest
	in.Model = m
	if ck != nil {
		in = in.WithCheckpoint(*ck)
	}
	servedQuant(imp, &in, id, ref, opt)
	imp.Assumed = append(imp.Assumed, "the generate replay runs one request of 1024 + 256 tokens (vLLM's carve does not depend on it)")
	imp.Plan = vram.Plan{Model: m, ModelRef: ref, Checkpoint: ck, Inference: &in, VLLM: &v, GPU: opt.GPU}
	return in.Validate()
}

// vllmFlags reads a vllm serve command line's memory settings into v,
// and the environment variables that change them.
func vllmFlags(f *flagReader, env map[string]string, imp *Imported, v *vram.VLLM) error {
	var err error
	if v.TP, _, err = f.int(1, 1024, "tensor-parallel-size", "tp"); err != nil {
		return err
	}
	if v.PP, _, err = f.int(1, 1024, "pipeline-parallel-size", "pp"); err != nil {
		return err
	}
	if v.GPUMemoryUtilization, _, err = f.fraction("gpu-memory-utilization", "vLLM refuses it: its CacheConfig takes a fraction greater than 0 and at most 1 (Field(default=0.92, gt=0, le=1))"); err != nil {
		return err
	}
	if _, x, ok := f.get("max-model-len"); ok && (x == "auto" || x == "-1") {
		v.MaxModelLen = vram.AutoMaxModelLen // 0.33 utils/argparse_utils.py:77-94
	} else if v.MaxModelLen, _, err = f.int(1, vram.MaxTokens, "max-model-len"); err != nil {
		return err
	}
	if v.MaxNumSeqs, _, err = f.int(1, vram.MaxTokens, "max-num-seqs"); err != nil {
		return err
	}
	if v.MaxNumBatchedTokens, _, err = f.int(1, vram.MaxTokens, "max-num-batched-tokens"); err != nil {
		return err
	}
	if v.BlockSize, _, err = f.int(1, 1<<16, "block-size"); err != nil {
		return err
	}
	if _, kv, ok := f.get("kv-cache-dtype"); ok && kv != "auto" {
		if v.KVCacheDType, err = vram.ParseDType(kv); err != nil {
			return fmt.Errorf("--kv-cache-dtype %q: %v", kv, err)
		}
	}
	for _, d := range []struct {
		flag string
		to   *vram.DType
	}{{"mamba-cache-dtype", &v.MambaCacheDType}, {"mamba-ssm-cache-dtype", &v.MambaSSMCacheDType}} {
		switch _, x, ok := f.get(d.flag); {
		case !ok || x == "auto":
		case x == "float32":
			*d.to = vram.FP32
		default:
			return fmt.Errorf("--%s %q: vLLM takes auto or float32", d.flag, x)
		}
	}
	if err := vllmMMFlags(f, v); err != nil {
		return err
	}
	if _, x, ok := f.get("enforce-eager"); ok && x != "false" {
		v.EnforceEager = true
		f.mapped("--enforce-eager: no CUDA graphs")
	}
	if _, x, ok := f.get("disable-hybrid-kv-cache-manager"); ok {
		v.DisableHybridKVCache = x != "false"
	}
	if _, _, ok := f.get("kv-transfer-config"); ok {
		v.DisableHybridKVCache = true
		imp.NotModelled = append(imp.NotModelled, "--kv-transfer-config: a KV connector's buffers are not modelled (vLLM turns the hybrid KV cache manager off)")
	}
	if x, ok := env["VLLM_USE_FLASHINFER_SAMPLER"]; ok {
		v.FlashInferSampler = x == "1"
	}
	if x, ok := env["VLLM_USE_V1"]; ok {
		v.UseV1 = x == "1"
	}
	if x, ok := env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"]; ok {
		v.AllowLongMaxModelLen = x == "1"
	}
	return nil
}

var sglangIrrelevant = setOf("host", "port", "trust-remote-code", "served-model-name", "api-key", "log-level", "chat-template",
	"tokenizer-path", "revision", "random-seed", "download-dir", "enable-metrics", "reasoning-parser", "tool-call-parser", "log-requests",
	"log-requests-level", "show-time-cost", "config")

var sglangNotModelled = map[string]string{
	"dp-size":                              "data-parallel attention is not modelled",
	"dp":                                   "data-parallel attention is not modelled",
	"enable-dp-attention":                  "data-parallel attention is not modelled",
	"context-length":                       "the pool is sized by memory, not by the context length",
	"quantization":                         "read from the checkpoint's config; a named method beside it is not modelled",
	"speculative-token-map":                "a reduced draft vocabulary (hot tokens) is not modelled: the draft's output layer is counted whole",
	"speculative-draft-model-quantization": "the draft is counted as its checkpoint stores it; another quantization for it is not modelled",
	"enable-multi-layer-eagle":             "multi-layer EAGLE (a draft runner and pool for each step) is not modelled",
	"cuda-graph-bs":                        "the default mem_fraction_static reads the largest of these batch sizes; give it as --cuda-graph-max-bs",
	"pp-size":                              "pipeline parallelism is not modelled (the default mem_fraction_static keeps back tp × pp / 8 GiB)",
	// Fields of ServerArgs that change the weights on a GPU or the pools
	// and that the importer does not read (0.5.3 server_args.py:157-455,
	// 0.5.23 srt/arg_groups/fields/): a reason for each, on a command line
	// and in a log's server_args line (enginelog_sglang.go) alike.
	"max-total-tokens":         "caps the KV pool at that many tokens (SGLang takes the smaller of it and what memory sizes); the cap is not modelled",
	"dtype":                    "the weights' dtype is read from the checkpoint; a dtype named beside it is not modelled",
	"cpu-offload-gb":           "weights offloaded to the CPU are not modelled (the pool's budget counts them on the GPU)",
	"enable-lora":              "LoRA adapters and their buffers are not modelled",
	"lora-paths":               "LoRA adapters and their buffers are not modelled",
	"max-lora-rank":            "LoRA adapters and their buffers are not modelled",
	"json-model-override-args": "overrides of the model's config are not applied to the model planned",
	"ep-size":                  "expert parallelism is not modelled apart (the weights are split by tp_size)",
	"attn-dp-size":             "data-parallel attention is not modelled",
	"swa-full-tokens-ratio":    "a sliding-window pool's share of the tokens is not modelled",
	"mamba-full-memory-ratio":  "a hybrid's state pool is modelled at 0.5.23's default share (0.9 : 1 of the budget); another share is not modelled",
}

func importSGLang(imp *Imported, w []string, opt Options) error {
	for i, x := range w {
		if strings.Contains(x, "sglang.launch_server") {
			w = w[i+1:]
			break
		}
	}
	fs, _ := flags(w, normFlag)
	if err := configFileFlags(imp, fs, opt); err != nil {
		return err
	}
	f := newFlagReader(KindSGLang, fs, imp)
	_, id, _ := f.get("model-path", "model")
	m, ref, ck, err := importModel(id, opt)
	if err != nil {
		return err
	}
	f.mapped("model %s → %s", orDefault(id, "(from -model)"), orDefault(ref, m.Name))
	sg, err := sglangFlags(f)
	if err != nil {
		return err
	}
	sglangDraft(f, imp, &sg, id, opt)
	f.mapped("sglang: tp_size %d, mem_fraction_static %s", max(1, sg.TP), orDefault(fmtNonZero(sg.MemFractionStatic), "SGLang's default for the GPU"))
	f.rest(sglangIrrelevant, sglangNotModelled)
	in := servingRequest
	in.Model = m
	if ck != nil {
		in = in.WithCheckpoint(*ck)
	}
	servedQuant(imp, &in, id, ref, opt)
	imp.Assumed = append(imp.Assumed, "the generate replay runs one request of 1024 + 256 tokens (SGLang's pool does not depend on it)")
	imp.Plan = vram.Plan{Model: m, ModelRef: ref, Checkpoint: ck, Inference: &in, SGLang: &sg, GPU: opt.GPU}
	return in.Validate()
}

// sglangFlags reads a launch_server command line's memory settings (the
// model apart), as vllmFlags reads vLLM's.
func sglangFlags(f *flagReader) (vram.SGLang, error) {
	var sg vram.SGLang
	var err error
	if sg.TP, _, err = f.int(1, 1024, "tp-size", "tp", "tensor-parallel-size"); err != nil {
		return sg, err
	}
	if sg.MemFractionStatic, _, err = f.fraction("mem-fraction-static", `SGLang keeps nothing for the weights and the KV pool and stops with "Not enough memory. Please try to increase --mem-fraction-static."`); err != nil {
		return sg, err
	}
	if _, kv, ok := f.get("kv-cache-dtype"); ok && kv != "auto" {
		if sg.KVCacheDType, err = vram.ParseDType(kv); err != nil {
			return sg, fmt.Errorf("--kv-cache-dtype %q: %v", kv, err)
		}
	}
	if sg.MaxRunningRequests, _, err = f.int(1, 1<<20, "max-running-requests"); err != nil {
		return sg, err
	}
	// The default fraction's inputs (sglang_defaults.go).
	var chunked bool
	if sg.ChunkedPrefillSize, chunked, err = f.int(-1, 1<<20, "chunked-prefill-size"); err != nil {
		return sg, err
	}
	if chunked && sg.ChunkedPrefillSize == 0 {
		sg.ChunkedPrefillSize = -1 // SGLang: 0 or -1 turns chunking off
	}
	// --cuda-graph-max-bs (0.5.3 server_args.py), --cuda-graph-max-bs-decode
	// since (0.5.23 arg_groups/fields/exec_.py:629).
	if sg.CUDAGraphMaxBS, _, err = f.int(1, 1<<16, "cuda-graph-max-bs", "cuda-graph-max-bs-decode"); err != nil {
		return sg, err
	}
	if sg.MaxPrefillTokens, _, err = f.int(1, 1<<24, "max-prefill-tokens"); err != nil {
		return sg, err
	}
	if _, x, ok := f.get("enable-multimodal"); ok && x != "false" {
		sg.EnableMultimodal = true
	}
	if sg.MaxMambaCacheSize, _, err = f.int(1, 1<<20, "max-mamba-cache-size"); err != nil {
		return sg, err
	}
	switch _, x, ok := f.get("mamba-ssm-dtype"); {
	case !ok:
	case x == "float32":
		sg.MambaSSMDType = vram.FP32
	case x == "bfloat16":
		sg.MambaSSMDType = vram.BF16
	default:
		return sg, fmt.Errorf("--mamba-ssm-dtype %q: SGLang takes float32 or bfloat16", x)
	}
	return sg, sglangSpecFlags(f, &sg)
}

// sglangSpecFlags reads launch_server's --speculative-* flags into
// sg.Speculative (vram/sglang_spec.go), the draft's path as given
// (sglangDraft resolves it). Without --speculative-algorithm SGLang runs no
// draft, whatever the other flags say.
func sglangSpecFlags(f *flagReader, sg *vram.SGLang) error {
	_, alg, ok := f.get("speculative-algorithm")
	_, path, hasPath := f.get("speculative-draft-model-path", "speculative-draft-model")
	var c vram.SGLangSpeculative
	var err error
	if c.NumSteps, _, err = f.int(1, 64, "speculative-num-steps"); err != nil {
		return err
	}
	if c.EagleTopK, _, err = f.int(1, 64, "speculative-eagle-topk"); err != nil {
		return err
	}
	if c.NumDraftTokens, _, err = f.int(1, 1024, "speculative-num-draft-tokens"); err != nil {
		return err
	}
	switch _, kv, given := f.get("speculative-draft-kv-cache-dtype"); {
	case !given || kv == "auto":
	default:
		if c.DraftKVCacheDType, err = vram.ParseDType(kv); err != nil {
			return fmt.Errorf("--speculative-draft-kv-cache-dtype %q: %v", kv, err)
		}
	}
	if !ok || alg == "" {
		return nil
	}
	c.Algorithm = alg
	if hasPath && path != "" {
		c.DraftModelPath, _ = json.Marshal(path)
	}
	sg.Speculative = &c
	return nil
}

// sglangDraft resolves the draft --speculative-draft-model-path names as
// the served model is (draftModel): the served model's own path is its
// own MTP layer (SGLang fills the flag with it for DeepSeek-V3 and GLM-4.5,
// which a log's server_args prints); a draft the catalog does not hold
// leaves speculative decoding out of the plan, said.
func sglangDraft(f *flagReader, imp *Imported, sg *vram.SGLang, model string, opt Options) {
	c := sg.Speculative
	if c == nil {
		return
	}
	var path string
	_ = json.Unmarshal(c.DraftModelPath, &path)
	switch {
	case path == "":
	case path == model:
		c.DraftModelPath = nil
		f.mapped("--speculative-draft-model-path %s: the served checkpoint, its own MTP layer", path)
	default:
		d, key, err := draftModel(path, strings.ToLower(c.Algorithm), opt)
		if err != nil {
			imp.NotModelled = append(imp.NotModelled, fmt.Sprintf("--speculative-draft-model-path: the draft %s is not modelled (%v), so the plan leaves speculative decoding out: give the draft as sglang.speculative.draft_model_path, a catalog name or the model's fields", path, err))
			sg.Speculative = nil
			return
		}
		c.DraftModelPath = nil
		if key != "" {
			c.DraftModelPath, _ = json.Marshal(key)
		}
		sg.Draft = &d
	}
	f.mapped("--speculative-algorithm → sglang.speculative: %s, num_steps %s, eagle_topk %s, num_draft_tokens %s%s", c.Algorithm,
		orDefault(fmtNonZero(float64(c.NumSteps)), "SGLang's"), orDefault(fmtNonZero(float64(c.EagleTopK)), "SGLang's"),
		orDefault(fmtNonZero(float64(c.NumDraftTokens)), "SGLang's"), map[bool]string{true: ", draft " + path, false: ""}[path != "" && path != model])
}

// importLlamaServer reads llama-server's context settings; its model is a
// GGUF file, whose weights `plan -gguf` reads, so the plan takes the
// architecture from -model for the KV cache (LlamaCpp.KVCache).
func importLlamaServer(imp *Imported, w []string, opt Options) error {
	fs, _ := flags(w[1:], normFlag)
	f := newFlagReader(KindLlamaCpp, fs, imp)
	_, file, _ := f.get("m", "model")
	if opt.Model == "" {
		return fmt.Errorf("llama-server runs the GGUF file %q: its weights are `plan -gguf %s`; for the KV cache give the architecture with -model (a catalog name or config.json)", file, file)
	}
	m, ref, _, err := importModel("", opt)
	if err != nil {
		return err
	}
	f.mapped("model %s → architecture %s (the weights are the GGUF file's)", orDefault(file, "?"), ref)
	var l vram.LlamaCpp
	if l.CtxSize, _, err = f.int(1, vram.MaxTokens, "c", "ctx-size"); err != nil {
		return err
	}
	if l.Parallel, _, err = f.int(1, 1024, "np", "parallel"); err != nil {
		return err
	}
	if l.UBatch, _, err = f.int(1, vram.MaxTokens, "ub", "ubatch-size"); err != nil {
		return err
	}
	if l.GPULayers, _, err = f.int(-1, 1<<20, "ngl", "n-gpu-layers", "gpu-layers"); err != nil {
		return err
	}
	if _, x, ok := f.get("fa", "flash-attn"); ok {
		l.FlashAttn = x != "false" && x != "off" && x != "0"
	}
	_, l.CacheTypeK, _ = f.get("ctk", "cache-type-k")
	_, l.CacheTypeV, _ = f.get("ctv", "cache-type-v")
	if _, ts, ok := f.get("ts", "tensor-split"); ok {
		for _, s := range strings.FieldsFunc(ts, func(r rune) bool { return r == ',' || r == '/' }) {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return fmt.Errorf("--tensor-split %q: want shares such as 10,6", ts)
			}
			l.TensorSplit = append(l.TensorSplit, x)
		}
	}
	kv, err := l.KVCache(m)
	if err != nil {
		return err
	}
	f.mapped("llama.cpp KV cache: %d cells per stream × %d streams, %v in all (%v on the first GPU)", kv.Cells, kv.Streams, kv.Total, kv.Devices[0])
	if kv.StateLayers > 0 {
		f.mapped("llama.cpp recurrent state: %d layers × %d cells (one per sequence, any length), %v in all (%v on the first GPU)", kv.StateLayers, kv.StateCells, kv.State, kv.StateDevices[0])
	}
	f.rest(setOf("host", "port", "t", "threads", "api-key", "log-disable", "jinja", "alias", "chat-template", "b", "batch-size", "mlock", "no-mmap"),
		map[string]string{"md": "a draft model's own context is not modelled", "model-draft": "a draft model's own context is not modelled",
			"ngld": "a draft model's own context is not modelled", "devd": "a draft model's own context is not modelled"})
	imp.Plan = vram.Plan{Model: m, ModelRef: filepath.Base(file), GPU: opt.GPU}
	return nil
}

func setOf(xs ...string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func fmtNonZero(x float64) string {
	if x == 0 {
		return ""
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// vllmMMFlags reads the flags that shape vLLM's profile of a multimodal
// encoder (vllm_mm.go): --limit-mm-per-prompt (JSON, '{"image": 2,
// "video": 0}', or the older image=2,video=0), --skip-mm-profiling,
// --mm-processor-kwargs' max_pixels, and how the tower runs under TP
// (--mm-encoder-tp-mode, or the deprecated
// --enable-multimodal-encoder-data-parallel, engine/arg_utils.py
// l.986-992, which sets data).
func vllmMMFlags(f *flagReader, v *vram.VLLM) error {
	if _, x, ok := f.get("skip-mm-profiling"); ok {
		v.SkipMMProfiling = x != "false"
	}
	if _, x, ok := f.get("enable-multimodal-encoder-data-parallel"); ok && x != "false" {
		v.MMEncoderTPMode = "data"
	}
	if _, x, ok := f.get("mm-encoder-tp-mode"); ok {
		if x != "weights" && x != "data" {
			return fmt.Errorf("--mm-encoder-tp-mode %q: want weights or data", x)
		}
		v.MMEncoderTPMode = x
	}
	if _, x, ok := f.get("limit-mm-per-prompt"); ok {
		limits, err := parseMMLimits(x)
		if err != nil {
			return fmt.Errorf("--limit-mm-per-prompt %q: %v", x, err)
		}
		v.LimitMMPerPrompt = limits
	}
	if _, x, ok := f.get("mm-processor-kwargs"); ok {
		var kw map[string]any
		if err := json.Unmarshal([]byte(x), &kw); err != nil {
			return fmt.Errorf("--mm-processor-kwargs %q: want a JSON object: %v", x, err)
		}
		for k, val := range kw {
			n, isNum := val.(float64)
			switch {
			case k == "max_pixels" && isNum && n >= 1 && n <= float64(vram.MaxPositions)*1024 && n == math.Trunc(n):
				v.MaxPixels = int(n)
			case k == "max_pixels":
				return fmt.Errorf("--mm-processor-kwargs max_pixels %v: want a whole number of pixels in [1, %d]", val, vram.MaxPositions*1024)
			default:
				f.imp.NotModelled = append(f.imp.NotModelled, fmt.Sprintf("--mm-processor-kwargs %s: only max_pixels shapes the profile the carve models", k))
			}
		}
	}
	return nil
}

// parseMMLimits reads a --limit-mm-per-prompt value: a JSON object of
// counts, or modality=count pairs separated by commas.
func parseMMLimits(x string) (map[string]int, error) {
	limits := map[string]int{}
	if strings.HasPrefix(strings.TrimSpace(x), "{") {
		var raw map[string]any
		if err := json.Unmarshal([]byte(x), &raw); err != nil {
			return nil, fmt.Errorf("want a JSON object of counts: %v", err)
		}
		for k, val := range raw {
			n, ok := val.(float64)
			if !ok || n < 0 || n > vram.MaxTokens || n != math.Trunc(n) {
				return nil, fmt.Errorf("%s: %v is not a count (per-modality options other than a count are not modelled)", k, val)
			}
			limits[k] = int(n)
		}
		return limits, nil
	}
	for _, kv := range strings.Split(x, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if !ok || err != nil || n < 0 || n > vram.MaxTokens {
			return nil, fmt.Errorf("%q: want modality=count", kv)
		}
		limits[strings.TrimSpace(k)] = n
	}
	return limits, nil
}

// vllmSpeculative reads --speculative-config (a JSON object, vLLM's
// SpeculativeConfig) into v: method, num_speculative_tokens and model. A
// draft model ("model") is resolved as the served model is, from the
// catalog or a path; one the catalog does not hold leaves speculative
// decoding out of the plan, said in NotModelled. The other keys are not
// modelled.
func vllmSpeculative(f *flagReader, imp *Imported, v *vram.VLLM, opt Options) error {
	_, x, ok := f.get("speculative-config")
	if !ok {
		return nil
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(x), &raw); err != nil {
		return fmt.Errorf("--speculative-config %q: want a JSON object (vLLM's SpeculativeConfig): %v", x, err)
	}
	s := vram.SpeculativeConfig{}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	model := ""
	for _, k := range keys {
		val := raw[k]
		switch k {
		case "method":
			m, ok := val.(string)
			if !ok || m == "" {
				return fmt.Errorf("--speculative-config method %v: want a method's name (mtp, eagle, eagle3, draft_model, ngram, suffix, …)", val)
			}
			s.Method = m
		case "num_speculative_tokens":
			n, ok := val.(float64)
			if !ok || n < 1 || n > 1024 || n != math.Trunc(n) {
				return fmt.Errorf("--speculative-config num_speculative_tokens %v: want a whole number in [1, 1024]", val)
			}
			s.NumSpeculativeTokens = int(n)
		case "model":
			m, ok := val.(string)
			if !ok || m == "" {
				return fmt.Errorf("--speculative-config model %v: want the draft's name or path", val)
			}
			model = m
		default:
			imp.NotModelled = append(imp.NotModelled, fmt.Sprintf("--speculative-config %s %v: not modelled", k, val))
		}
	}
	method := s.Method
	switch {
	case model == "" || model == "ngram" || model == "[ngram]" || model == method:
		if model != "" {
			s.Model, _ = json.Marshal(model)
		}
	case method == "mtp" || strings.HasSuffix(method, "_mtp"):
		imp.NotModelled = append(imp.NotModelled, fmt.Sprintf("--speculative-config model %s: an MTP draft from another checkpoint is not modelled; the plan takes the served checkpoint's own MTP layers", model))
	default:
		d, key, err := draftModel(model, method, opt)
		if err != nil {
			imp.NotModelled = append(imp.NotModelled, fmt.Sprintf("--speculative-config: the draft %s is not modelled (%v), so the plan leaves speculative decoding out: give the draft as vllm.speculative_config.model, a catalog name or the model's fields", model, err))
			return nil
		}
		if key != "" {
			s.Model, _ = json.Marshal(key)
		}
		v.Draft = &d
	}
	v.Speculative = &s
	f.mapped("--speculative-config → vllm.speculative_config: method %s, num_speculative_tokens %s%s", orDefault(method, "(vLLM infers it)"),
		orDefault(fmtNonZero(float64(s.NumSpeculativeTokens)), "unset"), map[bool]string{true: ", model " + model, false: ""}[model != ""])
	return nil
}

// draftModel resolves a speculative draft's name as the served model's is
// (importModel), but an EAGLE head only by its exact name: the catalog's
// models named like a head's repository are the targets, not the head.
func draftModel(id, method string, opt Options) (vram.Model, string, error) {
	o := Options{Dir: opt.Dir, Sealed: opt.Sealed}
	if method == "eagle" || method == "eagle3" || strings.Contains(strings.ToLower(id), "eagle") {
		if _, err := vram.LookupPreset(id); err != nil {
			return vram.Model{}, "", fmt.Errorf("an EAGLE head the catalog does not hold")
		}
	}
	m, key, _, err := importModel(id, o)
	if err != nil {
		return vram.Model{}, "", err
	}
	if _, err := vram.LookupPreset(key); err != nil {
		key = ""
	}
	return m, key, nil
}
