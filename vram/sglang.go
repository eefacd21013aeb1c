package vram

import (
	"fmt"
	"math"
)

// SGLang serving memory, from its code
// (sglang/srt/model_executor/model_runner.py, profile_max_num_token):
// total is the free GPU memory when the runner starts, available the free
// memory once the weights are loaded; the KV pool gets
// available − total × (1 − mem_fraction_static), so mem_fraction_static
// is the share of the free memory that weights and KV pool take together
// and the rest stays free for activations and CUDA graphs. The pool holds
// that many bytes // cell_size tokens, a cell being one token of every
// layer: kv_heads · head_dim · layers · 2 · dtype bytes, or
// (kv_lora_rank + qk_rope_head_dim) · layers · dtype for MLA. Tokens are
// pooled one by one (page size 1) and the radix cache shares common
// prefixes, so concurrency is tokens over distinct tokens per request.

// SGLang is an SGLang launch's memory settings.
type SGLang struct {
	// Version is the SGLang release the launch runs (a plan's
	// versions.sglang); empty is the current release, CurrentSGLang
	// (sglang_releases.go).
	Version string `json:"-"`
	// MemFractionStatic is --mem-fraction-static. Zero takes the
	// release's default, worked out from the GPU, the TP degree, the
	// settings below and a vision tower's size (sglang_defaults.go);
	// without a GPU (KVPool) its fallback 0.88, times the tower's factor.
	MemFractionStatic float64 `json:"mem_fraction_static,omitempty" zero:"leaves SGLang nothing for the weights and the KV pool: it stops with \"Not enough memory. Please try to increase --mem-fraction-static.\""`
	// ChunkedPrefillSize (--chunked-prefill-size; -1 turns chunking off)
	// and CUDAGraphMaxBS (--cuda-graph-max-bs) enter the default
	// fraction; zero takes SGLang's pick for the GPU.
	ChunkedPrefillSize int `json:"chunked_prefill_size,omitempty"`
	CUDAGraphMaxBS     int `json:"cuda_graph_max_bs,omitempty"`
	// MaxPrefillTokens is --max-prefill-tokens (default 16,384), which
	// the default fraction reserves for when chunking is off.
	MaxPrefillTokens int `json:"max_prefill_tokens,omitempty"`
	// EnableMultimodal is --enable-multimodal: Gemma 3 and Llama 4 run
	// text-only without it (Llama 4 then builds no vision tower).
	EnableMultimodal bool  `json:"enable_multimodal,omitempty"`
	KVCacheDType     DType `json:"kv_cache_dtype,omitempty"` // default bf16
	TP               int   `json:"tp_size,omitempty"`        // default 1
	// MaxRunningRequests is --max-running-requests: for a hybrid model
	// the default of max_mamba_cache_size; the pool is sized by memory.
	MaxRunningRequests int `json:"max_running_requests,omitempty"`
	// MaxMambaCacheSize is --max-mamba-cache-size: the request slots of a
	// hybrid's recurrent state (default max_running_requests, else 512);
	// MambaSSMDType is --mamba-ssm-dtype (fp32 by default, or bf16). See
	// sglang_state.go.
	MaxMambaCacheSize int   `json:"max_mamba_cache_size,omitempty"`
	MambaSSMDType     DType `json:"mamba_ssm_dtype,omitempty"`
	// Speculative is the launch's speculative decoding (the
	// --speculative-* flags; sglang_spec.go); Draft its draft model,
	// read from Speculative.DraftModelPath by a plan (the Go API sets it
	// beside Speculative).
	Speculative *SGLangSpeculative `json:"speculative,omitempty"`
	Draft       *Model             `json:"-"`

	// specIn is the target as Carve loads it, for the draft's weights;
	// gpuMiB the GPU's memory Carve read (0: none), for the draft's CUDA
	// graphs.
	specIn *Inference
	gpuMiB float64
}

