// Package answer is what VRAM Lab answers about a plan: the estimate, the
// three measures from the allocator replay, the engines' carves, the fit
// verdict on the plan's GPU and the changes that would make it fit, and the
// releases modelled. The plan CLI's -json prints a Report; the MCP server
// (examples/mcp) returns the same; plan.schema.json and report.schema.json
// describe a plan and a Report (Schema writes them).
//
//	p, err := vram.ParsePlan(data, ".")
//	rep, err := answer.For(p, nil) // nil: a plan file, not an imported config
//	fmt.Println(rep.Measures.DeviceUsed, rep.Fit.Fits)
package answer

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/importer"
)

// Report is the answer about one plan (the plan CLI's -json).
type Report struct {
	Name   string `json:"name,omitempty"`
	Model  string `json:"model"`
	Params int64  `json:"params"`
	// Checkpoint is the checkpoint folder the model was read from.
	Checkpoint *vram.Checkpoint `json:"checkpoint,omitempty"`
	// Images describes a vision-language model's image side.
	Images    *Images                 `json:"images,omitempty"`
	Training  *vram.TrainingEstimate  `json:"training,omitempty"`
	Inference *vram.InferenceEstimate `json:"inference,omitempty"`
	// NoGenerate says why an inference plan that a serving engine runs
	// has no figures of transformers' generate (Inference and Measures
	// empty): the family's generate is not modelled (vram.ErrServingOnly),
	// and the engine's carve is the answer.
	NoGenerate string             `json:"no_generate,omitempty"`
	Peak       vram.Bytes         `json:"peak_allocated"`
	Measures   Measures           `json:"measures"`
	VLLM       *vram.VLLMCarve    `json:"vllm,omitempty"`
	SGLang     *vram.SGLangKVPool `json:"sglang,omitempty"`
	TGI        *vram.TGICarve     `json:"tgi,omitempty"`
	// LlamaCppFit is llama.cpp's automatic fit of the plan's llama_cpp
	// settings on its GPU (or llama_cpp.device_free).
	LlamaCppFit *vram.LlamaCppFit `json:"llama_cpp_fit,omitempty"`
	// Ollama is how the plan's Ollama release loads the model on its GPU
	// (or ollama.device_free): llama-server's flags and llama.cpp's fit.
	Ollama *vram.OllamaPlacement `json:"ollama,omitempty"`
	// PostTraining is a post-training step phase by phase; Phases
	// repeats its phases at the top level for scripts.
	PostTraining *PostTrainingReport `json:"post_training,omitempty"`
	Phases       []vram.Phase        `json:"phases,omitempty"`
	Fit          *Fit                `json:"fit,omitempty"`
	// Import says how a trainer's config or a server's command line
	// became the plan.
	Import *importer.Imported `json:"import,omitempty"`
	// PlanFile is the plan an imported config became, as a plan file: it
	// reads back to this answer (vram.Plan.File), to edit and estimate again.
	PlanFile json.RawMessage `json:"plan_file,omitempty"`
	// Advice are the changes that would make a plan that does not fit
	// fit, in the plan's framework's (or vLLM's) own flags.
	Advice []AdviceLine `json:"advice,omitempty"`
	// Variants are the answer under a setting the plan cannot know but
	// the user's script decides (variants.go).
	Variants []Variant `json:"variants,omitempty"`
	// Releases are the releases the answer modelled, for each library
	// whose rules change with its release (the plan's "versions"; unset:
	// the current release).
	Releases []vram.Modelled `json:"releases,omitempty"`
}

// AdviceLine is one suggested change.
type AdviceLine struct {
	Change string     `json:"change"`
	Flags  string     `json:"flags,omitempty"` // as the framework takes it
	Fits   bool       `json:"fits"`
	Need   vram.Bytes `json:"need"`           // the changed plan's figure on the GPU
	Over   vram.Bytes `json:"over,omitempty"` // how far past the limit it still is
}

