// Command plan estimates the GPU memory of plan files, and is a launch
// gate: it exits 0 when every plan fits its GPU (or names none), 1 when
// one does not (and prints the changes that would make it fit, in the
// plan's framework's own flags), 2 when an input is invalid.
//
//	go run ./examples/plan FILE.json [FILE.json …]  # breakdown tables
//	go run ./examples/plan -gpu H100-80GB FILE.json # judged on that GPU
//	go run ./examples/plan -json FILE.json          # machine-readable
//	go run ./examples/plan -hf-config FILE.json     # the model as a Hugging Face config.json
//	go run ./examples/plan -schema plan|report      # the JSON Schema of a plan file, of -json's answer
//	go run ./examples/plan -log vllm.log -gpu H100-80GB [FILE.json]  # an engine's startup log beside the prediction
//
// The plan format is documented on vram.Plan; examples are in examples/plans.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/vramlab/vramlab/examples/internal/term"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/answer"
	"github.com/vramlab/vramlab/vram/hub" // hf:// models
	"github.com/vramlab/vramlab/vram/importer"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:], term.Safe(os.Stdout)), term.Safe(os.Stderr)))
}

// Exit codes of the launch gate.
const (
	exitFits    = 0
	exitNoFit   = 1
	exitInvalid = 2
)

// notFit is run's answer when a plan does not fit its GPU: not an error in
// the input, a verdict.
type notFit struct{ plans []string }

func (n notFit) Error() string {
	return fmt.Sprintf("does not fit: %s", strings.Join(n.plans, ", "))
}

// exitCode maps run's result to the gate's exit code, printing an input
// error on stderr (a verdict is already in the report).
func exitCode(err error, stderr io.Writer) int {
	var nf notFit
	switch {
	case err == nil:
		return exitFits
	case errors.As(err, &nf):
		return exitNoFit
	}
	fmt.Fprintln(stderr, "plan:", err)
	return exitInvalid
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(w)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	hfConfig := fs.Bool("hf-config", false, "print the plan's model as a Hugging Face config.json (for examples/measure)")
	presets := fs.Bool("presets", false, "list the catalog's model names")
	families := fs.Bool("families", false, "list the model families (config.json model_type) the engine models")
	releases := fs.Bool("releases", false, "list the releases of each engine and library the engine models (library, then its releases, oldest first)")
	resolved := fs.Bool("resolved", false, "print the model and the training settings with every default filled in")
	ggufFile := fs.String("gguf", "", "print a GGUF file's header (a path, or hf://org/name/file.gguf): architecture, tensors by ggml type, stored bytes, and how Ollama loads it (-versions ollama=0.11.10: its up-front estimate)")
	numCtx := fs.Int("num-ctx", 0, "-gguf: Ollama's num_ctx, the context per sequence (0: Ollama's default: 4096 at 0.11.10, by the GPUs' total memory from 0.32.15)")
	numParallel := fs.Int("num-parallel", 1, "-gguf: OLLAMA_NUM_PARALLEL")
	gpuName := fs.String("gpu", "", "the GPU to judge the plans on (catalog name or capacity), instead of each plan's own; -gguf: the GPU Ollama loads the model on")
	from := fs.String("from", "", "the kind of a config to import, where its content does not say: axolotl, llamafactory, torchtune, torchtitan, hf_trainer, megatron, deepspeed, accelerate, verl, vllm, sglang, llama.cpp")
	modelRef := fs.String("model", "", "an imported config's model: a catalog name, a config.json, a checkpoint folder or hf://org/name[@revision] (config.json and safetensors headers by range requests, cached; where the config's hub id is not in the catalog)")
	gpus := fs.Int("gpus", 0, "an imported config's world size (the launch's GPUs); -gguf: how many of -gpu Ollama sees")
	entry := fs.String("config", "", "a torchtitan config_registry.py's function to read, as torchtitan's --config names it (e.g. llama3_8b)")
	logFile := fs.String("log", "", "a vLLM, SGLang or llama.cpp startup log (llama.cpp from b9161: run with -lv 4), llama-fit-params' output, or a vLLM startup plan (startup_plan_<fingerprint>.json): each memory figure it printed beside the prediction for the plan file given, or for the plan the log's own args make (vLLM's non-default args, SGLang's server_args; with -gpu); a llama.cpp log needs its plan file")
	schema := fs.String("schema", "", "print the JSON Schema of a plan file (plan) or of -json's answer (report)")
	search := fs.Bool("search", false, "search the training plan's parallel layouts on -gpus GPUs of -gpu (tensor, pipeline, context and sharded data parallelism, micro-batch, recompute, float8 and CPU offload where the framework runs them; what the plan sets stays; the plan's search.host_memory, a node's RAM, judges offload) and print the fastest that fit, as the framework's launch flags; a plan with a \"search\" section is searched without it")
	globalBatch := fs.Int("global-batch", 0, "-search: sequences an optimizer step (default: one a GPU)")
	top := fs.Int("top", 10, "-search: how many layouts to print")
	versions := fs.String("versions", "", "an imported config's releases where the config cannot say them, as library=release pairs: trl=0.25.0,vllm=0.14.1 (TRL's fill a GRPOConfig's unset lengths)")
	anywhere := fs.Bool("read-anywhere", false, "read the files a config names (a DeepSpeed JSON, --config YAML, accelerate's config_file) wherever they are; without it only those inside the config's folder")
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h asked for the usage, which is printed
		}
		return err
	}
	if *schema != "" {
		b, err := answer.Schema(*schema)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if *logFile != "" {
		return explainLog(w, *logFile, positional, launch{gpu: *gpuName}, *asJSON)
	}
	if *ggufFile != "" {
		return runGGUF(w, *ggufFile, vram.Ollama{NumCtx: *numCtx, NumParallel: *numParallel, GPUs: *gpus}, *versions, *gpuName, *asJSON)
	}
	if *releases || *presets || *families {
		printCatalog(w, *releases, *families)
		return nil
	}
	var files, overrides []string
	for _, a := range positional {
		if k, _, ok := strings.Cut(a, "="); ok && k != "" && !strings.ContainsAny(k, "/\\") {
			overrides = append(overrides, a) // tune run's key=value, after the config
		} else {
			files = append(files, a)
		}
	}
	l := launch{gpu: *gpuName, opt: importer.Options{Kind: importer.Kind(*from), Model: *modelRef, GPU: *gpuName, GPUs: *gpus, Overrides: overrides, Entry: *entry, AnyPath: *anywhere}}
	if *versions != "" {
		if l.opt.Versions, err = vram.ParseVersions(*versions); err != nil {
			return err
		}
	}
	if len(files) < 1 {
		return errors.New("usage: plan [-gpu NAME] [-json|-hf-config|-resolved] FILE [FILE …] (a plan, a trainer's config or a launch script) [key=value …], plan -presets, or plan [-json] -gguf FILE.gguf")
	}
	if len(files) > 1 {
		if *hfConfig || *resolved {
			return errors.New("-hf-config and -resolved take one plan file")
		}
		return runMany(w, files, l, *asJSON)
	}
	if *hfConfig {
		// The model alone, as the plan file writes it: a family whose
		// training is not modelled yet is traced to model it
		// (examples/measure), so its training is not judged here.
		m, err := vram.ReadPlanModel(files[0])
		if err != nil {
			return err
		}
		return printModel(w, vram.Plan{Model: m}, true)
	}
	p, imp, err := readPlan(files[0], l)
	if err != nil {
		return err
	}
	if *search || p.Search != nil {
		return runSearch(w, p, *gpuName, *gpus, *globalBatch, *top, *asJSON)
	}
	if *hfConfig || *resolved {
		return printModel(w, p, *hfConfig)
	}
	return answerOne(w, p, imp, files, *asJSON)
}

