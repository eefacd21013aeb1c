package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// Case is one measured run (testdata/cases-format.md describes every field).
type Case struct {
	ID       string          `json:"id"`
	Source   string          `json:"source"`
	Trust    string          `json:"trust"`
	Inferred []string        `json:"inferred"` // key paths inferred, not read (cases-format.md)
	Kind     string          `json:"kind"`
	Model    json.RawMessage `json:"model"`
	Train    *caseTrain      `json:"train"`
	Infer    *caseInfer      `json:"inference"`
	Post     json.RawMessage `json:"post_training"` // a plan's post_training (posttraining.go)
	GPU      string          `json:"gpu"`
	Measured struct {
		What    string  `json:"what"`
		GiB     float64 `json:"gib"`
		Meaning string  `json:"meaning"`
		// Value is a serving-log kind's figure in its own unit
		// (servingUnit); Device the GPU it was logged for.
		Value  *float64 `json:"value"`
		Device int      `json:"device"`
		// How the source gave it (cases-format.md): per GPU or in all,
		// with the CUDA context or not, a range, each GPU's value.
		Per                 string    `json:"per"`
		IncludesCUDAContext *bool     `json:"includes_cuda_context"`
		RangeGiB            []float64 `json:"range_gib"`
		AllGPUsGiB          []float64 `json:"all_gpus_gib"`
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
	Bitsandbytes   string `json:"bitsandbytes"`
	DecoderSeqLen  int    `json:"decoder_seq_len"`
	OptimizerImpl  string `json:"optimizer_impl"`
	Compile        bool   `json:"compile"`
	CompileLoss    *bool  `json:"compile_loss"`
	// torchtitan's words: selective_ac_option ("op", or every N-th
	// block; "n/a" under full checkpointing), float8 training with its
	// recipe and float8 all-gather, async TP, and a 4-bit recipe.
	SelectiveACOption string `json:"selective_ac_option"`
	Float8            bool   `json:"float8"`
	Float8Recipe      string `json:"float8_recipe"`
	Float8AllGather   bool   `json:"float8_all_gather"`
	AsyncTP           bool   `json:"async_tp"`
	LowPRecipe        string `json:"lowp_recipe"`
	TorchtitanCommit  string `json:"torchtitan_commit"`
	// Torchtitan is the torchtitan release that ran; absent, the release
	// torchtitan_commit's code descends from (torchtitanRelease).
	Torchtitan          string `json:"torchtitan"`
	CheckpointEarlyStop *bool  `json:"checkpoint_early_stop"`
	// GPUs is the job's GPUs, which the degrees must multiply to.
	GPUs int `json:"gpus"`
	// What the source says beside the settings: the trainable count it
	// printed (checked against the plan's), the packed weights' container
	// dtype, a prompt adapter (not modelled).
	TrainableParams   int64           `json:"trainable_params"`
	QuantStorageDType string          `json:"quant_storage_dtype"`
	Adapter           json.RawMessage `json:"adapter"`
	// The plan's own fields, under its names (vram.Training), so that a run
	// is said as it ran.
	Precision            string            `json:"precision"`
	CustomStateBytes     float64           `json:"custom_state_bytes"`
	CheckpointEvery      int               `json:"checkpoint_every"`
	RecomputeMethod      string            `json:"recompute_method"`
	RecomputeNumLayers   int               `json:"recompute_num_layers"`
	Dropout              *float64          `json:"dropout"`
	KbitPrep             bool              `json:"kbit_prep"`
	NCCL                 string            `json:"nccl"`
	NCCLMemory           vram.Bytes        `json:"nccl_memory"`
	OtherProcesses       int               `json:"other_processes"`
	LossChunks           int               `json:"loss_chunks"`
	LogProbs             *vram.LogProbLoss `json:"log_probs"`
	AllocConf            string            `json:"alloc_conf"`
	ActivationOffloading bool              `json:"activation_offloading"`
	OffloadStash         int               `json:"offload_stash"`
	UseReentrant         *bool             `json:"use_reentrant"`
	ExpertImbalance      float64           `json:"expert_imbalance"`
	KeepGrads            bool              `json:"keep_grads"`
	RetainGradCopies     bool              `json:"retain_grad_copies"`
	Images               int               `json:"images"`
	VisionTower          string            `json:"vision_tower"`
	// Torch is the PyTorch release the run used (the GEMM workspace).
	Torch string `json:"torch"`
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
	// EngineVersion and EngineSettings are a serving engine's release and
	// its launch settings under the engine's own names.
	EngineVersion  string          `json:"engine_version"`
	EngineSettings json.RawMessage `json:"engine_settings"`
	CPUResident    []string        `json:"cpu_resident"`
	// The quantized file or kernel the source names (llama.cpp's GGUF
	// type, a GPTQ kernel), kept as the source gave them.
	GGUFType string `json:"gguf_type"`
	Kernel   string `json:"kernel"`
}

// unsupported is an error that says why a case cannot be expressed yet.
type unsupported struct{ reason string }

func (u unsupported) Error() string { return u.reason }

func skip(format string, a ...any) error { return unsupported{fmt.Sprintf(format, a...)} }

func asUnsupported(err error, u *unsupported) bool { return errors.As(err, u) }

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
	if err := timmDINOv2(c.Model, &m); err != nil {
		return m, err
	}
	if err := m.Validate(); err != nil {
		return m, err
	}
	return m, nil
}