// Images is a vision-language model's image side as the plan runs it.
type Images struct {
	Tower       string `json:"tower"`        // the tower's family
	TowerParams int64  `json:"tower_params"` // its parameters
	Tokens      int    `json:"tokens"`       // each image's tokens in the sequence
	PerSequence int    `json:"per_sequence"` // images per sequence (prompt)
	Trainable   bool   `json:"trainable"`    // the tower trains
	// NotRun: the tower's forward is not modelled (vram.Vision.TowerRuns):
	// its weights load, the plan runs the text alone.
	NotRun bool `json:"not_run,omitempty"`
}

// Measures are the three figures a run is judged by: what PyTorch reports
// as allocated and reserved at their peaks, and what nvidia-smi shows
// (reserved plus the CUDA context and NCCL's buffers), from the allocator
// replay on the plan's GPU (a default context where the plan names none).
type Measures struct {
	Allocated  vram.Bytes `json:"allocated"`   // torch.cuda.max_memory_allocated (with cuBLAS's workspace)
	Reserved   vram.Bytes `json:"reserved"`    // torch.cuda.max_memory_reserved
	DeviceUsed vram.Bytes `json:"device_used"` // nvidia-smi
	Context    vram.Bytes `json:"context"`     // the CUDA context in device_used
	NCCL       vram.Bytes `json:"nccl"`        // NCCL's buffers in device_used
	NCCLNote   string     `json:"nccl_note,omitempty"`
	Workspace  vram.Bytes `json:"workspace"` // cuBLAS's workspace in allocated
}

// Fit judges the plan on its target GPU on device-used, keeping Margin free.
type Fit struct {
	GPU      string     `json:"gpu"`
	Capacity vram.Bytes `json:"capacity"`
	Margin   float64    `json:"margin"` // share of the GPU kept free
	vram.Verdict
}

