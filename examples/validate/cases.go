package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// Case is one measured run (testdata/cases-format.md describes every field).
type Case struct {
	ID       string          `json:"id"`
	Source   string          `json:"source"`
	Trust    string          `json:"trust"`
	Kind     string          `json:"kind"`
	Model    json.RawMessage `json:"model"`
	Train    *caseTrain      `json:"train"`
	Infer    *caseInfer      `json:"inference"`
	GPU      string          `json:"gpu"`
	Measured struct {
		What    string  `json:"what"`
		GiB     float64 `json:"gib"`
		Meaning string  `json:"meaning"`
	} `json:"measured"`
	Notes string `json:"notes"`
}

type caseTrain struct {
	SeqLen              int        `json:"seq_len"`
	MicroBatch          int        `json:"micro_batch"`
	GradAccum           int        `json:"grad_accum"`
	WeightsDType        string     `json:"weights_dtype"`
	ComputeDType        string     `json:"compute_dtype"`
	Autocast            bool       `json:"autocast"`
	MasterWeights       string     `json:"master_weights"`
	GradsDType          string     `json:"grads_dtype"`
	Optimizer           string     `json:"optimizer"`
	OptimizerStateDType string     `json:"optimizer_state_dtype"`
	OptimizerInBackward bool       `json:"optimizer_in_backward"`
	Trainable           string     `json:"trainable"`
	LoRA                *vram.LoRA `json:"lora"`
	QuantizedBase       string     `json:"quantized_base"`
	QuantizedModules    string     `json:"quantized_modules"`
	GroupSize           int        `json:"group_size"`
	DoubleQuant         bool       `json:"double_quant"`
	Checkpointing       string     `json:"grad_checkpointing"`
	Attention           string     `json:"attention"`
	FusedLoss           bool       `json:"fused_loss"`
	Loss                string     `json:"loss"`
	Parallel            struct {
		vram.Parallel
	} `json:"parallel"`
	PPSchedule     string `json:"pp_schedule"`
	PPMicrobatches int    `json:"pp_microbatches"`
	Framework      string `json:"framework"`
	Transformers   string `json:"transformers"`
	DecoderSeqLen  int    `json:"decoder_seq_len"`
	OptimizerImpl  string `json:"optimizer_impl"`
	Compile        bool   `json:"compile"`
}

type caseInfer struct {
	PromptTokens     int    `json:"prompt_tokens"`
	NewTokens        int    `json:"new_tokens"`
	Batch            int    `json:"batch"`
	Weights          string `json:"weights"`
	GroupSize        int    `json:"group_size"`
	DoubleQuant      bool   `json:"double_quant"`
	ActOrder         bool   `json:"act_order"`
	UnquantizedDType string `json:"unquantized_dtype"`
	QuantizedModules string `json:"quantized_modules"`
	KVDType          string `json:"kv_dtype"`
	KVCacheTokens    int    `json:"kv_cache_tokens"`
	Attention        string `json:"attention"`
	GPUs             int    `json:"gpus"`
	Parallel         struct {
		TP        int    `json:"tp"`
		PP        int    `json:"pp"`
		DeviceMap string `json:"device_map"`
	} `json:"parallel"`
	Engine string `json:"engine"`
}

// unsupported is an error that says why a case cannot be expressed yet.
type unsupported struct{ reason string }

func (u unsupported) Error() string { return u.reason }

func skip(format string, a ...any) error { return unsupported{fmt.Sprintf(format, a...)} }

func dtype(field, s string) (vram.DType, error) {
	if s == "" || s == "none" || s == "unset" {
		return vram.DTypeUnset, nil
	}
	d, err := vram.ParseDType(s)
	if err != nil {
		return d, fmt.Errorf("%s: %v", field, err)
	}
	return d, nil
}

// model decodes the case's architecture.
func (c Case) model() (vram.Model, error) {
	var m vram.Model
	if err := json.Unmarshal(c.Model, &m); err != nil {
		return m, fmt.Errorf("model: %v", err)
	}
	// The case format names an encoder-decoder's stacks and head width as
	// its config does; the engine counts both stacks' blocks in layers.
	var encDec struct {
		EncoderLayers int `json:"encoder_layers"`
		DKV           int `json:"d_kv"`
	}
	if err := json.Unmarshal(c.Model, &encDec); err != nil {
		return m, fmt.Errorf("model: %v", err)
	}
	if encDec.EncoderLayers > 0 {
		m.Layers = encDec.EncoderLayers + m.DecoderLayers
	}
	if encDec.DKV > 0 {
		m.HeadDim = encDec.DKV
	}
	if err := m.Validate(); err != nil {
		return m, err
	}
	return m, nil
}

