package vram

import (
	"fmt"
	"math"
)

// Hugging Face TGI's serving memory, from its code
// (server/text_generation_server/models/flash_causal_lm.py, warmup): after
// a warmup prefill of max_batch_prefill_tokens, the free memory above
// (1 − cuda_memory_fraction) of the GPU
// (utils/import_utils.get_free_memory) times TGI_WIGGLE_ROOM (0.90, left
// for what warmup did not see; models/globals.py) becomes KV-cache blocks
// of BLOCK_SIZE tokens over every layer, and the router is told
// max_batch_total_tokens = blocks × BLOCK_SIZE. Where it differs from
// vLLM: the budget is what is free after the weights and the warmup, not a
// share of the GPU, and a fixed share of it is kept back.

// TGI is a TGI launch's memory settings.
type TGI struct {
	CudaMemoryFraction    float64 `json:"cuda_memory_fraction,omitempty"`     // --cuda-memory-fraction (default 1.0)
	WiggleRoom            float64 `json:"wiggle_room,omitempty"`              // TGI_WIGGLE_ROOM (default 0.90)
	BlockSize             int     `json:"block_size,omitempty"`               // BLOCK_SIZE: 16 for paged attention, 1 for flashinfer, 256 for flashdecoding (default 16)
	MaxBatchPrefillTokens int     `json:"max_batch_prefill_tokens,omitempty"` // --max-batch-prefill-tokens (default 4096)
	KVCacheDType          DType   `json:"kv_cache_dtype,omitempty"`           // default bf16
	NumShard              int     `json:"num_shard,omitempty"`                // --num-shard: tensor parallel (default 1)
	// Version is the TGI release (the plan's versions.tgi; empty: the
	// newest modelled, tgi_releases.go).
	Version string `json:"-"`
}

// TGICarve is one shard's budget and KV cache.
type TGICarve struct {
	Usable     Bytes `json:"usable"`     // cuda_memory_fraction × the GPU, less the CUDA context
	Weights    Bytes `json:"weights"`    // this shard's weights
	Activation Bytes `json:"activation"` // the warmup prefill's peak above the weights
	Free       Bytes `json:"free"`       // what get_free_memory reports after warmup
	BlockBytes Bytes `json:"block_bytes"`
	Blocks     int64 `json:"blocks"`
	// MaxBatchTotalTokens is what TGI sets max_batch_total_tokens to.
	MaxBatchTotalTokens int64 `json:"max_batch_total_tokens"`
	// Err is why TGI would not start, or empty: weights and the warmup
	// past the memory it may use leave it no KV block.
	Err string `json:"error,omitempty"`
	// DeviceUsed is what nvidia-smi shows once TGI has warmed up: the CUDA
	// context, the weights, the warmup's cached activations and the blocks.
	DeviceUsed Bytes `json:"device_used"`
}

// Carve estimates a TGI launch of in's model and weights on g.
func (t TGI) Carve(in Inference, g GPU) (TGICarve, error) {
	if err := servesOn("TGI", g); err != nil {
		return TGICarve{}, err
	}
	if t.CudaMemoryFraction == 0 {
		t.CudaMemoryFraction = 1
	}
	if t.WiggleRoom == 0 {
		t.WiggleRoom = 0.90
	}
	if t.BlockSize == 0 {
		t.BlockSize = 16
	}
	if t.MaxBatchPrefillTokens == 0 {
		t.MaxBatchPrefillTokens = 4096
	}
	if t.KVCacheDType == DTypeUnset {
		t.KVCacheDType = BF16
	}
	t.NumShard = max(1, t.NumShard)
	switch {
	case !(t.CudaMemoryFraction > 0 && t.CudaMemoryFraction <= 1): // NaN fails too
		return TGICarve{}, fmt.Errorf("tgi: cuda_memory_fraction must be in (0, 1], got %v", t.CudaMemoryFraction)
	case !(t.WiggleRoom > 0 && t.WiggleRoom < 1):
		return TGICarve{}, fmt.Errorf("tgi: wiggle_room must be in (0, 1), got %v", t.WiggleRoom)
	case t.BlockSize < 1 || t.BlockSize > 1<<12:
		return TGICarve{}, fmt.Errorf("tgi: block_size must be in [1, 4096], got %d", t.BlockSize)
	case t.MaxBatchPrefillTokens < 1 || t.MaxBatchPrefillTokens > MaxTokens:
		return TGICarve{}, fmt.Errorf("tgi: max_batch_prefill_tokens must be in [1, %d], got %d", MaxTokens, t.MaxBatchPrefillTokens)
	case t.NumShard > maxHeads:
		return TGICarve{}, fmt.Errorf("tgi: num_shard %d is over %d", t.NumShard, maxHeads)
	}
	if err := t.KVCacheDType.validKV(); err != nil {
		return TGICarve{}, fmt.Errorf("tgi: %w", err)
	}
	in.Cache, in.TP = "paged", t.NumShard
	in.Batch, in.PromptTokens, in.NewTokens, in.MaxBatchedTokens = 1, t.MaxBatchPrefillTokens, 0, t.MaxBatchPrefillTokens
	rin, m, err := in.resolve()
	if err != nil {
		return TGICarve{}, err
	}
	if m.Encoder() || m.EncoderDecoder() {
		return TGICarve{}, fmt.Errorf("tgi: the KV cache model covers decoder-only models, not %q", m.Family)
	}
	if m.SSM != nil || m.Mamba != nil {
		return TGICarve{}, fmt.Errorf("tgi: %q has state-space (Mamba) layers, which TGI's KV cache model does not cover", m.Family)
	}
	if m.DeltaNet != nil {
		return TGICarve{}, fmt.Errorf("tgi: %q has Gated DeltaNet layers, whose conv and recurrent states the engine keeps beside the KV cache; that carve is not modelled yet (Inference plans HF generate with the state)", m.Family)
	}
	if m.ShortConv != nil {
		return TGICarve{}, fmt.Errorf("tgi: %q has short-convolution layers, whose conv state the engine keeps beside the KV cache; that carve is not modelled yet (Inference plans HF generate with the state)", m.Family)
	}
	est, err := in.Estimate()
	if err != nil {
		return TGICarve{}, err
	}
	c := TGICarve{Weights: rin.weightBytes(m)}
	c.Usable = Bytes(math.Floor(float64(g.Total())*t.CudaMemoryFraction)) - g.Context
	c.Activation = max(0, est.Peak.Total()-est.Peak.Parameters-est.Peak.KVCache)
	c.Free = max(0, c.Usable-c.Weights-c.Activation)
	kv := max(1, m.KVHeads/t.NumShard)
	c.BlockBytes = t.KVCacheDType.Size(int64(m.Layers) * int64(t.BlockSize) * int64(kv) * int64(m.HeadDim) * 2)
	c.Blocks = int64(float64(c.Free)*t.WiggleRoom) / int64(c.BlockBytes)
	c.MaxBatchTotalTokens = c.Blocks * int64(t.BlockSize)
	if c.Blocks < 1 {
		c.Err = fmt.Sprintf("not enough memory for a KV block after the weights (%v) and the warmup (%v) of the %v it may use: decrease --max-batch-prefill-tokens or shard the model (--num-shard)", c.Weights, c.Activation, c.Usable)
	}
	c.DeviceUsed = g.Context + c.Weights + c.Activation + Bytes(c.Blocks)*c.BlockBytes
	return c, nil
}
