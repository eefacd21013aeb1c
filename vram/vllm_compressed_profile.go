package vram

import "fmt"

// vLLM 0.33's profile run of a DeepSeek-V4 model (compressed.go): the
// attention's tensors as models/deepseek_v4/attention.py allocates them
// without attention metadata, and what the run leaves allocated for good —
// the shared workspace at its largest request and the top-k buffer.

// compressedIndexerLogits is the indexer's dummy logits allocation,
// VLLM_SPARSE_INDEXER_MAX_LOGITS_MB (512, envs.py:62), made "to simulate
// for peak logits tensor memory during inference"
// (model_executor/layers/sparse_attn_indexer.py:502-506).
const compressedIndexerLogits = 512 * MiB

// compressedAttention is DeepseekV4Attention.forward in the profile run
// (attention.py:475-504): the output buffer of the padded heads
// [T, padded_heads, head_dim] (l.507-521; FlashMLA pads a rank's heads to
// 64 or 128, nvidia/flashmla.py:77-86); the input projections — the fused
// q latent and key (replicated, l.253-259), the compressor's kv and score
// in fp32 and a CSA layer's indexer weights and indexer-compressor kv and
// score in fp32 (torch.mm out_dtype=torch.float32, l.676-727); the q and
// kv norms (l.523-538); wq_b over the rank's heads, padded to the
// kernel's (l.772-781); a CSA layer's indexer; FlashMLA, which only zeroes
// the output here (its workspace is the carve's); the output projection,
// inverse-rotated into one group input (nvidia/ops/o_proj.py:61-103), the
// rank's groups of o_lora_rank, then hidden. forward's locals — the
// output buffer, the projections, qr and kv — live until it returns.
func (b *actBuilder) compressedAttention(p blockPlan, layer int, x *actT) *actT {
	m := b.r.m
	c := m.Compressed
	h, d, qlr, e := int64(m.Hidden), int64(m.HeadDim), int64(m.QLoRARank), p.e
	heads, padded := int64(m.Heads)/p.tp, int64(64)
	if heads > 64 {
		padded = 128
	}
	kind := c.kind(layer)
	out := b.op("attn_out", b.size(padded*d, e), e, nil)
	qrkv := b.linear(p, "fused_wqa_wkv", "q_proj", x, h, qlr+d)
	held := list(x, out, qrkv)
	var iw *actT
	switch kind {
	case "compressed_sparse_attention":
		iw = b.linear(p, "indexer.weights_proj", "router", x, h, int64(m.IndexHeads))
		held = append(held, iw,
			b.op("compressor.kv_score", b.size(4*d, FP32), FP32, list(x)),
			b.op("indexer.compressor.kv_score", b.size(4*int64(m.IndexHeadDim), FP32), FP32, list(x)))
	case "heavily_compressed_attention":
		held = append(held, b.op("compressor.kv_score", b.size(2*d, FP32), FP32, list(x)))
	}
	qr := b.op("q_norm", b.size(qlr, e), e, list(qrkv))
	kv := b.op("kv_norm", b.size(d, e), e, list(qrkv))
	held = append(held, qr, kv)
	q := b.linear(p, "wq_b", "q_proj", qr, qlr, heads*d)
	if heads < padded {
		q = b.op("q_pad", b.size(padded*d, e), e, list(q))
	}
	ins := list(q, kv, out)
	if iw != nil {
		ins = append(ins, b.compressedIndexer(p, qr, iw)...)
	}
	b.op("forward_mqa", 0, e, ins)
	o := b.op("o_proj.inv_rope", b.size(heads*d, e), e, list(out))
	groups := int64(c.OGroups) / p.tp
	z := b.linear(p, "wo_a", "o_proj", o, heads*d, groups*int64(c.OLoRARank))
	y := b.linear(p, "wo_b", "o_proj", z, groups*int64(c.OLoRARank), h)
	b.hold(held...)
	return y
}

// compressedIndexer is a CSA layer's indexer in the profile run: wq_b to
// its heads (replicated, attention.py:989-1003), the fused rope and fp8
// quantization of q with the weights in fp32 (l.1145-1148, 1087-1103), then the
// indexer op, which reserves its K-gather workspace (the carve's) and
// allocates the logits transient and, where tensor parallelism shards
// the prefill rows (its default on CUDA with TP > 1 and no full CUDA
// graphs of mixed batches, v1/attention/backends/mla/indexer.py:246-263),
// the top-k exchange's worst case, 2 × rows × width int32
// (sparse_attn_indexer.py:408-434). It returns the quantized q and
// weights, which live until the attention's preparation returns.
func (b *actBuilder) compressedIndexer(p blockPlan, qr, iw *actT) []*actT {
	m := b.r.m
	n, di := int64(m.IndexHeads), int64(m.IndexHeadDim)
	iq := b.linear(p, "indexer.wq_b", "q_proj", qr, int64(m.QLoRARank), n*di)
	qq := b.op("indexer.q_quant", b.size(n*di, FP8E4M3), FP8E4M3, list(iq, iw))
	wq := b.op("indexer.weights", b.size(n, FP32), FP32, list(iq, iw))
	b.op("indexer_op", 0, p.e, list(qq, wq))
	b.workspace(compressedIndexerLogits)
	if p.tp > 1 {
		b.workspace(Bytes(2 * b.tokens * compressedIndexTopK * 4))
	}
	return list(qq, wq)
}

