package vram

import "fmt"

// resolveCompressed checks what a plan asks of a model with DeepSeek-V4's
// compressed attention (Model.Compressed): a serving engine's forward
// (vLLM's profile run) takes its layers' profile path (compressedBlock);
// transformers' forward — hc_mult residual streams, the compressors and
// the indexer, attention over the window and the compressed entries — is
// not traced, so no other plan that runs it is made. Training and
// transformers' generate are refused before (family.servingOnly).
func (r *resolved) resolveCompressed() error {
	if r.m.Compressed == nil || r.servingEngine {
		return nil
	}
	return fmt.Errorf("model: %s has DeepSeek-V4's compressed attention (model.compressed), whose transformers forward is not modelled yet; its parameters, buffers, stored bytes, vLLM's and SGLang's caches are", r.m.Family)
}

// compressedCacheRefused refuses sizing an engine's KV cache for a model
// with compressed attention where the engine's cache for it is not
// modelled: its pages hold a key and a value per token per layer, which
// is not what such a layer keeps (each layer its last sliding_window − 1
// keys, one head, K = V; a CSA or HCA layer also one compressed entry per
// compress rate tokens, a CSA layer's indexer its own, and the window
// still open). engine prefixes the error, as the engine's own do.
func compressedCacheRefused(m Model, engine string) error {
	if m.Compressed == nil {
		return nil
	}
	return fmt.Errorf("%s: the cache of DeepSeek-V4's compressed attention (model.compressed: a sliding window of keys in every layer, compressed entries in its CSA and HCA layers) is not modelled yet", engine)
}

// A DeepSeek-V4 layer as vLLM 0.33's profile run executes it
// (models/deepseek_v4/nvidia/model.py:714-809, attention.py:475-800; paths
// inside the vllm package): the run carries no attention metadata, so the
// KV insert is skipped and q comes back padded to the kernel's heads
// (attention.py:772-781), the compressors return before touching their
// state (compressor.py:371-377), the indexer reserves its workspace and a
// transient of logits (model_executor/layers/sparse_attn_indexer.py:
// 482-512) and FlashMLA its prefill workspace (nvidia/flashmla.py:
// 105-131) — the workspaces are one buffer vLLM keeps at its largest
// request, which the carve adds (vllm_compressed_profile.go). The
// residual is hc_mult streams of hidden wide, mixed before and after the
// attention and the MoE by mHC kernels (mhc_fused_post_pre_tilelang,
// model.py:752-805); the model's loop keeps the layer's inputs until the
// layer returns (model.py:995-1004).

// compressedPrefillPeak is the largest no-grad peak among the model's
// kinds of layer (sliding-window only, CSA, HCA), each built at its first
// layer: the peak is a CSA layer's wherever the model has one, and its
// first layer may be sliding-window only (V4-Flash's).
func compressedPrefillPeak(r *resolved) Bytes {
	var peak Bytes
	seen := map[string]bool{}
	for i := 0; i < r.m.Layers; i++ {
		if k := r.m.Compressed.kind(i); !seen[k] {
			seen[k] = true
			peak = max(peak, buildBlock(r, i).NoGradPeak)
		}
	}
	return peak
}

// compressedBlock is one layer: the input streams and the previous
// layer's output (held by the model's loop), the attention's
// hyper-connection mix, the attention, the MoE's mix, the MoE.
func compressedBlock(r *resolved, layer int) BlockActivations {
	m := r.m
	p := r.blockPlan(layer)
	b := newActBuilder(r, int64(r.MicroBatch)*int64(r.SeqLen))
	h, hc := int64(m.Hidden), int64(m.Compressed.Streams)
	// residual [T, hc, h] and x [T, h] in bf16, post_mix [T, hc] and
	// res_mix [T, hc, hc] in fp32 (model.py:714-723).
	in := b.external("input", addBytes(b.size((hc+1)*h, p.resid), b.size(hc+hc*hc, FP32)), p.resid)
	res, mix, x := b.hyperMix(p, "attn_hc", in, nil, h, hc)
	a := b.compressedAttention(p, layer, x)
	res2, mix2, xf := b.hyperMix(p, "ffn_hc", a, list(res, mix), h, hc)
	out := b.moe(p, xf, layer)
	b.hold(xf)
	out.keepAlive, res2.keepAlive, mix2.keepAlive = true, true, true
	return b.summarize(in)
}

// hyperMix is mhc_fused_post_pre_tilelang: the previous branch's output
// folded into the streams, and the next branch's input mixed and normed
// out of them — new streams [T, hc, h], the post and residual mixes in
// fp32, the branch input [T, h].
func (b *actBuilder) hyperMix(p blockPlan, name string, x *actT, prev []*actT, h, hc int64) (res, mix, y *actT) {
	ins := append(list(x), prev...)
	res = b.op(name+".residual", b.size(hc*h, p.resid), p.resid, ins)
	mix = b.op(name+".mix", b.size(hc+hc*hc, FP32), FP32, ins)
	y = b.op(name+".input", b.size(h, p.e), p.e, list(res, mix))
	return res, mix, y
}
