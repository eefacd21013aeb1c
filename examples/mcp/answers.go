package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/answer"
	"github.com/vramlab/vramlab/vram/importer"
)

// importConfig imports a config's text, sealed: nothing it names is read.
func importConfig(a args) (any, error) {
	text, err := a.str("config")
	if err != nil {
		return nil, err
	}
	if len(text) > vram.MaxConfigFile {
		return nil, fmt.Errorf("arguments.config: %d bytes, more than a config's %d", len(text), vram.MaxConfigFile)
	}
	opt := importer.Options{Sealed: true}
	var kind, name string
	for _, f := range []struct {
		k string
		s *string
	}{{"kind", &kind}, {"name", &name}, {"model", &opt.Model}, {"gpu", &opt.GPU}} {
		if *f.s, err = a.str(f.k); err != nil {
			return nil, err
		}
	}
	opt.Kind = importer.Kind(kind)
	if name == "" {
		name = "config"
	}
	if strings.ContainsAny(name, `/\`) {
		return nil, errors.New("arguments.name: a file name, not a path (nothing is read from it)")
	}
	if raw, ok := a["gpus"]; ok {
		if err := json.Unmarshal(raw, &opt.GPUs); err != nil || opt.GPUs < 1 {
			return nil, errors.New("arguments.gpus: want a whole number of GPUs, 1 or more")
		}
	}
	if raw, ok := a["overrides"]; ok {
		if err := json.Unmarshal(raw, &opt.Overrides); err != nil {
			return nil, errors.New(`arguments.overrides: want a list of "key=value" strings`)
		}
	}
	if opt.GPU != "" {
		if _, err := vram.ParseCapacity(opt.GPU); err != nil {
			return nil, fmt.Errorf("arguments.gpu: %w", err)
		}
	}
	imp, err := importer.Import(name, []byte(text), opt)
	if err != nil {
		return nil, fmt.Errorf("arguments.config: %w", err)
	}
	if opt.GPU != "" {
		imp.Plan.GPU = opt.GPU
	}
	return answer.For(imp.Plan, &imp)
}

// explainLog sets a log beside the plan given, or the plan the log's own
// args make (vLLM's non-default args, SGLang's server_args).
func explainLog(a args) (any, error) {
	text, err := a.str("log")
	if err != nil {
		return nil, err
	}
	g, err := a.str("gpu")
	if err != nil {
		return nil, err
	}
	var p *vram.Plan
	if a["plan"] != nil {
		x, err := a.plan()
		if err != nil {
			return nil, err
		}
		p = &x
	}
	ex, err := answer.ExplainEngineLog([]byte(text), p, g)
	if err != nil {
		return nil, fmt.Errorf("arguments.%w", err)
	}
	return ex, nil
}

// presetList is the presets tool's answer.
type presetList struct {
	Presets []presetEntry `json:"presets"`
}

type presetEntry struct {
	Name   string `json:"name"`
	Family string `json:"family"`
	Params int64  `json:"params"`
}

func presets(a args) (any, error) {
	sub, err := a.str("contains")
	if err != nil {
		return nil, err
	}
	out := presetList{Presets: []presetEntry{}}
	for _, n := range vram.Presets() {
		if !strings.Contains(strings.ToLower(n), strings.ToLower(sub)) {
			continue
		}
		p, err := vram.LookupPreset(n)
		if err != nil {
			return nil, err
		}
		out.Presets = append(out.Presets, presetEntry{Name: n, Family: p.Model.Family, Params: p.Model.ParamCount()})
	}
	return out, nil
}

// gpuList is the gpus tool's answer.
type gpuList struct {
	GPUs []vram.GPU `json:"gpus"`
}

func gpus(args) (any, error) {
	var out gpuList
	for _, n := range vram.GPUs() {
		g, err := vram.ParseCapacity(n)
		if err != nil {
			return nil, err
		}
		out.GPUs = append(out.GPUs, g)
	}
	return out, nil
}

// schema is a published schema (plan or report) as an object.
func schema(which string) (map[string]any, error) {
	b, err := answer.Schema(which)
	if err != nil {
		return nil, err
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	delete(s, "$schema")
	return s, nil
}

// searchLayouts is the search tool's answer: vram.Search's, the fastest
// top layouts.
func searchLayouts(a args) (any, error) {
	p, err := a.plan()
	if err != nil {
		return nil, err
	}
	if err := a.gpu(&p); err != nil {
		return nil, err
	}
	if p.Training == nil && (p.Inference == nil || p.VLLM == nil) {
		return nil, errors.New(`arguments.plan: search lays out a training plan ("train") or one vLLM serves ("inference" with "vllm")`)
	}
	if p.GPU == "" {
		return nil, errors.New(`arguments.gpu: search needs a GPU: the plan's "gpu" or this argument (the gpus tool lists them)`)
	}
	g, err := vram.ParseCapacity(p.GPU)
	if err != nil {
		return nil, fmt.Errorf("arguments.gpu: %w", err)
	}
	if p.Training == nil {
		return searchServing(a, p, g)
	}
	s := p.SearchSpaceOn(g)
	top := 10
	for _, f := range []struct {
		key string
		to  *int
	}{{"gpus", &s.GPUs}, {"global_batch", &s.GlobalBatch}, {"top", &top}} {
		if raw, ok := a[f.key]; ok {
			if err := json.Unmarshal(raw, f.to); err != nil || *f.to < 1 {
				return nil, fmt.Errorf("arguments.%s: want a whole number, 1 or more", f.key)
			}
		}
	}
	if s.GPUs < 1 {
		return nil, errors.New("arguments.gpus: required where the plan has no search.gpus")
	}
	res, err := vram.Search(s)
	if err != nil {
		return nil, err
	}
	res.Layouts = res.Layouts[:min(top, len(res.Layouts))]
	return res, nil
}

// searchServing is the search tool's answer for a plan vLLM serves: the
// launches on up to gpus GPUs that hold the most requests of the plan's
// context (its vllm max_model_len, else prompt and new tokens).
func searchServing(a args, p vram.Plan, g vram.GPU) (any, error) {
	gpus, top := 0, 10
	for _, f := range []struct {
		key string
		to  *int
	}{{"gpus", &gpus}, {"top", &top}} {
		if raw, ok := a[f.key]; ok {
			if err := json.Unmarshal(raw, f.to); err != nil || *f.to < 1 {
				return nil, fmt.Errorf("arguments.%s: want a whole number, 1 or more", f.key)
			}
		}
	}
	if gpus < 1 {
		return nil, errors.New("arguments.gpus: required: the GPUs the model may be served on")
	}
	res, err := vram.SearchServing(p.ServingSpaceOn(g, gpus))
	if err != nil {
		return nil, err
	}
	return map[string]any{"launches": res[:min(top, len(res))]}, nil
}