// timmDINOv2 reads a `vit` with layer scale as the format describes timm's
// DINOv2 builds (vision_transformer.py: init_values gives each residual
// branch a LayerScale; vit_giant_patch14_dinov2 a SwiGLUPacked MLP): the
// architecture of transformers' Dinov2Model, which the engine models,
// without its mask token (timm has none). A classifier head on the class
// token (timm's head) is not Dinov2's and is refused.
func timmDINOv2(raw json.RawMessage, m *vram.Model) error {
	var f struct {
		LayerScale bool `json:"layer_scale"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("model: %v", err)
	}
	if m.Family != "vit" || !f.LayerScale {
		return nil
	}
	if m.Head != "" && m.Head != "none" {
		return skip("timm's ViT with layer scale and a %s head: the class-token classifier is not modelled (Dinov2 heads differ)", m.Head)
	}
	if m.Pooler {
		return skip("a ViT with layer scale and a pooler is neither timm's DINOv2 nor transformers'")
	}
	m.Family, m.Head = "dinov2", "none"
	if m.Image != nil {
		im := *m.Image
		im.NoMaskToken = true
		m.Image = &im
	}
	return nil
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
		Trainable: ct.Trainable, LoRA: ct.LoRA, Checkpointing: vram.Checkpointing(ct.Checkpointing), Attention: ct.Attention,
		Loss: ct.Loss, Framework: vram.Framework(ct.Framework), Parallel: ct.Parallel.Parallel, QuantizedModules: ct.QuantizedModules,
		Compile: ct.Compile, CompileLoss: ct.CompileLoss, Transformers: ct.Transformers, Bitsandbytes: ct.Bitsandbytes, DecoderSeqLen: ct.DecoderSeqLen, OptimizerImpl: ct.OptimizerImpl,
		Precision: ct.Precision, CustomStateBytes: ct.CustomStateBytes, CheckpointEvery: ct.CheckpointEvery, RecomputeMethod: ct.RecomputeMethod, RecomputeNumLayers: ct.RecomputeNumLayers,
		Dropout: ct.Dropout, KbitPrep: ct.KbitPrep, NCCL: ct.NCCL, NCCLMemory: ct.NCCLMemory, OtherProcesses: ct.OtherProcesses, LossChunks: ct.LossChunks, LogProbs: ct.LogProbs, AllocConf: ct.AllocConf,
		ActivationOffloading: ct.ActivationOffloading, OffloadStash: ct.OffloadStash, UseReentrant: ct.UseReentrant, ExpertImbalance: ct.ExpertImbalance,
		RetainGradCopies: ct.RetainGradCopies, Images: ct.Images, VisionTower: ct.VisionTower,
		CheckpointEarlyStop: ct.CheckpointEarlyStop, Torchtitan: ct.Torchtitan}
	if t.Torchtitan == "" && ct.TorchtitanCommit != "" {
		if t.Torchtitan, err = torchtitanRelease(ct.TorchtitanCommit); err != nil {
			return t, err
		}
	}
	if ct.FusedLoss {
		t.Loss = "fused"
	}
	if err := ct.lowPrecision(&t); err != nil {
		return t, err
	}
	t.Parallel.PPSchedule, t.Parallel.PPMicrobatches = vram.Schedule(ct.PPSchedule), ct.PPMicrobatches
	if w := t.Parallel.GPUs(); ct.GPUs > 0 && ct.GPUs != w {
		return t, fmt.Errorf("train.gpus %d is not the parallel degrees' dp × tp × pp × cp = %d", ct.GPUs, w)
	}
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
	t.KeepGrads = ct.KeepGrads || strings.Contains(c.Notes, "set_to_none=False")
	return t, t.Validate()
}

// lowPrecision sets torchtitan's checkpointing option and torchao's float8
// recipe; MXFP8 and 4-bit recipes are not modelled.
func (ct *caseTrain) lowPrecision(t *vram.Training) error {
	if o := ct.SelectiveACOption; o != "" && o != "n/a" && ct.Checkpointing == "selective" {
		t.SelectiveACOption = o
	}
	if ct.LowPRecipe != "" {
		return skip("4-bit training (%s) is not modelled", ct.LowPRecipe)
	}
	if !ct.Float8 {
		return nil
	}
	switch r := orText(ct.Float8Recipe, "tensorwise"); r {
	case "tensorwise", "rowwise", "rowwise_with_gw_hp":
		t.Float8 = r
	default:
		return skip("torchao's float8 recipe %q is not modelled (tensorwise, rowwise and rowwise_with_gw_hp are)", r)
	}
	t.Float8AllGather = ct.Float8AllGather && t.Float8 == "tensorwise"
	t.Parallel.AsyncTP = ct.AsyncTP
	return nil
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
	in.CPUResident = ci.CPUResident
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
	if ci.KVCacheTokens > 0 && in.Cache != "paged" {
		// The format: kv_cache_tokens is a cache the engine preallocates
		// (ExLlama's ExLlamaCache of max_seq_len, a StaticCache).
		in.Cache = "static"
	}
	return in, in.Validate()
}