// training converts a train case into a plan.
func (c Case) training() (vram.Training, error) {
	m, err := c.model()
	if err != nil {
		return vram.Training{}, err
	}
	ct := c.Train
	if ct.Trainable == "adapter" {
		return vram.Training{}, skip("LLaMA-Adapter prompt adapters are not modelled (LoRA is)")
	}
	t := vram.Training{Model: m, SeqLen: ct.SeqLen, MicroBatch: ct.MicroBatch, GradAccum: ct.GradAccum,
		Autocast: ct.Autocast, Optimizer: ct.Optimizer, OptimizerInBackward: ct.OptimizerInBackward,
		Trainable: ct.Trainable, LoRA: ct.LoRA, Checkpointing: ct.Checkpointing, Attention: ct.Attention,
		Loss: ct.Loss, Framework: ct.Framework, Parallel: ct.Parallel.Parallel, QuantizedModules: ct.QuantizedModules,
		Compile: ct.Compile, Transformers: ct.Transformers, DecoderSeqLen: ct.DecoderSeqLen, OptimizerImpl: ct.OptimizerImpl}
	if ct.FusedLoss {
		t.Loss = "fused"
	}
	t.Parallel.PPSchedule, t.Parallel.PPMicrobatches = ct.PPSchedule, ct.PPMicrobatches
	if t.ComputeDType, err = dtype("compute_dtype", ct.ComputeDType); err != nil {
		return t, err
	}
	if ct.QuantizedBase != "" && ct.QuantizedBase != "none" {
		q, err := dtype("quantized_base", ct.QuantizedBase)
		if err != nil {
			return t, err
		}
		t.QuantizedBase = vram.Quant{DType: q, GroupSize: ct.GroupSize, DoubleQuant: ct.DoubleQuant}
		// The format says the remaining parameters are held in compute_dtype.
		t.WeightsDType = t.ComputeDType
	} else if t.WeightsDType, err = dtype("weights_dtype", ct.WeightsDType); err != nil {
		return t, err
	}
	if t.MasterWeights, err = dtype("master_weights", ct.MasterWeights); err != nil {
		return t, err
	}
	if t.GradsDType, err = dtype("grads_dtype", ct.GradsDType); err != nil {
		return t, err
	}
	if sd, err := dtype("optimizer_state_dtype", ct.OptimizerStateDType); err != nil {
		return t, err
	} else if sd.IsFloat() {
		t.OptimizerStateDType = sd
	}
	if t.LoRA != nil && t.Trainable == "lora" && t.LoRA.DType == vram.DTypeUnset {
		t.LoRA.DType = t.WeightsDType
	}
	// torch < 2.0 zero_grad() kept gradient buffers; the case notes say so
	// where it applies.
	t.KeepGrads = strings.Contains(c.Notes, "set_to_none=False")
	return t, t.Validate()
}

// inference converts an inference case into a plan.
func (c Case) inference() (vram.Inference, error) {
	m, err := c.model()
	if err != nil {
		return vram.Inference{}, err
	}
	ci := c.Infer
	in := vram.Inference{Model: m, Batch: ci.Batch, PromptTokens: ci.PromptTokens, NewTokens: ci.NewTokens,
		KVCacheLen: ci.KVCacheTokens, Attention: ci.Attention, QuantizedModules: ci.QuantizedModules,
		TP: ci.Parallel.TP, PP: ci.Parallel.PP}
	if ci.Parallel.DeviceMap == "auto" && ci.GPUs > 1 {
		// accelerate's device_map="auto" (2022) fills GPU 0 first, up to its
		// memory; the GPU string states the capacity ("TITAN RTX 24GB", where
		// NVIDIA's GB are GiB).
		in.DeviceMap = "sequential"
		if f := strings.Fields(c.GPU); len(f) > 0 {
			if b, err := vram.ParseBytes(strings.Replace(f[len(f)-1], "GB", "GiB", 1)); err == nil {
				in.DeviceCapacity = b
			}
		}
	}
	w, err := dtype("weights", ci.Weights)
	if err != nil {
		return in, err
	}
	in.Weights = vram.Quant{DType: w, GroupSize: ci.GroupSize, DoubleQuant: ci.DoubleQuant, ActOrder: ci.ActOrder}
	if in.UnquantizedDType, err = dtype("unquantized_dtype", ci.UnquantizedDType); err != nil {
		return in, err
	}
	if in.KVDType, err = dtype("kv_dtype", ci.KVDType); err != nil {
		return in, err
	}
	switch ci.Engine {
	case "hf_generate":
		// transformers generate of 2023: tuple cache rebuilt by torch.cat each
		// step, logits for the whole prompt, upcast to fp32.
		in.Cache, in.LogitsAll, in.LogitsFP32 = "legacy", true, true
	case "litgpt":
		in.Cache, in.LogitsAll = "static", true
	case "vllm":
		in.Cache = "paged"
	}
	return in, in.Validate()
}