// SGLangKVPool is the token pool of one GPU.
type SGLangKVPool struct {
	Free     Bytes `json:"free"`     // free memory at start (total_gpu_memory)
	Weights  Bytes `json:"weights"`  // what loading took
	Rest     Bytes `json:"rest"`     // the KV pool's budget
	CellSize Bytes `json:"cell"`     // one token, every layer
	Tokens   int64 `json:"tokens"`   // max_total_num_tokens
	KSize    Bytes `json:"k_size"`   // "K size" of the log (0 for MLA)
	Reserved Bytes `json:"reserved"` // free × (1 − mem_fraction_static), left for activations and graphs
	// MemFractionStatic is the fraction the pool was sized with: the
	// launch's, else SGLang's default (sglang_defaults.go).
	MemFractionStatic float64 `json:"mem_fraction_static"`
	// MMReservation is what a multimodal model's cache takes off the
	// budget (0.5.23: 100 MiB).
	MMReservation Bytes `json:"mm_reservation,omitempty"`
	// Release is the SGLang release the pool modelled.
	Release Modelled `json:"release"`
	// MinMemFractionStatic is the smallest --mem-fraction-static that
	// leaves the pool any room: weights / free.
	MinMemFractionStatic float64 `json:"min_mem_fraction_static"`
	Err                  string  `json:"error,omitempty"`
	// DeviceUsed is what nvidia-smi shows once SGLang has started: the
	// CUDA context, the weights, the KV pool and a hybrid's state pool it
	// allocates up front (activations and CUDA graphs come out of the rest
	// of the free memory).
	DeviceUsed Bytes    `json:"device_used"`
	Notes      []string `json:"notes,omitempty"`
	// NCCL and CustomAllReduce are what a TP rank's communicator and
	// custom all-reduce hold before SGLang measures Free (Carve;
	// serving_nccl.go), inside DeviceUsed.
	NCCL            Bytes `json:"nccl,omitempty"`
	CustomAllReduce Bytes `json:"custom_all_reduce,omitempty"`
	// A hybrid model's recurrent state (sglang_state.go): StateLayers keep
	// StatePerRequest per request whatever its length; MambaSlots requests
	// have a slot (and cap the running requests); StateReserved comes off
	// the KV budget; State is what the pool allocates (one slot more).
	StateLayers     int   `json:"state_layers,omitempty"`
	StatePerRequest Bytes `json:"state_per_request,omitempty"`
	MambaSlots      int   `json:"mamba_slots,omitempty"`
	// Compressed is SGLang's pool of a model with DeepSeek-V4's
	// compressed attention (sglang_compressed.go); CellSize is then its
	// bytes per full token, rounded up.
	Compressed *SGLangCompressed `json:"compressed,omitempty"`
	// RunningCap is the most requests that run at once, where the release
	// caps them below the slots (0.5.23: a fifth of them).
	RunningCap    int   `json:"max_running_requests,omitempty"`
	StateReserved Bytes `json:"state_reserved,omitempty"`
	State         Bytes `json:"state,omitempty"`
	// Speculative is what speculative decoding adds, the draft's lines
	// apart (sglang_spec.go); the fields above stay the target's.
	Speculative *SGLangSpecPool `json:"speculative,omitempty"`
}

// KVPool sizes the pool from the free memory at start and the weights.
func (s SGLang) KVPool(m Model, free, weights Bytes) (SGLangKVPool, error) {
	s, m, rel, modelled, err := s.prepare(m)
	if err != nil {
		return SGLangKVPool{}, err
	}
	if free <= 0 || weights < 0 || free > maxPlanBytes || weights > maxPlanBytes {
		return SGLangKVPool{}, fmt.Errorf("sglang: free memory %v and weights %v: want free > 0, weights ≥ 0", free, weights)
	}
	sp, err := s.spec(m, rel) // sglang_spec.go
	if err != nil {
		return SGLangKVPool{}, err
	}
	draft, err := s.draftWeights(m, sp)
	if err != nil {
		return SGLangKVPool{}, err
	}
	p := SGLangKVPool{Free: free, Weights: weights, Reserved: Bytes(float64(free) * (1 - s.MemFractionStatic)), MemFractionStatic: s.MemFractionStatic, Release: modelled}
	if s.multimodal(m, rel) {
		p.MMReservation = rel.mmReservation
		if rel.vlm == vlmRunner95 {
			p.Notes = append(p.Notes, fmt.Sprintf("SGLang %s's ModelRunner multiplies --mem-fraction-static by 0.95 for a multimodal model, to %.4g (model_runner.py:242-243)", rel.Version, s.MemFractionStatic))
		}
	}
	if m.recurrent() {
		if err := s.sglangState(m, &p, rel); err != nil {
			return SGLangKVPool{}, err
		}
	}
	if err := m.blockSparseCache("sglang"); err != nil {
		return SGLangKVPool{}, err
	}
	// 0.5.23 counts a draft loaded before the pool is sized (draft.atSizing).
	p.Rest = max(0, free-weights-draft.atSizing-p.Reserved-p.MMReservation-p.StateReserved)
	if m.Compressed != nil {
		s.compressedPool(m, &p) // sglang_compressed.go
	} else {
		s.cells(m, rel, &p)
	}
	if sp != nil {
		s.specPool(m, sp, draft, &p) // sglang_spec_pool.go
	}
	p.MinMemFractionStatic = float64(weights+draft.atSizing) / float64(free)
	switch {
	case weights+draft.atSizing > free:
		// The weights do not fit the free memory: loading them fails,
		// whatever the fraction.
		p.Err = fmt.Sprintf("torch.OutOfMemoryError: CUDA out of memory while loading the weights: they take %v on each GPU and %v is free (shard them over more GPUs with --tp-size)", weights+draft.atSizing, free)
	case p.Rest <= 0 && draft.atSizing > 0:
		// kv_cache_configurator.py:3042-3058.
		p.Err = fmt.Sprintf("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=%g. Raise --mem-fraction-static above %.3f. If using speculative decoding, draft weights are now counted. (the model's weights take %v, the draft's %v, of the %v free)",
			s.MemFractionStatic, math.Ceil(p.MinMemFractionStatic*1000)/1000, weights, draft.atSizing, free)
	case p.Tokens <= 0:
		p.Err = fmt.Sprintf("Not enough memory. Please try to increase --mem-fraction-static (at least %.4f: the weights take %v of the %v free).",
			math.Ceil(p.MinMemFractionStatic*1e4)/1e4, weights, free)
	}
	return p, nil
}