// runGGUF prints a GGUF file's header and how Ollama (the release
// versions names, else the current one) loads it on gpuName.
func runGGUF(w io.Writer, path string, o vram.Ollama, versions, gpuName string, asJSON bool) error {
	if versions != "" {
		v, err := vram.ParseVersions(versions)
		if err != nil {
			return err
		}
		o.Version = v.Ollama
	}
	g, err := readGGUF(path)
	if err != nil {
		return err
	}
	return printGGUF(w, g, asJSON, o, gpuName)
}

// answerOne prints one plan's answer, as a table or as JSON, and its
// verdict.
func answerOne(w io.Writer, p vram.Plan, imp *importer.Imported, files []string, asJSON bool) error {
	rep, err := answer.For(p, imp)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printReport(w, p, rep)
	}
	return verdict([]answer.Report{rep}, files)
}

// printCatalog lists the modelled releases (library, then its releases),
// the model families or the catalog's names, one a line.
func printCatalog(w io.Writer, releases, families bool) {
	if releases {
		rs := vram.ModelledReleases()
		for _, lib := range slices.Sorted(maps.Keys(rs)) {
			fmt.Fprintln(w, lib, strings.Join(rs[lib], " "))
		}
		return
	}
	names := vram.Presets()
	if families {
		names = vram.Families()
	}
	for _, n := range names {
		fmt.Fprintln(w, n)
	}
}

// printModel prints the plan's model as a Hugging Face config.json
// (-hf-config), or the model and training settings resolved (-resolved).
func printModel(w io.Writer, p vram.Plan, hfConfig bool) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if hfConfig {
		return enc.Encode(p.Model.HFConfig())
	}
	if p.Training == nil {
		return errors.New("-resolved needs a training plan")
	}
	t, err := p.Training.Resolved()
	if err != nil {
		return err
	}
	m := t.Model
	t.Model = vram.Model{}
	return enc.Encode(struct {
		Model vram.Model    `json:"model"`
		Train vram.Training `json:"train"`
	}{m, t})
}

