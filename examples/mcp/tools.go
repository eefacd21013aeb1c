package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/answer"
	"github.com/vramlab/vramlab/vram/importer"
)

// toolDef is one tool: its arguments (name → schema; required ones
// listed), what its answer follows, and what it does.
type toolDef struct {
	name, title, description string
	args                     map[string]any
	required                 []string
	output                   any // a schema; nil for none
	run                      func(a args) (any, error)
}

func tools() ([]toolDef, error) {
	plan, err := schema("plan")
	if err != nil {
		return nil, err
	}
	report, err := schema("report")
	if err != nil {
		return nil, err
	}
	gpu := map[string]any{"type": "string", "description": "the GPU: a catalog name (the gpus tool) or a capacity such as \"80GB\"; replaces the plan's"}
	return []toolDef{
		{name: "estimate", title: "Estimate a plan's GPU memory",
			description: "The answer plan -json gives for a plan: the peak allocated memory by category and where it happens, the three measures (allocated, reserved, nvidia-smi's device used), the serving engine's carve, the verdict on the plan's GPU with the changes that would make it fit, and the releases modelled.",
			args:        map[string]any{"plan": plan, "gpu": gpu}, required: []string{"plan"}, output: report,
			run: func(a args) (any, error) { return estimate(a, false) }},
		{name: "fit", title: "Will it fit, and what makes it fit",
			description: "Judges a plan on a GPU (the plan's, or gpu): fits or not on nvidia-smi's device-used keeping a margin free (a serving engine: on what the engine takes of the card), and, where it does not fit, the cheapest changes that would, each in the plan's framework's own flags. The answer is estimate's, with fit and advice set.",
			args:        map[string]any{"plan": plan, "gpu": gpu}, required: []string{"plan"}, output: report,
			run: func(a args) (any, error) { return estimate(a, true) }},
		{name: "import", title: "Import a trainer's or engine's config",
			description: "Reads a trainer's config (axolotl, LLaMA-Factory, torchtune, torchtitan, HF Trainer, Megatron, DeepSpeed, accelerate, verl) or a serving command line (vllm serve, sglang launch_server, llama.cpp) given as text, and answers as estimate does, with what each field became, what was not read, and plan_file: the plan as a plan file, to edit and send to estimate again. Files the config names are not read: put their settings in the config.",
			args: map[string]any{
				"config":    map[string]any{"type": "string", "description": "the config's or command line's text"},
				"kind":      map[string]any{"type": "string", "enum": importer.Kinds(), "description": "the config's kind where its content does not say"},
				"name":      map[string]any{"type": "string", "description": "the config's file name, whose extension tells YAML from TOML from a command line (train.yaml)"},
				"model":     map[string]any{"type": "string", "description": "the model where the config names none, or one the catalog lacks: a catalog name"},
				"gpu":       gpu,
				"gpus":      map[string]any{"type": "integer", "minimum": 1, "description": "the launch's world size"},
				"overrides": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "key=value settings after the config"},
			}, required: []string{"config"}, output: report, run: importConfig},
		{name: "explain_log", title: "An engine's startup log beside the prediction",
			description: "Reads a vLLM or SGLang startup log (the lines up to the first request) and sets each memory figure it printed — weights, KV cache, its tokens, concurrency, CUDA graphs — beside the figure predicted for the plan that ran it: the plan given, or the one the log's own args make (vLLM's non-default args, SGLang's server_args). A llama.cpp log (llama-server or llama-cli, run with -lv 4 from build b9161; or llama-fit-params' output) needs its plan, with its llama_cpp settings: its model, KV and compute buffers per device, context, layers offloaded, memory breakdown and fit are set beside llama.cpp's load and fit as modelled, compute buffers (not modelled) and free memory taken from the log. The log's release is modelled where the plan names none.",
			args: map[string]any{
				"log":  map[string]any{"type": "string", "description": "the engine's log text"},
				"plan": plan, "gpu": gpu,
			}, required: []string{"log"}, run: explainLog},
		{name: "search", title: "Search a training run's layouts, or a model's vLLM launches",
			description: "For a plan vLLM serves (inference with vllm): every vLLM launch on up to gpus GPUs — tensor parallel degree, data-parallel replicas, KV cache in bf16 or fp8, weights as released or fp8 — that starts and holds one request of the plan's context, ranked by the requests all hold at once, each with its carve and its vllm serve line. For a training plan: lays it out on a number of GPUs: every tensor, pipeline, context and sharded data-parallel degree, micro-batch and recompute policy the plan's framework supports (what the plan sets stays), keeps those that fit the GPU, replays the fastest and ranks them by a step-time bound with communication (a bound to rank layouts, not a forecast). Each layout comes as a plan, its figures (the estimate's and the replay's of that plan) and its framework's launch flags. The plan may leave micro_batch out when it has a search section.",
			args: map[string]any{"plan": plan, "gpu": gpu,
				"gpus":         map[string]any{"type": "integer", "minimum": 1, "description": "the GPUs to lay the run out on (else the plan's search.gpus)"},
				"global_batch": map[string]any{"type": "integer", "minimum": 1, "description": "sequences an optimizer step (else the plan's search.global_batch, else one a GPU)"},
				"top":          map[string]any{"type": "integer", "minimum": 1, "description": "how many layouts to give, the fastest first (default 10)"},
			}, required: []string{"plan"}, run: searchLayouts},
		{name: "presets", title: "The catalog's models",
			description: "The models a plan can name by catalog name: each with its family (config.json's model_type) and parameter count.",
			args:        map[string]any{"contains": map[string]any{"type": "string", "description": "only names containing this (case-insensitive)"}},
			run:         presets},
		{name: "gpus", title: "The catalog's GPUs",
			description: "The GPUs a plan can name: each with its memory, what CUDA reports as total, its architecture and compute capability, the CUDA context a PyTorch process takes, and its dense BF16 peak where published.",
			args:        map[string]any{}, run: gpus},
	}, nil
}

