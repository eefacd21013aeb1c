package vram

import (
	"fmt"
	"sort"
	"strings"
)

// The serving search: every way vLLM can serve a model on up to a node's
// GPUs of one kind — tensor and pipeline parallel degrees, the KV cache's
// dtype, the weights as released or in fp8 — each carved as the release does
// (VLLM.Carve), those that start and hold one request of the context kept,
// ranked by how many requests of the context the GPUs hold at once (data
// parallel replicas of the tensor-parallel group, each its own cache).
// What the launch sets stays.
//
//	res, err := vram.SearchServing(vram.ServingSpace{Inference: in, GPU: h100, GPUs: 8, Context: 32768})

// ServingSpace is what to search: the model to serve (Inference: its
// model and weights), the vLLM settings that stay (its release,
// gpu_memory_utilization, …; a tensor_parallel_size,
// pipeline_parallel_size or kv_cache_dtype it sets is not searched), the
// GPU and how many at most, and the tokens of one request.
type ServingSpace struct {
	Inference Inference
	Launch    VLLM
	GPU       GPU
	GPUs      int
	Context   int
}

// ServingLayout is one searched launch.
type ServingLayout struct {
	VLLM VLLM `json:"vllm"`
	// Weights is the weights' format the launch loads ("as released", or
	// a quantization vLLM applies at load).
	Weights string    `json:"weights"`
	Carve   VLLMCarve `json:"carve"`
	// Replicas are the data-parallel copies of the tensor-parallel group
	// on the GPUs; Concurrency the requests of the context all hold at
	// once (Replicas × the carve's).
	Replicas    int     `json:"replicas"`
	Concurrency float64 `json:"concurrency"`
	Command     string  `json:"command"` // the vllm serve line
}

// SearchServing searches s's launches (see the file's comment).
func SearchServing(s ServingSpace) ([]ServingLayout, error) {
	switch {
	case s.GPUs < 1 || s.GPUs > 1<<10:
		return nil, fmt.Errorf("search: gpus must be in [1, %d], got %d", 1<<10, s.GPUs)
	case s.Context < 1 || s.Context > MaxTokens:
		return nil, fmt.Errorf("search: context must be in [1, %d] tokens, got %d", MaxTokens, s.Context)
	}
	m := s.Inference.Model.Normalize()
	var out []ServingLayout
	var firstErr error
	for _, g := range s.grids(m) {
		for _, kv := range kvChoices(s.Launch.KVCacheDType) {
			for _, w := range weightChoices(s.Inference, m) {
				l, err := s.serve(g[0], g[1], kv, w)
				switch {
				case err != nil && firstErr == nil:
					firstErr = err
				case err == nil && l.Carve.Starts && l.Carve.KVCache.Fits:
					out = append(out, l)
				}
			}
		}
	}
	if len(out) == 0 && firstErr != nil {
		return nil, firstErr
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Concurrency != out[j].Concurrency {
			return out[i].Concurrency > out[j].Concurrency
		}
		if out[i].VLLM.TP*out[i].VLLM.PP != out[j].VLLM.TP*out[j].VLLM.PP {
			return out[i].VLLM.TP*out[i].VLLM.PP < out[j].VLLM.TP*out[j].VLLM.PP
		}
		return out[i].VLLM.PP < out[j].VLLM.PP
	})
	return out, nil
}

// grids are the (tensor, pipeline) degrees to search: powers of two up to
// 8 whose product the GPUs hold, tensor parallelism dividing the heads,
// at most a stage a layer; a degree the launch sets stays.
func (s ServingSpace) grids(m Model) [][2]int {
	var out [][2]int
	for _, tp := range fixedOr(s.Launch.TP, 1, 2, 4, 8) {
		for _, pp := range fixedOr(s.Launch.PP, 1, 2, 4, 8) {
			if tp*pp <= s.GPUs && m.Heads%tp == 0 && pp <= max(1, m.Layers) {
				out = append(out, [2]int{tp, pp})
			}
		}
	}
	return out
}

// serve carves one launch: tensor parallel tp, pipeline parallel pp, KV
// cache kv, weights w; the GPUs left hold data-parallel replicas.
func (s ServingSpace) serve(tp, pp int, kv DType, w Quant) (ServingLayout, error) {
	v := s.Launch
	v.TP, v.PP, v.KVCacheDType, v.MaxModelLen = tp, pp, kv, s.Context
	in := s.Inference
	in.Weights = w
	c, err := v.Carve(in, s.GPU)
	if err != nil {
		return ServingLayout{}, err
	}
	l := ServingLayout{VLLM: v, Weights: "as released", Carve: c, Replicas: s.GPUs / (tp * pp)}
	if w.DType != DTypeUnset {
		l.Weights = w.DType.String()
	}
	l.Concurrency = float64(l.Replicas) * c.KVCache.MaxConcurrencyFor(s.Context)
	l.Command = v.serveLine(in.Model.Name, w, l.Replicas)
	return l, nil
}

// kvChoices are the KV cache dtypes to search: the launch's, else bf16
// and fp8 (--kv-cache-dtype fp8, e4m3).
func kvChoices(fixed DType) []DType {
	if fixed != DTypeUnset {
		return []DType{fixed}
	}
	return []DType{BF16, FP8E4M3}
}

// weightChoices are the weights to search: the plan's, else the model as
// released and, for a release in 16 bits, fp8 (vLLM's --quantization fp8,
// quantized at load).
func weightChoices(in Inference, m Model) []Quant {
	if in.Weights.DType != DTypeUnset || m.Release.Quantized() {
		return []Quant{in.Weights}
	}
	return []Quant{{}, {DType: FP8E4M3}}
}

// serveLine is the launch as `vllm serve` takes it.
func (v VLLM) serveLine(model string, w Quant, replicas int) string {
	if model == "" {
		model = "MODEL"
	}
	f := []string{"vllm serve " + model, fmt.Sprintf("--tensor-parallel-size %d", max(1, v.TP)), fmt.Sprintf("--max-model-len %d", v.MaxModelLen)}
	if v.PP > 1 {
		f = append(f, fmt.Sprintf("--pipeline-parallel-size %d", v.PP))
	}
	if replicas > 1 {
		f = append(f, fmt.Sprintf("--data-parallel-size %d", replicas))
	}
	if v.KVCacheDType == FP8E4M3 {
		f = append(f, "--kv-cache-dtype fp8")
	}
	if w.DType == FP8E4M3 {
		f = append(f, "--quantization fp8")
	}
	if v.GPUMemoryUtilization > 0 {
		f = append(f, fmt.Sprintf("--gpu-memory-utilization %g", v.GPUMemoryUtilization))
	}
	return strings.Join(f, " ")
}

// ServingSpaceOn is the serving search of a plan vLLM serves, on up to
// gpus GPUs g: its model and weights, its launch's settings but
// max_model_len, and requests of its context — the launch's
// max_model_len, else the inference's prompt and new tokens.
func (p Plan) ServingSpaceOn(g GPU, gpus int) ServingSpace {
	s := ServingSpace{GPU: g, GPUs: gpus}
	if p.Inference == nil || p.VLLM == nil {
		return s
	}
	s.Inference, s.Launch = *p.Inference, *p.VLLM
	s.Context, s.Launch.MaxModelLen = s.Launch.MaxModelLen, 0
	if s.Context == 0 {
		s.Context = p.Inference.PromptTokens + p.Inference.NewTokens
	}
	return s
}