// parseInterleaved parses flags before, between and after the files
// (`plan train.yaml -gpu H100 -gpus 8`), as users type them after the
// file they already have.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// launch is what the command line adds to the files it reads.
type launch struct {
	gpu string
	opt importer.Options
}

// readPlan reads a plan file, or imports a trainer's config or a
// server's command line; a -gpu flag names the GPU instead of the plan's.
func readPlan(file string, l launch) (vram.Plan, *importer.Imported, error) {
	opt := l.opt
	opt.GPU = l.gpu
	return importer.Open(file, opt)
}

// runMany reports several plans, one after the other (-json: an array);
// the first invalid one stops it.
func runMany(w io.Writer, files []string, l launch, asJSON bool) error {
	var reps []answer.Report
	for i, f := range files {
		p, imp, err := readPlan(f, l)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		rep, err := answer.For(p, imp)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		reps = append(reps, rep)
		if !asJSON {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "== %s\n", f)
			printReport(w, p, rep)
		}
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reps); err != nil {
			return err
		}
	}
	return verdict(reps, files)
}

// verdict is notFit naming the plans that do not fit their GPU.
func verdict(reps []answer.Report, files []string) error {
	var bad []string
	for i, r := range reps {
		if r.Fit != nil && !r.Fit.Fits {
			bad = append(bad, files[i])
		}
	}
	if len(bad) > 0 {
		return notFit{bad}
	}
	return nil
}

func printReport(w io.Writer, p vram.Plan, r answer.Report) {
	printImport(w, r.Name, r.Import)
	fmt.Fprintf(w, "model %s: %.3fB parameters\n", r.Model, float64(r.Params)/1e9)
	printReleases(w, r.Releases)
	if r.PostTraining != nil {
		printPostTraining(w, r)
		return
	}
	if ck := r.Checkpoint; ck != nil {
		fmt.Fprintf(w, "checkpoint: %v stored as %s", ck.Total, ck.Format)
		if len(ck.Unused) > 0 {
			fmt.Fprintf(w, "; %d tensors the model does not use (first: %s)", len(ck.Unused), ck.Unused[0])
		}
		fmt.Fprintln(w)
	}
	if im := r.Images; im != nil && im.NotRun {
		fmt.Fprintf(w, "images: none run: the vision tower %s's forward is not modelled (its %.1fM parameters load with the weights); the plan runs the text\n", im.Tower, float64(im.TowerParams)/1e6)
	} else if im != nil {
		state := "frozen"
		if im.Trainable {
			state = "trained"
		}
		if r.Inference != nil {
			state = "run once per prompt"
		}
		fmt.Fprintf(w, "images: %d per sequence, %d tokens each (counted in the sequence); vision tower %s, %.1fM parameters, %s\n",
			im.PerSequence, im.Tokens, im.Tower, float64(im.TowerParams)/1e6, state)
	}
	printTraining(w, r.Training)
	for _, v := range r.Variants {
		fmt.Fprintf(w, "\nwith %s: allocated peak %v (%+.1f %%): %s\n", v.Setting, v.Peak, 100*float64(v.Change)/float64(max(1, r.Peak)), v.Why)
	}
	printInference(w, r.Inference)
	printVLLM(w, p, r)
	if tc := r.TGI; tc != nil {
		fmt.Fprintf(w, "\nTGI on %s: %v usable; weights %v; warmup activations %v; free after warmup %v, of which the wiggle room's share becomes %d KV blocks of %v: max_batch_total_tokens %s\n",
			r.Fit.GPU, tc.Usable, tc.Weights, tc.Activation, tc.Free, tc.Blocks, tc.BlockBytes, vram.Grouped(tc.MaxBatchTotalTokens))
	}
	printSGLang(w, r)
	printLlamaCppFit(w, r.LlamaCppFit)
	printOllama(w, r.Ollama)
	if r.NoGenerate != "" {
		fmt.Fprintf(w, "\nNo figures of transformers' generate: %s\n", r.NoGenerate)
	} else {
		printMeasures(w, r)
	}
	if f := r.Fit; f != nil {
		if f.Margin == 0 && f.Engine != "" {
			fmt.Fprintf(w, "\n%s (%v), judged on what %s takes of the card: %s\n", f.GPU, f.Capacity, f.Engine, f.Why)
		} else {
			fmt.Fprintf(w, "\n%s (%v), judged on device-used keeping %g %% free: %s\n", f.GPU, f.Capacity, 100*f.Margin, f.Why)
		}
	}
	printAdvice(w, p, r.Import, r.Advice)
}