// prepare checks the launch's settings and the model, and fills the
// settings' defaults: the fraction (SGLang's fallback without a GPU), the
// KV cache dtype, TP, the SSM state's dtype.
func (s SGLang) prepare(m Model) (SGLang, Model, sglangRelease, Modelled, error) {
	m = m.Normalize()
	if err := m.Validate(); err != nil {
		return s, m, sglangRelease{}, Modelled{}, err
	}
	if err := s.checkSizes(); err != nil {
		return s, m, sglangRelease{}, Modelled{}, err
	}
	rel, modelled, err := s.release()
	if err != nil {
		return s, m, rel, modelled, err
	}
	if err := rel.checkArchitecture(m, s.Version); err != nil { // sglang_releases.go
		return s, m, rel, modelled, err
	}
	if err := s.checkCompressed(m, rel); err != nil { // sglang_compressed.go
		return s, m, rel, modelled, err
	}
	if s.MemFractionStatic == 0 {
		s.MemFractionStatic, _ = s.memFraction(m, 0, rel)
	}
	if rel.vlm == vlmRunner95 && s.multimodal(m, rel) {
		s.MemFractionStatic *= 0.95 // 0.4.4 model_runner.py:242-243, on any fraction
	}
	if !(s.MemFractionStatic > 0 && s.MemFractionStatic <= 1) { // NaN fails too
		return s, m, rel, modelled, fmt.Errorf("sglang: mem_fraction_static must be in (0, 1], got %v", s.MemFractionStatic)
	}
	if s.KVCacheDType == DTypeUnset {
		s.KVCacheDType = BF16
		if m.Compressed != nil {
			s.KVCacheDType = FP8E4M3 // "auto" → fp8_e4m3 (sglang_compressed.go)
		}
	}
	if err := s.KVCacheDType.validKV(); err != nil {
		return s, m, rel, modelled, fmt.Errorf("sglang: %w", err)
	}
	s.TP = max(1, s.TP)
	if s.TP > maxHeads {
		return s, m, rel, modelled, fmt.Errorf("sglang: tp_size %d is over %d", s.TP, maxHeads)
	}
	if m.Encoder() || m.EncoderDecoder() {
		return s, m, rel, modelled, fmt.Errorf("sglang: the KV pool model covers decoder-only models, not %q", m.Family)
	}
	if s.MambaSSMDType == DTypeUnset {
		s.MambaSSMDType = FP32
	}
	return s, m, rel, modelled, s.checkState()
}

// cells sizes a token's cell — one token of every attention layer — and
// the tokens the budget holds.
func (s SGLang) cells(m Model, rel sglangRelease, p *SGLangKVPool) {
	layers := int64(m.attentionLayers(0, m.Layers))
	if m.KVLoRARank > 0 {
		p.CellSize = s.KVCacheDType.Size(int64(m.KVLoRARank+m.QKRopeDim) * layers)
		if m.IndexHeadDim > 0 && rel.indexerInCell {
			p.CellSize += Bytes(dsaIndexKeyBytes(m) * layers) // DSA's indexer keys (dsa.go)
		}
	} else {
		// get_num_kv_heads(tp): the KV heads over TP, at least one.
		kv := max(1, m.KVHeads/s.TP)
		p.CellSize = s.KVCacheDType.Size(int64(kv) * int64(m.HeadDim) * layers * 2)
	}
	if p.Rest > 0 {
		p.Tokens = int64(p.Rest) / int64(p.CellSize)
	}
	if m.KVLoRARank == 0 {
		p.KSize = Bytes(p.Tokens) * p.CellSize / 2
	}
}

