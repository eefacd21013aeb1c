package vram

// The blocks of an encoder-decoder as transformers' T5 runs them
// (modeling_t5.py): both stacks are pre-norm blocks with an RMS norm
// (T5LayerNorm), eager attention without score scaling whose scores add a
// position bias built once per stack, and a feed-forward with dropout
// inside; each decoder block attends causally to itself, then to the
// encoder's output. Between the stacks, outside any block (and so outside
// their checkpoints), runs the bridge: the encoder's final norm and the
// decoder's embedding.

// buildBridge lists what runs between an encoder-decoder's stacks: the
// encoder's final_layer_norm and dropout, whose output the model returns
// (encoder_last_hidden_state) and every decoder block's cross-attention
// reads, then the decoder's embedding and dropout, the first decoder
// block's input.
func buildBridge(r *resolved, p blockPlan) BlockActivations {
	m := r.m
	batch, S, T := int64(r.MicroBatch), int64(r.SeqLen), int64(r.DecoderSeqLen)
	h := int64(m.Hidden)
	b := newActBuilder(r, batch*S)
	x := b.newT(actT{name: "encoder_blocks_output", op: "input", bytes: p.resid.Size(batch * S * h), dtype: p.resid, born: -1, lastUse: -1, external: true})
	x.id = len(b.ts)
	b.ts = append(b.ts, x)
	eo := b.dropout(p, "encoder.dropout", b.t5Norm(p, "encoder.final_layer_norm", x, h), h, p.dropHid)
	eo.held = true // returned by the model, and saved by every decoder block's cross-attention k and v
	b.tokens = batch * T
	e := b.dropout(p, "decoder.dropout", b.op("decoder.embed_tokens", b.size(h, p.resid), p.resid, nil), h, p.dropHid)
	e.keepAlive = true
	return b.summarize(x)
}

// buildEncDecBlock lists the activations of block layer of an
// encoder-decoder for one micro-batch: self-attention, in the decoder the
// cross-attention, and the feed-forward, each a pre-norm sublayer.
func buildEncDecBlock(r *resolved, layer int) BlockActivations {
	t := newT5Block(r, layer)
	in := t.input("input", t.q)
	if t.dec {
		// The encoder's output (buildBridge makes it).
		t.encOut = t.input("encoder_output", t.src)
		t.encOut.batch = true // the bridge counts it; each block reads it
	}
	biases := t.positionBiases(layer)
	x := t.sublayer("self_attention", in, t.selfAttention)
	if t.dec {
		x = t.sublayer("cross_attention", x, t.crossAttention)
	}
	x = t.sublayer("ff", x, t.feedForward)
	t.b.hold(biases...)
	x.keepAlive = true
	t.stackGradients(layer)
	return t.b.summarize(in)
}

// t5Block is one T5 block being built: its builder, widths, and the ops
// from which its stack-wide gradients exist.
type t5Block struct {
	b                   *actBuilder
	p                   blockPlan
	dec                 bool
	batch, h, heads     int64
	inner, q, src, tgt  int64 // attention width; query tokens a sequence; the encoder's and decoder's lengths
	encOut              *actT
	selfScores, crossKV int
	crossScores         int
}

func newT5Block(r *resolved, layer int) *t5Block {
	m := r.m
	p := r.blockPlan(layer)
	t := &t5Block{p: p, dec: m.DecoderBlock(layer), batch: int64(r.MicroBatch), h: int64(m.Hidden),
		heads: int64(m.Heads) / p.tp, src: int64(r.SeqLen), tgt: int64(r.DecoderSeqLen)}
	t.inner = t.heads * int64(m.HeadDim)
	t.q = t.src
	if t.dec {
		t.q = t.tgt
	}
	t.b = newActBuilder(r, t.batch*t.q)
	return t
}

// input adds an external tensor of tokens per sequence × hidden.
func (t *t5Block) input(name string, tokens int64) *actT {
	return t.b.external(name, t.p.resid.Size(t.batch*tokens*t.h), t.p.resid)
}

// positionBiases: the first block of each stack computes the relative
// position bias (T5Attention.compute_bias: bucketed relative positions,
// looked up in relative_attention_bias, which saves the buckets) and adds
// the mask: batch × heads × q² in the promoted dtype of the bias and the
// mask. The first decoder block also makes the cross-attention's: zeros of
// heads × target × source in the scores' dtype plus the source mask. The
// stack passes them on to its other blocks (positionBiases); here they
// live until the block returns.
func (t *t5Block) positionBiases(layer int) []*actT {
	b, p, q := t.b, t.p, t.q
	if !b.r.m.stackStart(layer) {
		return nil
	}
	pbD := promote(p.baseDType, p.resid)
	buckets := b.op("position_bias.buckets", INT64.Size(q*q), INT64, nil)
	vals := b.op("position_bias.values", p.baseDType.Size(t.heads*q*q), p.baseDType, list(buckets), buckets)
	biases := []*actT{b.op("position_bias", pbD.Size(t.batch*t.heads*q*q), pbD, list(vals))}
	if t.dec {
		z := b.op("cross_position_bias.zeros", p.e.Size(t.heads*t.tgt*t.src), p.e, nil)
		cd := promote(p.e, p.resid)
		biases = append(biases, z, b.op("cross_position_bias", cd.Size(t.batch*t.heads*t.tgt*t.src), cd, list(z)))
	}
	return biases
}