// printMeasures prints the allocator replay's three measures.
func printMeasures(w io.Writer, r answer.Report) {
	m := r.Measures
	if r.VLLM != nil || r.SGLang != nil || r.TGI != nil || r.LlamaCppFit != nil || r.Ollama != nil {
		fmt.Fprintf(w, "\nThe three measures of transformers' generate on its own (allocator replay; not what the engine above takes):\n")
	} else {
		fmt.Fprintf(w, "\nThe three measures (allocator replay):\n")
	}
	ws := ""
	if m.Workspace > 0 {
		ws = fmt.Sprintf(" (with cuBLAS's %v workspace)", m.Workspace)
	}
	fmt.Fprintf(w, "  allocated peak   %10v   torch.cuda.max_memory_allocated%s\n", m.Allocated, ws)
	fmt.Fprintf(w, "  reserved peak    %10v   torch.cuda.max_memory_reserved (the allocator's cache included)\n", m.Reserved)
	fmt.Fprintf(w, "  device used      %10v   nvidia-smi: reserved + CUDA context %v + NCCL %v\n", m.DeviceUsed, m.Context, m.NCCL)
	if m.NCCLNote != "" {
		fmt.Fprintf(w, "  note: %s\n", m.NCCLNote)
	}
}

// printVLLM prints how vLLM carves the GPU, as the release modelled runs
// it, and its cache.
func printVLLM(w io.Writer, p vram.Plan, r answer.Report) {
	c := r.VLLM
	if c == nil {
		return
	}
	kv := c.KVCache
	runner, graphs, beside := "", "", ""
	if c.RunnerBuffers > 0 {
		runner = fmt.Sprintf(" + Model Runner V2's sampler tables %v", c.RunnerBuffers)
	}
	if sp := c.Speculative; sp != nil && sp.Buffers > 0 {
		runner += fmt.Sprintf(" + the drafter's buffers %v", sp.Buffers)
	}
	nonTorch := fmt.Sprint(c.NonTorch)
	if c.NCCL > 0 {
		nonTorch += fmt.Sprintf(" (NCCL %v of it)", c.NCCL)
	}
	switch {
	case c.CUDAGraphs > 0 && c.GraphsInBudget:
		graphs = fmt.Sprintf(" + CUDA graphs %v", c.CUDAGraphs)
	case c.CUDAGraphs > 0:
		beside = fmt.Sprintf("; CUDA graphs %v beside it, captured after the cache", c.CUDAGraphs)
	}
	if c.ExtensibleKVCache {
		fmt.Fprintf(w, "\nvLLM %s on %s: KV cache %v, sized after warmup and capture from the free memory: held weights %v%s + outside PyTorch %s + CUDA graphs %v; kept free the transient %v (profile-run activations %v + the graph estimate) and a margin %v; gpu_memory_utilization caps it at %v\n",
			c.Release.Release, r.Fit.GPU, kv.Available, c.Weights, runner, nonTorch, c.CUDAGraphs, c.TransientReserve, c.Activation, c.KVMargin, c.Requested)
	} else {
		fmt.Fprintf(w, "\nvLLM %s on %s: %v of the GPU (gpu_memory_utilization) = weights %v%s + profile-run activations %v + outside PyTorch %s%s + KV cache %v%s\n",
			c.Release.Release, r.Fit.GPU, c.Requested, c.Weights, runner, c.Activation, nonTorch, graphs, kv.Available, beside)
	}
	for _, n := range newNotes(c.Notes, generateNotes(r)) {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if sp := c.Speculative; sp != nil {
		page := ""
		if sp.KVPageBytes > 0 {
			page = fmt.Sprintf(", a %v page each", sp.KVPageBytes)
		}
		fmt.Fprintf(w, "  speculative decoding: %s, %d token(s) a step; draft: %s\n", sp.Method, sp.NumSpeculativeTokens, sp.Draft)
		fmt.Fprintf(w, "    draft weights      %10v   (inside the weights above)\n", sp.Weights)
		fmt.Fprintf(w, "    draft KV layers    %10d   (in the KV cache's pool%s)\n", sp.KVLayers, page)
		fmt.Fprintf(w, "    drafter's buffers  %10v   (taken before the KV cache)\n", sp.Buffers)
		if sp.DraftForward > 0 {
			fmt.Fprintf(w, "    draft's forward    %10v   (the profile run's dummy draft pass)\n", sp.DraftForward)
		}
		for _, n := range sp.Notes {
			fmt.Fprintf(w, "    note: %s\n", n)
		}
	}
	if c.Starts {
		pools := fmt.Sprintf("a %v page in each of %d pools", kv.PageBytes, kv.GroupSize)
		if kv.Compressed != nil {
			pools = "the largest group's pages, one pool of block ids"
		}
		fmt.Fprintf(w, "  KV cache: %d blocks of %d tokens (%v a block: %s, %d group(s)): GPU KV cache size %s tokens; maximum concurrency for %d tokens per request %.2fx\n",
			kv.Blocks, kv.BlockSize, kv.BlockBytes(), pools, len(kv.Groups), vram.Grouped(kv.Tokens), kv.MaxModelLen, kv.MaxConcurrency)
		if kv.StateLayers > 0 {
			attn, state := kv.PerRequestFor(kv.MaxModelLen)
			fmt.Fprintf(w, "  one request of %d tokens: attention KV %v + recurrent state %v (the state is the same at any length)\n", kv.MaxModelLen, attn, state)
		}
		for _, n := range kv.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if n := twoKVFigures(p, r.Inference, kv); n != "" {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		fmt.Fprintf(w, "  vLLM allocates the KV cache up front: nvidia-smi shows about %v whatever the load\n", c.DeviceUsed)
		fmt.Fprintf(w, "  vLLM's log will suggest --kv-cache-memory=%d (%v) to fit the requested memory, or %d (%v) to fill the GPU\n",
			int64(c.SuggestedKVCacheMemory), c.SuggestedKVCacheMemory, int64(c.SuggestedKVCacheMemoryGPU), c.SuggestedKVCacheMemoryGPU)
	} else {
		fmt.Fprintf(w, "  vLLM would not start: %s\n", c.Err)
	}
}

// generateNotes are the notes of transformers' generate, which the
// engines' notes leave out where they repeat them (none where the
// family's generate is not modelled).
func generateNotes(r answer.Report) []string {
	if r.Inference == nil {
		return nil
	}
	return r.Inference.Notes
}

// printSGLang prints SGLang's pool, as the release modelled sizes it.
func printSGLang(w io.Writer, r answer.Report) {
	sp := r.SGLang
	if sp == nil {
		return
	}
	fmt.Fprintf(w, "\nSGLang %s on %s: %v free at start; weights %v; kept free for activations and CUDA graphs %v (mem_fraction_static %.4g); KV pool %v = max_total_num_tokens %s (%v a token)\n",
		sp.Release.Release, r.Fit.GPU, sp.Free, sp.Weights, sp.Reserved, sp.MemFractionStatic, sp.Rest, vram.Grouped(sp.Tokens), sp.CellSize)
	if sp.NCCL+sp.CustomAllReduce > 0 {
		fmt.Fprintf(w, "  taken before the free memory is measured: NCCL %v (the TP communicator) + custom all-reduce %v\n", sp.NCCL, sp.CustomAllReduce)
	}
	if sp.MMReservation > 0 {
		fmt.Fprintf(w, "  the multimodal cache takes %v off the pool's budget (SGLANG_VLM_CACHE_SIZE_MB)\n", sp.MMReservation)
	}
	if sp.StateLayers > 0 {
		running := sp.MambaSlots
		if sp.RunningCap > 0 {
			running = sp.RunningCap // 0.5.23: a fifth of the slots
		}
		fmt.Fprintf(w, "  recurrent state pool: %d slots (max_mamba_cache_size) × %v a request = %v, taken before the KV pool; at most %d requests run at once\n",
			sp.MambaSlots, sp.StatePerRequest, sp.State, running)
	}
	for _, n := range newNotes(sp.Notes, generateNotes(r)) {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	printSGLangSpec(w, sp)
	if sp.Err != "" {
		fmt.Fprintf(w, "  SGLang would not start: %s\n", sp.Err)
	}
}

// printSGLangSpec prints what speculative decoding adds to SGLang's pool,
// the draft's lines apart from the model's above.
func printSGLangSpec(w io.Writer, p *vram.SGLangKVPool) {
	sp := p.Speculative
	if sp == nil {
		return
	}
	fmt.Fprintf(w, "  speculative decoding: %s, %d step(s) of topk %d, %d draft token(s) verified a step, at most %d requests running; draft: %s\n",
		sp.Algorithm, sp.NumSteps, sp.EagleTopK, sp.NumDraftTokens, sp.MaxRunningRequests, sp.Draft)
	if sp.Weights > 0 || sp.WeightsAtSizing > 0 {
		at := ""
		if sp.WeightsAtSizing > 0 {
			at = fmt.Sprintf("; %v held when the pool was sized, off its budget", sp.WeightsAtSizing)
		}
		fmt.Fprintf(w, "    draft weights      %10v   (beside the weights above%s)\n", sp.Weights, at)
	}
	if sp.KVLayers > 0 {
		in := ""
		if sp.CellInBudget > 0 {
			in = fmt.Sprintf("; %v a token priced into the pool's cell", sp.CellInBudget)
		}
		fmt.Fprintf(w, "    draft KV pool      %10v   (%d layer(s), %v a token × %s tokens%s)\n", sp.KVBytes, sp.KVLayers, sp.CellSize, vram.Grouped(sp.KVTokens), in)
	}
	if sp.HeadroomTokens > 0 {
		fmt.Fprintf(w, "    headroom slots     %10s   (given the model's pool past its budget)\n", vram.Grouped(sp.HeadroomTokens))
	}
	fmt.Fprintf(w, "    draft buffers      %10v   (CUDA graphs' inputs up to %d requests, or NGRAM's tables)\n", sp.Buffers, sp.GraphBS)
	if sp.DefaultReserve > 0 {
		fmt.Fprintf(w, "    default reserve    %10v   (kept free for the draft by the default fraction)\n", sp.DefaultReserve)
	}
	fmt.Fprintf(w, "    outside the budget %10v   (out of what mem_fraction_static keeps free)\n", sp.OutsideBudget)
	for _, n := range sp.Notes {
		fmt.Fprintf(w, "    note: %s\n", n)
	}
}

// printLlamaCppFit prints llama.cpp's automatic fit: what
// llama-fit-params prints, each device's projected use and the steps.
func printLlamaCppFit(w io.Writer, f *vram.LlamaCppFit) {
	if f == nil {
		return
	}
	if f.Status == "off" {
		fmt.Fprintf(w, "\nllama.cpp %s: --fit off (the settings as given)\n", f.Release.Release)
		return
	}
	fmt.Fprintf(w, "\nllama.cpp %s --fit: %s; context %d\n  llama-fit-params: %s\n", f.Release.Release, f.Status, f.CtxSize, f.Args)
	if f.Reason != "" {
		fmt.Fprintf(w, "  gave up: %s\n", f.Reason)
	}
	for _, d := range f.Devices {
		part := ""
		if d.Partial > 0 {
			part = fmt.Sprintf(" (%d without some FFN or experts)", d.Partial)
		}
		fmt.Fprintf(w, "  %s: %d layers%s; model %v + context %v + compute %v = %v of %v free (keeps %v)\n",
			d.Name, d.Layers, part, d.Model, d.Context, d.Compute, d.Used, d.Free, d.Margin)
	}
	fmt.Fprintf(w, "  host: model %v + context %v\n", f.Host.Model, f.Host.Context)
	for _, s := range f.Steps {
		fmt.Fprintf(w, "  step (common/fit.cpp %s\n", strings.Replace(s, ":", "):", 1))
	}
	for _, n := range f.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// printTraining prints a training plan's estimate: notes, the allocated
// peak by category, the sum of buckets and what offload keeps on the host.
// printReleases says which releases the answer modelled.
func printReleases(w io.Writer, rs []vram.Modelled) {
	if len(rs) == 0 {
		return
	}
	var say []string
	for _, m := range rs {
		s := orDefault(libraryNames[m.Library], m.Library) + " " + m.Release
		if m.Asked == "" {
			s += " (default)"
		}
		say = append(say, s)
	}
	fmt.Fprintf(w, "modelled releases: %s; a plan names others in \"versions\"\n", strings.Join(say, ", "))
	for _, m := range rs {
		if m.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", m.Note)
		}
	}
}

// libraryNames are the libraries as their projects write their names.
var libraryNames = map[string]string{"vllm": "vLLM", "sglang": "SGLang", "llama_cpp": "llama.cpp", "tgi": "TGI", "trl": "TRL", "peft": "PEFT", "deepspeed": "DeepSpeed", "ollama": "Ollama"}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func printTraining(w io.Writer, t *vram.TrainingEstimate) {
	if t == nil {
		return
	}
	fmt.Fprintf(w, "trainable parameters: %s\n\n", vram.Grouped(t.TrainableParams))
	for _, n := range t.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(t.Notes) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Peak allocated memory per GPU (torch.cuda.max_memory_allocated), at %s:\n", t.PeakAt.Where())
	fmt.Fprint(w, t.Peak.String())
	if t.PagedStates > 0 {
		fmt.Fprintf(w, "plus %v of paged optimizer states in unified memory (not counted by PyTorch's allocator)\n", t.PagedStates)
	}
	fmt.Fprintf(w, "\nEach category at its own maximum (sum of buckets): %v\n", t.Static.Total())
	if h := t.Host; h.Total() > 0 {
		fmt.Fprintf(w, "\nHost memory per rank for what is offloaded (most of it pinned):\n")
		fmt.Fprint(w, h.String())
	}
}

// printInference prints transformers' generate estimate of an inference plan.
func printInference(w io.Writer, in *vram.InferenceEstimate) {
	if in == nil {
		return
	}
	for _, n := range in.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "\nPeak allocated memory per GPU in transformers' generate, at %s:\n", in.PeakAt)
	fmt.Fprint(w, in.Peak.String())
	switch {
	case in.State > 0 && in.KVCache == 0:
		fmt.Fprintf(w, "\nState (recurrent layers): %v for all sequences, the same at any length; no KV cache\n", in.State)
	case in.State > 0:
		fmt.Fprintf(w, "\nKV cache (attention layers): %v per token per sequence, %v at the final length; state (recurrent layers): %v for all sequences, the same at any length\n", in.KVPerToken, in.KVCache, in.State)
	default:
		fmt.Fprintf(w, "\nKV cache: %v per token per sequence, %v at the final length\n", in.KVPerToken, in.KVCache)
	}
}

// printAdvice lists what would make the plan fit, each with its flags.
func printAdvice(w io.Writer, p vram.Plan, imp *importer.Imported, as []answer.AdviceLine) {
	if len(as) == 0 {
		return
	}
	who := "the plan"
	switch {
	case imp != nil:
		who = imp.Kind.Project()
	case p.Training != nil && p.Training.Framework != "":
		who = string(p.Training.Framework)
	case p.VLLM != nil:
		who = "vLLM"
	case p.PostTraining != nil:
		who = p.PostTraining.Framework
	}
	fmt.Fprintf(w, "\nTo make it fit (%s's settings; what fits first, the cheapest for the run first, then what saves most):\n", who)
	for _, a := range as {
		var fits string
		switch {
		case a.Fits && p.VLLM != nil:
			fits = "starts"
		case a.Fits:
			fits = "fits"
		case p.VLLM != nil:
			fits = "fails"
		case a.Over > 0:
			fits = fmt.Sprintf("%v over", a.Over)
		default:
			fits = "engine fails" // within the limit, but the rollout engine would not start
		}
		fmt.Fprintf(w, "  %-14s needs %-10v %s", fits, a.Need, a.Change)
		if a.Flags != "" {
			fmt.Fprintf(w, ": %s", a.Flags)
		}
		fmt.Fprintln(w)
	}
}

// twoKVFigures says why transformers' KV cache per token and vLLM's,
// printed one above the other, differ (by more than 5 %): what each
// counts, and the dtype each keeps it in.
func twoKVFigures(p vram.Plan, gen *vram.InferenceEstimate, kv vram.VLLMKVCache) string {
	if kv.BlockSize == 0 || kv.Layers == 0 || gen == nil {
		return ""
	}
	tf := gen.KVPerToken
	paged := kv.PageBytes * vram.Bytes(kv.Layers) / vram.Bytes(kv.BlockSize)
	if tf == 0 || paged == 0 || absDiff(paged, tf)*20 <= tf {
		return ""
	}
	dtype := func(d vram.DType, def string) string {
		if d == vram.DTypeUnset {
			return def
		}
		return d.String()
	}
	return fmt.Sprintf("two KV figures per token: transformers' generate keeps %v for each sequence (its cache's layout, in %s) and vLLM %v (a %v page of %d tokens in each of %d layers' pools, in %s, sized for the layers' kinds as vLLM groups them)",
		tf, dtype(p.Inference.KVDType, "the model's dtype"), paged, kv.PageBytes, kv.BlockSize, kv.Layers, dtype(p.VLLM.KVCacheDType, "the model's dtype (auto)"))
}

func absDiff(a, b vram.Bytes) vram.Bytes {
	if a > b {
		return a - b
	}
	return b - a
}

// newNotes are the notes of ns not already printed in seen.
func newNotes(ns, seen []string) []string {
	var out []string
	for _, n := range ns {
		if !slices.Contains(seen, n) {
			out = append(out, n)
		}
	}
	return out
}

// printGGUF summarises a GGUF file's header (what llama.cpp loads) and how
// the Ollama release loads it: from 0.30.0 llama-server's fit on -gpu,
// 0.11.10 its up-front estimate.
func printGGUF(w io.Writer, g *vram.GGUF, asJSON bool, o vram.Ollama, gpuName string) error {
	rel, err := o.Release()
	if err != nil {
		return err
	}
	upFront, _ := o.UpFront()
	var gpu *vram.GPU
	if gpuName != "" {
		x, err := vram.ParseCapacity(gpuName)
		if err != nil {
			return fmt.Errorf("gpu: %w", err)
		}
		gpu = &x
	}
	var est *vram.OllamaMemory
	var place *vram.OllamaPlacement
	var oerr error
	switch {
	case upFront:
		var e vram.OllamaMemory
		if e, oerr = o.Estimate(g); oerr == nil {
			est = &e
		}
	case gpu == nil:
		oerr = fmt.Errorf("Ollama %s loads the model on llama-server, whose fit places the layers by the GPUs' memory: name one with -gpu (and -gpus)", rel.Release)
	default:
		var p vram.OllamaPlacement
		if p, oerr = o.PlaceGGUF(g, gpu); oerr == nil {
			place = &p
		}
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Architecture string                `json:"architecture"`
			Version      uint32                `json:"version"`
			Tensors      int                   `json:"tensors"`
			Total        vram.Bytes            `json:"total"`
			ByType       map[string]vram.Bytes `json:"by_type"`
			Release      vram.Modelled         `json:"ollama_release"`
			Ollama       *vram.OllamaMemory    `json:"ollama,omitempty"`
			Placement    *vram.OllamaPlacement `json:"ollama_placement,omitempty"`
		}{g.Architecture(), g.Version, len(g.Tensors), g.Total(), g.ByType(), rel, est, place})
	}
	fmt.Fprintf(w, "GGUF v%d, architecture %q, %d tensors, %v of tensor data\n", g.Version, g.Architecture(), len(g.Tensors), g.Total())
	by := g.ByType()
	for _, name := range vram.GGMLTypes() {
		if b, ok := by[name]; ok {
			fmt.Fprintf(w, "  %-8s %12v\n", name, b)
		}
	}
	switch {
	case oerr != nil:
		fmt.Fprintf(w, "Ollama %s: %v\n", rel.Release, oerr)
	case place != nil:
		printOllama(w, place)
	default:
		printOllamaEstimate(w, *est, o, rel, gpu)
	}
	return nil
}