// MaxConcurrencyFor is how many requests of tokens distinct tokens each the
// pool holds at once (at most a hybrid's state slots).
func (p SGLangKVPool) MaxConcurrencyFor(tokens int) float64 {
	if tokens < 1 {
		return 0
	}
	c := float64(p.Tokens) / float64(tokens)
	switch {
	case p.RunningCap > 0:
		c = min(c, float64(p.RunningCap))
	case p.MambaSlots > 0:
		c = min(c, float64(p.MambaSlots))
	}
	return c
}

// Carve sizes an SGLang launch of in's model and weights on g: free memory
// at start is the GPU's memory less its CUDA context and, with TP, the TP
// communicator's NCCL buffers and the custom all-reduce's
// (serving_nccl.go), the weights as the engine sizes them for the TP
// degree.
func (s SGLang) Carve(in Inference, g GPU) (SGLangKVPool, error) {
	if err := servesOn("SGLang", g); err != nil {
		return SGLangKVPool{}, err
	}
	in.TP = max(1, s.TP)
	in.Batch, in.PromptTokens, in.NewTokens = max(1, in.Batch), max(1, in.PromptTokens), 0 // only the weights matter here
	if v := in.Model.Vision; v != nil && in.Images >= 0 && in.Images <= MaxTokens {
		in.PromptTokens = max(in.PromptTokens, max(1, in.Images)*v.ImageTokens()) // room for the images
	}
	rin, m, err := in.resolve()
	if err != nil {
		return SGLangKVPool{}, err
	}
	rin.runtime, rin.cc = runSGLang, g.ComputeCapability
	rel, _, err := s.release()
	if err != nil {
		return SGLangKVPool{}, err
	}
	if m.Vision != nil && !s.multimodal(m, rel) && m.Vision.Family == llama4ModelType {
		rin.towerOff = true // mllama4.py l.436-448: has_vision needs enable_multimodal
	}
	var why string
	if s.MemFractionStatic == 0 && s.checkSizes() == nil {
		s.TP = max(1, s.TP)
		s.MemFractionStatic, why = s.memFraction(m, float64(g.Memory)/float64(MiB), rel)
	}
	s.specIn, s.gpuMiB = &rin, float64(g.Memory)/float64(MiB)
	nccl, car, ncclNote, err := sglangNCCL(max(1, s.TP), g, rel)
	if err != nil {
		return SGLangKVPool{}, err
	}
	p, err := s.KVPool(m, g.Total()-g.Context-nccl-car, rin.weightBytes(m))
	if err != nil {
		return p, err
	}
	p.NCCL, p.CustomAllReduce = nccl, car
	if ncclNote != "" {
		p.Notes = append(p.Notes, ncclNote)
	}
	s.specCarve(&p, why != "", g)
	if why != "" {
		p.Notes = append(p.Notes, fmt.Sprintf("mem_fraction_static %.4g: %s (--mem-fraction-static sets it)", s.MemFractionStatic, why))
	}
	if m.Vision != nil && !s.multimodal(m, rel) {
		p.Notes = append(p.Notes, "SGLang runs this model text-only unless --enable-multimodal (configs/model_config.py)")
	}
	if e := rin.engineRefuses(m, g, rel.modeloptCC); e != "" {
		p.Err = e
	}
	if note := m.globalShapeNote("SGLang"); note != "" {
		p.Notes = append(p.Notes, note)
	}
	p.Notes = append(append(rin.notes(m, p.Weights), rin.engineNotes(m, "SGLang")...), p.Notes...)
	if p.Speculative == nil {
		p.DeviceUsed = g.Context + p.NCCL + p.CustomAllReduce + p.Weights + p.Rest + p.State
	}
	return p, nil
}

// checkSizes checks the settings the default fraction reads.
func (s SGLang) checkSizes() error {
	switch {
	case s.ChunkedPrefillSize < -1 || s.ChunkedPrefillSize > 1<<20:
		return fmt.Errorf("sglang: chunked_prefill_size must be -1 (off) or 1 … 1048576, got %d", s.ChunkedPrefillSize)
	case s.CUDAGraphMaxBS < 0 || s.CUDAGraphMaxBS > 1<<16:
		return fmt.Errorf("sglang: cuda_graph_max_bs must be in 0 … 65536, got %d", s.CUDAGraphMaxBS)
	case s.MaxPrefillTokens < 0 || s.MaxPrefillTokens > 1<<24:
		return fmt.Errorf("sglang: max_prefill_tokens must be in 0 … 16777216, got %d", s.MaxPrefillTokens)
	}
	return nil
}