func (t *t5Block) selfAttention(n *actT) *actT {
	return t.attend("self", n, n, t.q, t.dec && t.p.useCache)
}

func (t *t5Block) crossAttention(n *actT) *actT {
	return t.attend("cross", n, t.encOut, t.src, t.p.useCache)
}

func (t *t5Block) feedForward(n *actT) *actT {
	return t.b.t5FF(t.p, n, t.h, int64(t.b.r.m.FFN)/t.p.tp)
}

// attend is T5Attention with queries from xq (q tokens) and keys and
// values from kv (kvLen tokens per sequence).
func (t *t5Block) attend(name string, xq, kv *actT, kvLen int64, cache bool) *actT {
	b, p, h, inner := t.b, t.p, t.h, t.inner
	qs := b.linear(p, name+".q", "q_proj", xq, h, inner)
	tokens := b.tokens
	b.tokens = t.batch * kvLen
	if name == "cross" {
		t.crossKV = len(b.ops)
	}
	k := b.linear(p, name+".k", "k_proj", kv, h, inner)
	v := b.linear(p, name+".v", "v_proj", kv, h, inner)
	if cache {
		// The returned EncoderDecoderCache concatenates k and v into
		// its own tensors (DynamicLayer.update) and holds them.
		k = b.op(name+".cache.k", b.size(inner, k.dtype), k.dtype, list(k))
		v = b.op(name+".cache.v", b.size(inner, k.dtype), k.dtype, list(v))
		p.holdOutput(k, v)
	}
	b.tokens = tokens
	maps := t.batch * t.heads * (b.tokens / t.batch) * kvLen
	// scores = q·kᵀ (no scaling); scores += position_bias in place.
	sc := b.op(name+".scores", p.e.Size(maps), p.e, list(qs, k), qs, k)
	sc.attn = true
	if name == "cross" {
		t.crossScores = len(b.ops) - 1
	} else {
		t.selfScores = len(b.ops) - 1
	}
	// softmax(scores.float()).type_as(scores).
	sf := sc
	if sc.dtype != FP32 {
		sf = b.op(name+".scores.float", FP32.Size(maps), FP32, list(sc))
		sf.attn = true
	}
	pr := b.keep(b.op(name+".softmax", FP32.Size(maps), FP32, list(sf)))
	pr.attn = true
	if sc.dtype != FP32 {
		pr = b.op(name+".probs.type_as", sc.dtype.Size(maps), sc.dtype, list(pr))
		pr.attn = true
	}
	if p.dropAttn > 0 {
		pr = b.op(name+".attn_dropout", sc.dtype.Size(maps), sc.dtype, list(pr))
		pr.attn = true
		b.side(name+".attn_dropout.mask", Bool.Size(maps), Bool).attn = true
	}
	pv := cast(b, p, pr)
	vv := cast(b, p, v)
	// matmul(probs, v), then transpose(1, 2).contiguous() for o.
	o := b.op(name+".probs@v", b.size(inner, p.e), p.e, list(pv, vv), pv, vv)
	return b.linear(p, name+".o", "o_proj", o, inner, h)
}

// sublayer is T5's pre-norm sublayer: the norm, f, dropout and the
// residual add (the norm's output held until f returns).
func (t *t5Block) sublayer(name string, x *actT, f func(*actT) *actT) *actT {
	b, p := t.b, t.p
	n := b.t5Norm(p, name+".layer_norm", x, t.h)
	y := f(n)
	b.hold(n)
	y = b.dropout(p, name+".dropout", y, t.h, p.dropHid)
	y.aliasGrad = y.dtype == p.resid
	out := b.op(name+".residual", b.size(t.h, p.resid), p.resid, list(x, y))
	out.residual = true
	return out
}

// stackGradients are the gradients accumulated across the stack while its
// blocks run their backward: the position biases' (the self-attention's
// when trained; under checkpointing the cross-attention's zero bias is made
// to require one too, T5Attention.forward) and in the decoder the encoder
// output's. They exist from the backward of the first op that reads the
// shared tensor in the stack's last block; before that op in every other
// block.
func (t *t5Block) stackGradients(layer int) {
	b, p, r := t.b, t.p, t.b.r
	var pbGrad, crossGrad, encGrad Bytes
	if !p.frozen { // the relative position bias is trained with the model
		pbGrad = FP32.Size(t.batch * t.heads * t.q * t.q)
	}
	if t.dec {
		encGrad = gradSize(&actT{bytes: p.resid.Size(t.batch * t.src * t.h), dtype: p.resid})
		if r.Checkpointing != CheckpointNone {
			crossGrad = FP32.Size(t.batch * t.heads * t.tgt * t.src)
		}
	}
	m := r.m
	top := layer == m.Layers-1 || layer == m.Layers-m.DecoderLayers-1
	for i := range b.ops {
		op := &b.ops[i]
		for _, g := range []struct {
			bytes Bytes
			from  int
		}{{pbGrad, t.selfScores}, {crossGrad, t.crossScores}, {encGrad, t.crossKV}} {
			if g.bytes > 0 && (!top || i <= g.from) {
				op.heldGrad = addBytes(op.heldGrad, g.bytes)
			}
		}
	}
	if !top {
		b.persistGrad = addBytes(pbGrad, addBytes(crossGrad, encGrad))
	}
}

