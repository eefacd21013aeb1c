package vram

// MiniMax's lightning attention (MiniMax 2025, "MiniMax-01: Scaling
// Foundation Models with Lightning Attention"), as transformers 5.23.0's
// MiniMaxLightningAttention builds it (models/minimax/
// modeling_minimax.py:125-271): one projection to q|k|v through silu, a
// linear attention over blocks of block_size tokens whose scores decay by
// a fixed slope per head (the slopes and the decays are buffers computed
// at build time, l.140-173), an RMSNorm over all heads, a sigmoid output
// gate from the layer's input and the output projection. Its heads and
// head width are the model's (num_attention_heads, head_dim, l.129-130).
// The engine lists its parameters and buffers (Model.Lightning), vLLM's
// profile path of the layer (lightningProfile) and its state in vLLM's
// pool (Model.stateElems, VLLM.statePage); its training forward is
// transformers 5.23's (lightning5.go).

// maxLightningBlock bounds Lightning.BlockSize: each layer keeps a heads ×
// block × block decay buffer (diagonal_decay).
const maxLightningBlock = 1 << 11

// lightningTensors adds a MiniMaxLightningAttention's parameters under p in
// named_parameters order (module registration order, l.135-138): the
// RMSNorm over heads · head_dim, qkv_proj, out_proj, output_gate. No
// projection has a bias.
func lightningTensors(m Model, l *tensorList, p string) {
	d := m.dims()
	l.norm(p+"norm", false, d.q)
	l.linear(p+"qkv_proj", "qkv_proj", d.h, 3*d.q, false, Part{"q_proj", d.q}, Part{"k_proj", d.q}, Part{"v_proj", d.q})
	l.linear(p+"out_proj", "o_proj", d.q, d.h, false)
	l.linear(p+"output_gate", "in_proj", d.h, d.q, false)
}

// lightningBuffers adds layer i's four decay buffers under p (nn.Buffer,
// persistent, l.143-146), shaped as get_slope_rate and decay_factors make
// them (l.150-173): slope_rate [heads, 1, 1], query_decay and key_decay
// [heads, block_size, 1], diagonal_decay [1, heads, block_size,
// block_size]. They are created in the default dtype (fp32 on the meta
// device; a model built in bf16 keeps them in bf16).
func lightningBuffers(m Model, b *bufferList, p string, i int) {
	n, bs := int64(m.Heads), int64(m.Lightning.BlockSize)
	b.add(p+"slope_rate", i, FP32, n, 1, 1)
	b.add(p+"query_decay", i, FP32, n, bs, 1)
	b.add(p+"key_decay", i, FP32, n, bs, 1)
	b.add(p+"diagonal_decay", i, FP32, 1, n, bs, bs)
}

// LightningStateBytes is what one sequence keeps in one lightning layer
// between steps as transformers' cache holds it: attn_weights_inter, K^T V
// decayed over the sequence, Heads × HeadDim × HeadDim in the activations'
// dtype (created with value_states' dtype, modeling_minimax.py:202-209;
// updated at l.241 and l.252; stored per layer in MiniMaxCache.linear_cache,
// l.268-269, 81-85). There is no convolution state.
func (m Model) LightningStateBytes(dtype DType) Bytes {
	m = m.Normalize()
	hd := int64(m.HeadDim)
	return dtype.Size(int64(m.Heads) * hd * hd)
}

// resolveLightning checks what a plan asks of a model with lightning
// layers against what the engine models of them: a serving engine's
// forward (vLLM's profile run) takes the layers' profile path
// (lightningProfile); a training step, which family.servingOnly lets
// through only where the 5.23 traces hold, transformers 5.23's forward
// (lightning5.go); transformers' generate is refused before.
func (r *resolved) resolveLightning() error {
	if r.m.Lightning == nil {
		return nil
	}
	return r.refuseRecurrent("lightning attention", "MiniMaxLightningAttention")
}

// lightningBlock is a lightning layer as vLLM runs it: input_layernorm,
// the layer's profile path, post_attention_layernorm, the MoE.
func lightningBlock(r *resolved, layer int) BlockActivations {
	return recurrentBlock(r, layer, "input_layernorm", "post_attention_layernorm", (*actBuilder).lightningProfile)
}

// lightningProfile is vLLM's MiniMaxText01LinearAttention._forward in the
// profile run (0.14.1 layers/mamba/linear_attn.py:318-380; 0.11.0
// l.315-380 alike): without attention metadata the lightning kernels are
// skipped for an empty output (l.364-367), but the rest runs — qkv_proj,
// its fp32 copy and silu (l.334-336), the TP RMSNorm over the empty
// output, output_gate on the layer's input, the sigmoid gate, the cast
// back and out_proj; each width sharded over tensor parallelism. qkv, its
// fp32 copy and activation and the gate are locals until the forward
// returns.
func (b *actBuilder) lightningProfile(p blockPlan, x *actT) *actT {
	h := int64(b.r.m.Hidden)
	w := b.r.recurrentShard(int64(b.r.m.Heads)) * int64(b.r.m.HeadDim)
	qkv := b.linear(p, "qkv_proj", "qkv_proj", x, h, 3*w)
	qkv32 := b.op("qkv.to_fp32", b.size(3*w, FP32), FP32, list(qkv))
	act := b.op("qkv.silu", b.size(3*w, FP32), FP32, list(qkv32))
	empty := b.op("hidden.empty", b.size(w, FP32), FP32, nil)
	normed := b.op("norm", b.size(w, FP32), FP32, list(empty))
	gate := b.linear(p, "output_gate", "in_proj", x, h, w)
	sig := b.op("gate.sigmoid", b.size(w, gate.dtype), gate.dtype, list(gate))
	gated := b.op("gate.mul", b.size(w, FP32), FP32, list(sig, normed))
	cast := b.op("hidden.to_dtype", b.size(w, x.dtype), x.dtype, list(gated))
	out := b.linear(p, "out_proj", "o_proj", cast, w, h)
	b.hold(qkv, qkv32, act, gate)
	return out
}