// compressedWorkspace is the shared workspace as the profile run leaves
// it: vLLM's WorkspaceManager keeps one buffer, grown to the largest
// get_simultaneous request (v1/worker/workspace.py:181-207, each view
// rounded up to 256 B), and the requests are FlashMLA's prefill gather
// per layer — (4, ⌈max_model_len/rate⌉ + window + max_num_batched_tokens,
// head_dim) bf16, (max_num_batched_tokens, round_up(index_topk + window,
// 128)) int32 and (max_num_batched_tokens,) int32, a sliding-window layer
// without the compressed entries or the top-k (nvidia/flashmla.py:
// 105-131) — and a CSA indexer's K gather: max_model_len × 8 × factor /
// rate rows of index_head_dim fp8 and 4 scale bytes, factor 5 up to 256K
// tokens and 2 beyond (v1/attention/backends/mla/indexer.py:916-927,
// config/vllm.py:1866-1874), and a 1 MiB radix top-k buffer
// (sparse_attn_indexer.py:482-496).
func (v VLLM) compressedWorkspace(m Model) Bytes {
	c := m.Compressed
	maxLen, t := int64(v.profileLen(m)), int64(v.MaxNumBatchedTokens)
	ru := func(b int64) int64 { return cdiv64(b, 256) * 256 }
	flash := func(rate int) int64 {
		n, topk := int64(0), int64(0)
		if rate > 1 {
			n, topk = cdiv64(maxLen, int64(rate)), compressedIndexTopK
		}
		rows := n + int64(m.SlidingWindow) + t
		return ru(4*rows*int64(m.HeadDim)*2) + ru(t*cdiv64(topk+int64(m.SlidingWindow), 128)*128*4) + ru(t*4)
	}
	ws := flash(1)
	if len(c.HCA) > 0 {
		ws = max(ws, flash(c.HCARate))
	}
	if len(c.CSA) > 0 {
		factor := int64(2)
		if maxLen <= 256*1024 {
			factor = 5
		}
		rows := maxLen * 8 * factor / int64(c.CSARate)
		ws = max(ws, flash(c.CSARate), ru(rows*int64(m.IndexHeadDim))+ru(rows*4)+ru(int64(MiB)))
	}
	return Bytes(ws)
}

// compressedProfile adds to the profile's peak what the run keeps
// allocated through it: the shared workspace, and the top-k indices
// buffer every layer shares, [max_num_batched_tokens, index_topk] int32
// (nvidia/model.py:847-852), which the model allocates as it loads (vLLM's
// "Model loading took" counts it; here it is beside the weights).
func (c *VLLMCarve) compressedProfile(v VLLM, m Model) {
	if m.Compressed == nil {
		return
	}
	ws, topk := v.compressedWorkspace(m), Bytes(int64(v.MaxNumBatchedTokens)*compressedIndexTopK*4)
	c.Activation = addBytes(c.Activation, ws+topk)
	c.Notes = append(c.Notes, fmt.Sprintf("DeepSeek-V4's profile run: each layer's padded q and output buffers, the fp32 compressor projections, the CSA indexer's q and its %v logits transient, the hyper-connected residual streams and the MoE; beside them vLLM keeps its shared workspace at its largest request, %v (FlashMLA's prefill gather over max_model_len %d, or the indexer's K gather), and the top-k indices buffer, %v. Not counted: the compressors' kernels and the KV insert (skipped without attention metadata), the MTP layer's hidden buffer (speculative decoding only)",
		compressedIndexerLogits, ws, v.profileLen(m), topk))
}

// profileLen is the max_model_len the profile runs with: the launch's, or
// under --max-model-len auto the model's, which the workspace is reserved
// for before the cache fits a shorter one (config/vllm.py:1866-1870).
func (v VLLM) profileLen(m Model) int {
	if v.MaxModelLen < 1 {
		return m.MaxPosition
	}
	return v.MaxModelLen
}