// cast is autocast's copy of an fp32 matmul operand (castIn by its name).
func cast(b *actBuilder, p blockPlan, x *actT) *actT { return b.castIn(p, x.name, x) }

// t5Norm is T5LayerNorm on x (width per token): the variance of
// x.to(float32) (pow saves the fp32 copy, rsqrt its output), x · rsqrt in
// the promoted dtype (the product saves both), cast to the weight's dtype
// when that is 16-bit, times the weight (which saves its input).
func (b *actBuilder) t5Norm(p blockPlan, name string, x *actT, width int64) *actT {
	x32 := x
	if x.dtype != FP32 {
		x32 = b.op(name+".float", b.size(width, FP32), FP32, list(x))
	}
	rs := b.keep(b.op(name+".rsqrt", b.size(1, FP32), FP32, list(x32), x32))
	b.gradWorkspace(4 * b.size(width, FP32))
	n := b.op(name+".normed", b.size(width, FP32), FP32, list(x, rs), x, rs)
	if p.baseDType != FP32 && p.baseDType.IsFloat() {
		n = b.op(name+".to", b.size(width, p.baseDType), p.baseDType, list(n))
	}
	var saves []*actT
	if !p.frozen {
		saves = append(saves, n)
	}
	d := promote(p.baseDType, n.dtype)
	return b.op(name+".mul_weight", b.size(width, d), d, list(n), saves...)
}

// t5FF is T5DenseGatedActDense (gated-gelu: gelu_new(wi_0 x) · wi_1 x) or
// T5DenseActDense (relu(wi x)), then dropout, a cast to wo's dtype where it
// differs (under autocast the fp16/bf16 product goes back to fp32 before
// wo, whose autocast copy is what wo saves), and wo.
func (b *actBuilder) t5FF(p blockPlan, x *actT, h, f int64) *actT {
	var y *actT
	if b.r.m.MLP == "geglu" {
		g := b.linear(p, "ff.wi_0", "gate_proj", x, h, f)
		act := b.newGELU(p, "ff.gelu", g, f)
		u := b.linear(p, "ff.wi_1", "up_proj", x, h, f)
		y = b.op("ff.gelu*linear", b.size(f, p.e), p.e, list(act, u), act, u)
	} else {
		u := b.linear(p, "ff.wi", "up_proj", x, h, f)
		y = b.keep(b.op("ff.relu", b.size(f, u.dtype), u.dtype, list(u)))
	}
	y = b.dropout(p, "ff.dropout", y, f, p.dropHid)
	if wd := p.baseDType; wd.IsFloat() && y.dtype != wd && !p.q4 {
		y = b.op("ff.to_wo_dtype", b.size(f, wd), wd, list(y))
	}
	return b.linear(p, "ff.wo", "down_proj", y, f, h)
}

// positionBiases are an encoder-decoder's position biases, built once per
// stack and passed to each of its blocks like masks: the encoder's (the
// relative bias of batch × heads × source² with the padding mask added), the
// decoder's (target², with the causal mask) and the cross-attention's
// (zeros plus the source padding mask, target × source), in the promoted
// dtype of the bias and the embeddings.
func positionBiases(r *resolved, p blockPlan) []maskPart {
	m := r.m
	batch, S, T := int64(r.MicroBatch), int64(r.SeqLen), int64(r.DecoderSeqLen)
	heads := int64(m.Heads) / p.tp
	enc := m.Layers - m.DecoderLayers
	d := promote(p.baseDType, p.resid)
	// The first block of each stack makes its biases; the others receive
	// them (and their checkpoints keep them). The decoder also passes its
	// causal mask, batch × 1 × target², to every block.
	parts := []maskPart{
		{bytes: d.Size(batch * heads * S * S), from: 1, to: enc},
		{bytes: d.Size(batch * heads * T * T), from: enc + 1, to: m.Layers},
		{bytes: promote(p.e, p.resid).Size(batch * heads * T * S), from: enc + 1, to: m.Layers},
		{bytes: p.resid.Size(batch * T * T), from: enc, to: m.Layers},
	}
	if r.Checkpointing != CheckpointNone {
		// The cross-attention's zero bias, made to require a gradient under
		// checkpointing, is a leaf the graph keeps until its gradient
		// arrives in the first decoder block's backward.
		parts = append(parts, maskPart{bytes: p.e.Size(heads * T * S), from: enc, to: enc + 1})
	}
	return parts
}