// printOllamaEstimate prints the up-front estimate of Ollama 0.11.10 and,
// with a GPU, its split of the layers.
func printOllamaEstimate(w io.Writer, est vram.OllamaMemory, o vram.Ollama, rel vram.Modelled, g *vram.GPU) {
	ctx := o.NumCtx
	if ctx == 0 {
		ctx = 4096
	}
	fmt.Fprintf(w, "Ollama %s's estimate (num_ctx %d × num_parallel %d, num_batch 512): KV cache %v, graph %v with every layer on the GPU (%v with some on the CPU), weights %v (%v in the blocks, %v output); all on one GPU: %v\n",
		rel.Release, ctx, max(o.NumParallel, 1), est.KV, est.GraphFull, est.GraphPartial, est.WeightsTotal, est.WeightsRepeating, est.WeightsNonRepeating, est.Full)
	if g != nil {
		n, used := est.Offload(g.Usable())
		fmt.Fprintf(w, "On %s (%v free after the CUDA context): %d of %d layers on the GPU, %v there; the rest on the CPU\n", g.Name, g.Usable(), n, est.Layers, used)
	}
}

// printOllama prints how an Ollama release loads the model: the settings
// it gives llama-server, each GPU's layers and memory, the CPU's, the
// steps with their lines.
func printOllama(w io.Writer, p *vram.OllamaPlacement) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "\nOllama %s: num_ctx %d × num_parallel %d, num_batch %d, --flash-attn %s, cache %s; %d of %d layers on the GPUs (llama.cpp's fit: %s)\n",
		p.Release.Release, p.NumCtx, p.NumParallel, p.NumBatch, p.FlashAttention, p.KVCacheType, p.Layers-p.CPULayers, p.Layers, p.Fit.Status)
	fmt.Fprintf(w, "  num_ctx: %s\n  llama-server %s", p.NumCtxFrom, p.Args)
	if p.Env != "" {
		fmt.Fprintf(w, " (env %s)", p.Env)
	}
	fmt.Fprintf(w, "; the fit: %s\n", p.Fit.Args)
	if p.Fit.Reason != "" {
		fmt.Fprintf(w, "  the fit gave up: %s\n", p.Fit.Reason)
	}
	for i, d := range p.Fit.Devices {
		fmt.Fprintf(w, "  %s (GPU %d): %d layers; weights %v + KV cache %v + compute %v = %v of %v free (keeps %v)\n",
			d.Name, p.GPUs[i], d.Layers, d.Model, d.Context, d.Compute, d.Used, d.Free, d.Margin)
	}
	fmt.Fprintf(w, "  CPU: %d layers; weights %v + KV cache %v\n", p.CPULayers, p.Fit.Host.Model, p.Fit.Host.Context)
	for _, s := range p.Steps {
		fmt.Fprintf(w, "  step: %s\n", s)
	}
	for _, s := range p.Fit.Steps {
		fmt.Fprintf(w, "  fit step (common/fit.cpp %s\n", strings.Replace(s, ":", "):", 1))
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// readGGUF reads a local GGUF file's header, or one on the hub
// (hf://org/name/file.gguf) by range requests.
func readGGUF(file string) (*vram.GGUF, error) {
	if !vram.IsHubRef(file) {
		return vram.ReadGGUF(file)
	}
	opt := hub.FromEnv()
	ctx, cancel := context.WithTimeout(context.Background(), opt.Timeout)
	defer cancel()
	return hub.ReadGGUF(ctx, file, opt)
}

// printImport says how a config became the plan: what each field became,
// what was assumed, what is not modelled and what was ignored.
func printImport(w io.Writer, name string, imp *importer.Imported) {
	if name != "" {
		fmt.Fprintln(w, name)
	}
	if imp == nil {
		return
	}
	fmt.Fprintf(w, "imported (%s config):\n", imp.Kind)
	for _, m := range imp.Mapped {
		fmt.Fprintf(w, "  %s\n", m)
	}
	for _, a := range imp.Assumed {
		fmt.Fprintf(w, "  assumed: %s\n", a)
	}
	for _, n := range imp.NotModelled {
		fmt.Fprintf(w, "  not modelled: %s\n", n)
	}
	if len(imp.Ignored) > 0 {
		fmt.Fprintf(w, "  ignored (no effect on GPU memory): %s\n", strings.Join(imp.Ignored, ", "))
	}
	fmt.Fprintln(w)
}