// tool is the tool as the protocol lists it.
func (t toolDef) tool() *mcp.Tool {
	in := map[string]any{"type": "object", "properties": t.args, "additionalProperties": false}
	if len(t.required) > 0 {
		in["required"] = t.required
	}
	tool := &mcp.Tool{Name: t.name, Title: t.title, Description: t.description, InputSchema: in,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)}}
	if t.output != nil {
		tool.OutputSchema = t.output
	}
	return tool
}

// handler runs the tool: an answer as structured content (and as JSON
// text), or the error, which names the field and the rule, as the tool's
// error result.
func (t toolDef) handler() mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, err := readArgs(req.Params.Arguments, t.args, t.required)
		var out any
		if err == nil {
			out, err = t.run(a)
		}
		if err != nil {
			r := &mcp.CallToolResult{}
			r.SetError(err)
			return r, nil
		}
		text, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: out}, nil
	}
}

// args are a call's arguments, each as given.
type args map[string]json.RawMessage

// readArgs checks a call's arguments against the tool's: an object of
// known names, the required ones present (their size is bounded by the
// transport's maxMessage, each value by its reader's budget).
func readArgs(raw json.RawMessage, known map[string]any, required []string) (args, error) {
	a := args{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("arguments: want an object of %s: %v", strings.Join(slices.Sorted(maps.Keys(known)), ", "), err)
		}
	}
	for k := range a {
		if _, ok := known[k]; !ok {
			return nil, fmt.Errorf("arguments.%s: unknown field; known: %s", k, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
	}
	for _, k := range required {
		if v, ok := a[k]; !ok || string(v) == "null" {
			return nil, fmt.Errorf("arguments.%s: required", k)
		}
	}
	return a, nil
}

// str is argument k as a string ("" when absent).
func (a args) str(k string) (string, error) {
	var s string
	if v, ok := a[k]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("arguments.%s: want a string", k)
		}
	}
	return s, nil
}

// plan is argument "plan": a plan file's content, read from it alone.
func (a args) plan() (vram.Plan, error) {
	raw := bytes.TrimSpace(a["plan"])
	if len(raw) == 0 || raw[0] != '{' {
		return vram.Plan{}, errors.New(`arguments.plan: want a plan object ({"model": …, "train" or "inference": …}; the plan schema)`)
	}
	if len(raw) > vram.MaxPlanFile {
		return vram.Plan{}, fmt.Errorf("arguments.plan: %d bytes, more than a plan's %d", len(raw), vram.MaxPlanFile)
	}
	p, err := vram.ParsePlanContent(raw)
	if err != nil {
		return p, fmt.Errorf("arguments.plan: %w", err)
	}
	return p, nil
}

// gpu sets the plan's GPU from argument "gpu", checked as the CLI checks it.
func (a args) gpu(p *vram.Plan) error {
	g, err := a.str("gpu")
	if err != nil || g == "" {
		return err
	}
	if _, err := vram.ParseCapacity(g); err != nil {
		return fmt.Errorf("arguments.gpu: %w", err)
	}
	p.GPU = g
	return nil
}

func estimate(a args, fit bool) (any, error) {
	p, err := a.plan()
	if err != nil {
		return nil, err
	}
	if err := a.gpu(&p); err != nil {
		return nil, err
	}
	if fit && p.GPU == "" {
		return nil, errors.New(`arguments.gpu: fit needs a GPU: the plan's "gpu" or this argument (the gpus tool lists them)`)
	}
	return answer.For(p, nil)
}