// For answers plan p: imp says how it was imported from a config (nil for
// a plan file), and its kind chooses the flags the advice is printed in.
func For(p vram.Plan, imp *importer.Imported) (Report, error) {
	rep := Report{Name: p.Name, Model: p.ModelRef, Params: p.Model.ParamCount(), Checkpoint: p.Checkpoint, Import: imp}
	if imp != nil {
		rep.PlanFile, _ = p.File() // none where a setting has no plan-file form (a speculative draft model)
	}
	var err error
	if rep.Releases, err = p.Releases(); err != nil {
		return rep, err
	}
	if v := p.Model.Vision; v != nil {
		im := &Images{Tower: v.Tower.Family, TowerParams: v.Tower.ParamCount(), Tokens: v.ImageTokens(), PerSequence: 1}
		if !v.TowerRuns() {
			im.PerSequence, im.NotRun = 0, true
		} else if t := p.Training; t != nil {
			im.PerSequence, im.Trainable = max(1, t.Images), t.VisionTower == "trainable"
		} else if p.Inference != nil {
			im.PerSequence = max(1, p.Inference.Images)
		}
		rep.Images = im
	}
	if p.PostTraining != nil {
		return forPostTraining(p, rep)
	}
	if p.Training != nil {
		est, err := p.Training.Estimate()
		if err != nil {
			return rep, err
		}
		rep.Training, rep.Peak = &est, est.Peak.Total()
		if rep.Variants, err = variants(*p.Training, est); err != nil {
			return rep, err
		}
	} else {
		est, err := p.Inference.Estimate()
		switch {
		case err == nil:
			rep.Inference, rep.Peak = &est, est.Peak.Total()
		case served(p) && errors.Is(err, vram.ErrServingOnly):
			rep.NoGenerate = err.Error()
		default:
			return rep, err
		}
	}
	var g *vram.GPU
	if p.GPU != "" {
		x, err := vram.ParseCapacity(p.GPU)
		if err != nil {
			return rep, fmt.Errorf("gpu: %w", err)
		}
		g = &x
	}
	if rep.NoGenerate == "" {
		var replay vram.Replay
		if p.Training != nil {
			replay, err = p.Training.Replay(vram.ReplayOptions{GPU: g, Torch: p.Versions.Torch})
		} else {
			replay, err = p.Inference.Replay(vram.ReplayOptions{GPU: g, Torch: p.Versions.Torch})
		}
		if err != nil {
			return rep, err
		}
		rep.Measures = Measures{Allocated: replay.PeakAllocated, Reserved: replay.PeakReserved, DeviceUsed: replay.DeviceUsed,
			Context: replay.Context, NCCL: replay.NCCL, NCCLNote: replay.NCCLNote, Workspace: replay.Workspace}
	}
	if p.VLLM != nil && g != nil {
		c, err := p.VLLM.Carve(*p.Inference, *g)
		if err != nil {
			return rep, fmt.Errorf("vllm: %w", err)
		}
		rep.VLLM = &c
	}
	if p.TGI != nil && g != nil {
		c, err := p.TGI.Carve(*p.Inference, *g)
		if err != nil {
			return rep, fmt.Errorf("tgi: %w", err)
		}
		rep.TGI = &c
	}
	if l := p.LlamaCpp; l != nil && (g != nil || len(l.DeviceFree) > 0) {
		f, err := l.FitParams(p.Model, g)
		if err != nil {
			return rep, fmt.Errorf("llama_cpp: %w", err)
		}
		rep.LlamaCppFit = &f
	}
	if o := p.Ollama; o != nil && (g != nil || len(o.DeviceFree) > 0) {
		pl, err := o.Place(p.Model, g)
		if err != nil {
			return rep, fmt.Errorf("ollama: %w", err)
		}
		rep.Ollama = &pl
	}
	if p.SGLang != nil && g != nil {
		pool, err := p.SGLang.Carve(*p.Inference, *g)
		if err != nil {
			return rep, fmt.Errorf("sglang: %w", err)
		}
		rep.SGLang = &pool
	}
	if g != nil {
		v, err := vram.Budget{GPU: *g, Headroom: Margin}.JudgePlan(p)
		if err != nil {
			return rep, err
		}
		if served(p) {
			rep.Fit = &Fit{GPU: g.Name, Capacity: g.Total(), Verdict: v} // the engine's own share is its headroom
		} else {
			rep.Fit = &Fit{GPU: g.Name, Capacity: g.Total(), Margin: Margin, Verdict: v}
		}
		if !v.Fits {
			if rep.Advice, err = advise(p, *g, importKind(imp)); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// served reports whether a serving engine runs the plan: its verdict is
// then the engine's carve (vram.Budget.JudgePlan), not transformers'
// generate.
func served(p vram.Plan) bool { return p.VLLM != nil || p.SGLang != nil || p.TGI != nil }

// maxAdvice is how many suggestions a plan that does not fit gets.
const maxAdvice = 5

// advise is what would make the plan fit g: the advisor's changes for a
// training plan, in its framework's flags; vLLM's own remedies for a vLLM
// launch.
func advise(p vram.Plan, g vram.GPU, kind importer.Kind) ([]AdviceLine, error) {
	var out []AdviceLine
	switch {
	case p.Training != nil:
		as, err := vram.Advise(*p.Training, vram.Budget{GPU: g, Headroom: Margin})
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			keys := importer.Keys(a, kind)
			if keys == "" && kind != "" {
				keys = "(no setting in " + kind.Project() + "'s config)"
			}
			out = append(out, AdviceLine{Change: a.Change, Flags: keys, Fits: a.Fits, Need: a.Need, Over: a.Over})
		}
	case p.VLLM != nil:
		as, err := p.VLLM.Advise(*p.Inference, g)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			out = append(out, AdviceLine{Change: a.Why, Flags: a.Flag, Fits: a.Starts, Need: a.Carve.DeviceUsed})
		}
	}
	if len(out) > maxAdvice {
		out = out[:maxAdvice]
	}
	return out, nil
}

func importKind(imp *importer.Imported) importer.Kind {
	if imp == nil {
		return ""
	}
	return imp.Kind
}

// Margin is the share of the GPU a plan must leave free to be called a
// fit: room for what no model counts (other processes, library buffers a
// release adds, a data loader's pinned memory on the device); the reports
// and comparisons keep the same.
const Margin = vram.DefaultHeadroom
