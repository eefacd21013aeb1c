package vram

import "fmt"

// Whisper (transformers/models/whisper/modeling_whisper.py, 4.57.6;
// WhisperForConditionalGeneration): an audio encoder-decoder. The encoder
// reads log-mel frames (batch × num_mel_bins × frames) through two
// convolutions (conv1 kernel 3 padding 1, GELU, conv2 kernel 3 stride 2
// padding 1, GELU: modeling_whisper.py:679-680), so it attends over half
// as many positions (max_source_positions), to which it adds a fixed
// sinusoidal table (embed_positions, requires_grad False: :612). Both
// stacks are pre-norm blocks of biased LayerNorm, attention whose q, v
// and out projections are biased and k is not (:282-285), and a GELU
// fc1/fc2 MLP; each stack ends in a layer_norm. Decoder blocks attend
// causally to themselves, then to the encoder's output. The decoder adds
// learned positions (max_target_positions) to its token embedding; the
// output projection proj_out is tied to it, and the loss is
// CrossEntropyLoss on the logits as they are (:1311-1314).
func init() {
	register(&family{
		name: "whisper", source: "transformers/models/whisper/modeling_whisper.py", kind: encoderDecoder, audio: true,
		reentrantFails: `RuntimeError: Trying to backward through the graph a second time`,
		defaults:       Model{MLP: "gelu", Norm: "layernorm", Position: "learned", Bias: BiasAll},
		// WhisperPreTrainedModel: _supports_sdpa, _supports_flash_attn
		// (modeling_whisper.py:554-555); the plan's attention says which.
		dropout:    [2]float64{0, 0}, // configuration_whisper.py:216-218: dropout, attention_dropout, activation_dropout 0.0
		fromConfig: whisperFromConfig,
		toConfig:   whisperToConfig,
		check:      whisperCheck,
		recipe: func(Model, libVersion) recipe {
			// CrossEntropyLoss on lm_logits without an upcast
			// (modeling_whisper.py:1314). The eager softmax is the
			// block's own (whisperBlock.eager).
			return recipe{lossInDType: true}
		},
		tensors: whisperTensors,
		block:   buildWhisperBlock,
		seq2seq: &seq2seqHooks{inputs: whisperInputs, embed: whisperEmbed, bridge: whisperBridge, masks: whisperMasks, finalNorm: whisperFinalNorm},
		// Each checkpoint's config.json (its keys as released, written here
		// from knowledge of those files, not downloaded): d_model,
		// encoder_layers / decoder_layers, encoder_attention_heads (=
		// decoder's), encoder_ffn_dim (= decoder's), vocab_size (51866
		// from large-v3 on), num_mel_bins (128 from large-v3 on); all
		// repeat WhisperConfig's max_source_positions 1500 and
		// max_target_positions 448 and leave tie_word_embeddings at its
		// default (true). The counts match transformers' exactly
		// (testdata/inventory/whisper-*.json).
		presets: map[string]Preset{
			"whisper-tiny":           {whisperPreset("openai/whisper-tiny", 384, 4, 4, 6, 51865, 80), hf("openai/whisper-tiny")},
			"whisper-base":           {whisperPreset("openai/whisper-base", 512, 6, 6, 8, 51865, 80), hf("openai/whisper-base")},
			"whisper-small":          {whisperPreset("openai/whisper-small", 768, 12, 12, 12, 51865, 80), hf("openai/whisper-small")},
			"whisper-medium":         {whisperPreset("openai/whisper-medium", 1024, 24, 24, 16, 51865, 80), hf("openai/whisper-medium")},
			"whisper-large-v2":       {whisperPreset("openai/whisper-large-v2", 1280, 32, 32, 20, 51865, 80), hf("openai/whisper-large-v2")},
			"whisper-large-v3":       {whisperPreset("openai/whisper-large-v3", 1280, 32, 32, 20, 51866, 128), hf("openai/whisper-large-v3")},
			"whisper-large-v3-turbo": {whisperPreset("openai/whisper-large-v3-turbo", 1280, 32, 4, 20, 51866, 128), hf("openai/whisper-large-v3-turbo")},
		},
	})
}

// whisperPreset is a released checkpoint's shape: ffn is 4 × d_model in
// every one of them.
func whisperPreset(name string, hidden, enc, dec, heads, vocab, mels int) Model {
	return Model{Name: name, Layers: enc + dec, DecoderLayers: dec, Hidden: hidden, Heads: heads, KVHeads: heads,
		HeadDim: hidden / heads, FFN: 4 * hidden, Vocab: vocab, MaxPosition: 448, MelBins: mels, SourcePositions: 1500, TiedEmbeddings: true}
}

// whisperFromConfig reads WhisperConfig's keys, with its defaults
// (configuration_whisper.py:199-237). The encoder's and the decoder's
// heads and FFN widths are modelled equal, as in every released
// checkpoint; scale_embedding has no effect in 4.57.6 (embed_scale is
// computed but never applied: modeling_whisper.py:606, :750).
func whisperFromConfig(c *hfReader, m *Model) {
	enc := c.optInt("encoder_layers", 4)
	dec := c.optInt("decoder_layers", 4)
	m.Layers, m.DecoderLayers = enc+dec, dec
	m.Hidden = c.optInt("d_model", 384)
	m.Heads = c.optInt("encoder_attention_heads", 6)
	m.KVHeads = m.Heads
	m.FFN = c.optInt("encoder_ffn_dim", 1536)
	m.Vocab = c.optInt("vocab_size", 51865)
	m.MelBins = c.optInt("num_mel_bins", 80)
	m.SourcePositions = c.optInt("max_source_positions", 1500)
	m.MaxPosition = c.optInt("max_target_positions", 448)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
	if dh := c.optInt("decoder_attention_heads", 6); dh != m.Heads {
		c.fail(fmt.Sprintf("decoder_attention_heads = %d differs from encoder_attention_heads = %d: the engine models whisper with one head count for both stacks", dh, m.Heads))
	}
	if df := c.optInt("decoder_ffn_dim", 1536); df != m.FFN {
		c.fail(fmt.Sprintf("decoder_ffn_dim = %d differs from encoder_ffn_dim = %d: the engine models whisper with one FFN width for both stacks", df, m.FFN))
	}
	if act := c.optString("activation_function", "gelu"); act != "gelu" {
		c.fail(fmt.Sprintf("activation_function %q: whisper is modelled with \"gelu\" (every released checkpoint's)", act))
	}
	for _, k := range []string{"encoder_layerdrop", "decoder_layerdrop"} {
		if v := c.optFloat(k, 0); v != 0 {
			c.fail(fmt.Sprintf("%s = %v: LayerDrop skips random layers, which the engine does not model; it must be 0", k, v))
		}
	}
	if m.Heads > 0 && m.Hidden%m.Heads == 0 {
		m.HeadDim = m.Hidden / m.Heads // WhisperAttention: head_dim = embed_dim // num_heads (modeling_whisper.py:262)
	} else {
		c.fail(fmt.Sprintf("d_model = %d must be a multiple of encoder_attention_heads = %d (WhisperAttention raises otherwise)", m.Hidden, m.Heads))
	}
}

// whisperToConfig writes the keys that make transformers build m. The
// special token ids are the released ones, moved into a smaller
// vocabulary (nn.Embedding's padding_idx must be inside it).
func whisperToConfig(m Model, c map[string]any) {
	c["encoder_layers"], c["decoder_layers"] = m.Layers-m.DecoderLayers, m.DecoderLayers
	c["d_model"], c["encoder_attention_heads"], c["decoder_attention_heads"] = m.Hidden, m.Heads, m.Heads
	c["encoder_ffn_dim"], c["decoder_ffn_dim"] = m.FFN, m.FFN
	c["vocab_size"], c["num_mel_bins"] = m.Vocab, m.MelBins
	c["max_source_positions"], c["max_target_positions"] = m.SourcePositions, m.MaxPosition
	c["tie_word_embeddings"], c["activation_function"] = m.TiedEmbeddings, "gelu"
	last := max(m.Vocab-1, 0)
	c["pad_token_id"], c["bos_token_id"], c["eos_token_id"] = min(50256, last), min(50257, last), min(50257, last)
	c["decoder_start_token_id"] = min(50258, last)
	c["begin_suppress_tokens"] = []int{min(220, last), min(50256, last)}
}

// whisperCheck is WhisperAttention's and the builder's rules.
func whisperCheck(m Model) error {
	switch {
	case m.MLP != "gelu":
		return fmt.Errorf("model.mlp %q: whisper's fc1/fc2 MLP is \"gelu\"", m.MLP)
	case m.Norm != "layernorm":
		return fmt.Errorf("model.norm %q: whisper's blocks use \"layernorm\"", m.Norm)
	case m.Bias != BiasAll:
		return fmt.Errorf("model.bias %q: whisper's q, v, out_proj, fc1 and fc2 are biased (k_proj is not): \"true\"", m.Bias)
	case m.KVHeads != m.Heads:
		return fmt.Errorf("model.kv_heads = %d: whisper attention has as many key/value heads as heads (%d)", m.KVHeads, m.Heads)
	case m.Heads < 1 || m.HeadDim*m.Heads != m.Hidden:
		return fmt.Errorf("model.head_dim = %d: whisper's heads × head_dim must be hidden = %d (embed_dim // num_heads)", m.HeadDim, m.Hidden)
	case m.Position != "learned":
		return fmt.Errorf("model.position %q: whisper's decoder positions are \"learned\"", m.Position)
	}
	return nil
}

// whisperTensors lists WhisperForConditionalGeneration's parameters in
// named_parameters order: the encoder's convolutions, its fixed position
// table (a parameter without a gradient), blocks and layer_norm; the
// decoder's embeddings, blocks and layer_norm; proj_out where untied.
func whisperTensors(m Model, l *tensorList) {
	d := m.dims()
	enc := m.Layers - m.DecoderLayers
	mels, src, tgt := int64(m.MelBins), int64(m.SourcePositions), int64(m.MaxPosition)
	l.add("model.encoder.conv1.weight", "other", d.h, mels, 3)
	l.add("model.encoder.conv1.bias", "bias", d.h)
	l.add("model.encoder.conv2.weight", "other", d.h, d.h, 3)
	l.add("model.encoder.conv2.bias", "bias", d.h)
	l.add("model.encoder.embed_positions.weight", "position", src, d.h)
	l.ts[len(l.ts)-1].part = frozenPart // embed_positions.requires_grad_(False) (modeling_whisper.py:612)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		if i < enc {
			p := fmt.Sprintf("model.encoder.layers.%d.", i)
			whisperAttnTensors(l, p+"self_attn", d.h)
			l.norm(p+"self_attn_layer_norm", true, d.h)
			whisperMLPTensors(l, p, d.h, d.f)
			continue
		}
		if i == enc {
			l.norm("model.encoder.layer_norm", true, d.h)
			l.outside() // the decoder's embeddings, outside its blocks (whisperBridge runs them)
			l.add("model.decoder.embed_tokens.weight", "embedding", d.v, d.h)
			l.add("model.decoder.embed_positions.weight", "position", tgt, d.h)
			l.block(i)
		}
		p := fmt.Sprintf("model.decoder.layers.%d.", i-enc)
		whisperAttnTensors(l, p+"self_attn", d.h)
		l.norm(p+"self_attn_layer_norm", true, d.h)
		whisperAttnTensors(l, p+"encoder_attn", d.h)
		l.norm(p+"encoder_attn_layer_norm", true, d.h)
		whisperMLPTensors(l, p, d.h, d.f)
	}
	l.headSide()
	l.norm("model.decoder.layer_norm", true, d.h)
	lmHead(m, l, "proj_out", "classifier")
}

// whisperAttnTensors is WhisperAttention's projections in registration
// order: k (no bias), v, q, out (modeling_whisper.py:282-285).
func whisperAttnTensors(l *tensorList, p string, h int64) {
	l.linear(p+".k_proj", "k_proj", h, h, false)
	l.linear(p+".v_proj", "v_proj", h, h, true)
	l.linear(p+".q_proj", "q_proj", h, h, true)
	l.linear(p+".out_proj", "o_proj", h, h, true)
}

// whisperMLPTensors is a layer's fc1, fc2 and final_layer_norm.
func whisperMLPTensors(l *tensorList, p string, h, f int64) {
	l.linear(p+"fc1", "up_proj", h, f, true)
	l.linear(p+"fc2", "down_proj", f, h, true)
	l.norm(p+"final_layer_norm", true, h)
}

// whisperInputs is the batch: input_features (batch × num_mel_bins ×
// frames, in the weights' dtype, which conv1 requires), the labels and the
// decoder_input_ids shifted from them (modeling_whisper.py:1285
// shift_tokens_right), int64 batch × target each.
func whisperInputs(r *resolved) Bytes {
	b := int64(r.MicroBatch)
	feats := r.WeightsDType.Size(mulI64(b*int64(r.m.MelBins), int64(r.SeqLen)))
	return addBytes(feats, INT64.Size(2*b*int64(r.DecoderSeqLen)))
}

// whisperEmbed is WhisperEncoder.forward before its layers
// (modeling_whisper.py:679-686), b.tokens being batch × positions (a
// position is two frames): gelu(conv1(features)) over every frame,
// gelu(conv2(·)) with stride 2, permuted (a view), plus the fixed position
// table looked up for all positions (positions × hidden, in the weights'
// dtype, no gradient), in the promoted dtype. Each convolution saves its
// input (under autocast, the copy it casts) and each GELU its input;
// autocast caches a copy of each trained kernel.
func whisperEmbed(b *actBuilder, p blockPlan) *actT {
	m := b.r.m
	h, mels := int64(m.Hidden), int64(m.MelBins)
	var ins []*actT
	if p.autocast && p.baseDType != p.e {
		ins = list(b.op("conv1.input_cast", b.size(2*mels, p.e), p.e, nil)) // the features, batch × mels × frames
	}
	c1 := whisperConv(b, p, "conv1", ins, 2*h, h*mels*3)
	g1 := b.op("conv1.gelu", b.size(2*h, p.e), p.e, list(c1), whisperSaves(p, c1)...)
	c2 := whisperConv(b, p, "conv2", list(g1), h, h*h*3)
	g2 := b.op("conv2.gelu", b.size(h, p.e), p.e, list(c2), whisperSaves(p, c2)...)
	pos := b.op("embed_positions", p.baseDType.Size(int64(m.SourcePositions)*h), p.baseDType, nil)
	return b.op("add_positions", b.size(h, p.resid), p.resid, list(g2, pos))
}

// whisperSaves is what a front-end op saves of x: nothing when its
// kernels are frozen, since the features need no gradient and autograd
// then records no node.
func whisperSaves(p blockPlan, x ...*actT) []*actT {
	if p.frozen {
		return nil
	}
	return x
}

// whisperConv is an nn.Conv1d of kernel elements (out × in × 3) making
// width elements a position: it saves its input and its kernel.
func whisperConv(b *actBuilder, p blockPlan, name string, ins []*actT, width, kernel int64) *actT {
	y := b.op(name, b.size(width, p.e), p.e, ins, whisperSaves(p, ins...)...)
	b.ops[len(b.ops)-1].gemm = true
	if p.frozen {
		return y
	}
	b.ops[len(b.ops)-1].weights = kernel
	if p.autocast {
		b.side(name+".weight_cast", p.e.Size(kernel), p.e).weightCopy = true
		b.ops[len(b.ops)-1].castWeights = true
	}
	return y
}

// whisperBridge is what runs between the stacks: the encoder's
// layer_norm, whose output the model returns (encoder_last_hidden_state)
// and every decoder block's cross-attention k and v read; then
// WhisperDecoder.forward before its layers (modeling_whisper.py:856-891):
// embed_tokens, the learned positions indexed by position_ids (batch ×
// target rows), their sum and dropout, the first decoder block's input.
func whisperBridge(r *resolved, p blockPlan) BlockActivations {
	m := r.m
	batch, S, T := int64(r.MicroBatch), int64(m.encoderLen(r.SeqLen)), int64(r.DecoderSeqLen)
	h := int64(m.Hidden)
	b := newActBuilder(r, batch*S)
	x := b.newT(actT{name: "encoder_blocks_output", op: "input", bytes: p.resid.Size(batch * S * h), dtype: p.resid, born: -1, lastUse: -1, external: true})
	x.id = len(b.ts)
	b.ts = append(b.ts, x)
	eo := b.norm(p, "encoder.layer_norm", "layernorm", x, h)
	eo.held = true // returned by the model, and saved by every decoder block's cross-attention k and v
	b.tokens = batch * T
	e := b.op("decoder.embed_tokens", b.size(h, p.baseDType), p.baseDType, nil)
	pos := b.op("decoder.embed_positions", b.size(h, p.baseDType), p.baseDType, nil)
	y := b.op("decoder.add_positions", b.size(h, p.resid), p.resid, list(e, pos))
	y = b.dropout(p, "decoder.dropout", y, h, p.dropHid)
	y.keepAlive = true
	return b.summarize(x)
}

// whisperMasks: with eager attention the decoder builds a float causal
// mask, batch × 1 × target² in the embeddings' dtype (masking_utils
// create_causal_mask, modeling_whisper.py:893), which its blocks' scores
// add; SDPA and flash attention get none (is_causal). The encoder and the
// cross-attention are unmasked (modeling_whisper.py:710-712: the encoder
// layers get None; encoder_attention_mask is None).
func whisperMasks(r *resolved, p blockPlan) []maskPart {
	if r.Attention != "eager" {
		return nil
	}
	m := r.m
	T := int64(r.DecoderSeqLen)
	return []maskPart{{bytes: p.resid.Size(int64(r.MicroBatch) * T * T), from: m.Layers - m.DecoderLayers, to: m.Layers}}
}

// whisperFinalNorm is the decoder's layer_norm (modeling_whisper.py:948);
// proj_out reads its output.
func whisperFinalNorm(b *actBuilder, p blockPlan, x *actT, h int64) *actT {
	return b.norm(p, "decoder.layer_norm", "layernorm", x, h)
}

// whisperBlock is one WhisperEncoderLayer or WhisperDecoderLayer being
// built.
type whisperBlock struct {
	b          *actBuilder
	p          blockPlan
	dec        bool
	batch, h   int64
	heads, hd  int64 // query heads per rank and their width
	q, src     int64 // query tokens a sequence; the encoder's positions
	encOut     *actT
	crossFirst int // the first op that reads the encoder's output
	// inNoGrad: the block's input needs no gradient (the first block of a
	// stack whose embeddings are frozen: inputNoGrad).
	inNoGrad bool
}

// buildWhisperBlock lists the activations of block layer: self-attention,
// in the decoder the cross-attention, and the MLP, each a pre-norm
// sublayer with a residual add (modeling_whisper.py:409-426, :499-537).
func buildWhisperBlock(r *resolved, layer int) BlockActivations {
	m := r.m
	p := r.blockPlan(layer)
	w := &whisperBlock{p: p, dec: m.DecoderBlock(layer), batch: int64(r.MicroBatch), h: int64(m.Hidden),
		heads: int64(m.Heads) / p.tp, hd: int64(m.HeadDim), src: int64(m.encoderLen(r.SeqLen))}
	// The encoder's first block reads the convolutions' output, which
	// needs no gradient when they are frozen, checkpointed or not: what
	// makes the embeddings' output require one under checkpointing
	// (enable_input_require_grads) hooks get_input_embeddings(), the
	// decoder's embed_tokens (modeling_whisper.py:979, :1191).
	w.inNoGrad = r.inputNoGrad() && m.stackStart(layer) || layer == 0 && r.frozen && r.runsTransformers()
	w.q = w.src
	if w.dec {
		w.q = int64(r.DecoderSeqLen)
	}
	w.b = newActBuilder(r, w.batch*w.q)
	in := w.input("input", w.q)
	if w.dec {
		// The encoder's output: one tensor, which whisperBridge makes
		// and holds; the block's k_proj and v_proj save that tensor (in
		// fp32) or their own autocast copies of it, so the block counts
		// no copy of its own (batch: counted where it is made).
		w.encOut = w.input("encoder_output", w.src)
		w.encOut.batch = true
	}
	x := w.sublayer("self_attn", in, w.selfAttention)
	if w.dec {
		x = w.sublayer("encoder_attn", x, w.crossAttention)
	}
	x = w.sublayer("final", x, w.mlp)
	if !w.dec && p.resid == FP16 {
		// torch.clamp of fp16 hidden states (modeling_whisper.py:428-430),
		// which saves its input for the backward's mask.
		x = w.b.op("clamp", w.b.size(w.h, FP16), FP16, list(x), x)
	}
	x.keepAlive = true
	w.encoderGradient(layer)
	if w.inNoGrad {
		// The frozen front end or decoder embeddings: the block's input
		// needs no gradient (the encoder's output, which trained
		// adapters made, does).
		var grads []*actT
		if w.dec {
			grads = append(grads, w.encOut)
		}
		w.b.withoutGrad(in, grads...)
	}
	return w.b.summarize(in)
}

// input adds an external tensor of tokens per sequence × hidden.
func (w *whisperBlock) input(name string, tokens int64) *actT {
	return w.b.external(name, w.p.resid.Size(w.batch*tokens*w.h), w.p.resid)
}

// sublayer is the pre-norm sublayer: its LayerNorm (name_layer_norm; the
// output held until f returns), f, dropout and the residual add.
func (w *whisperBlock) sublayer(name string, x *actT, f func(*actT) *actT) *actT {
	b, p := w.b, w.p
	n := b.norm(p, name+"_layer_norm", "layernorm", x, w.h)
	y := f(n)
	b.hold(n)
	y = b.dropout(p, name+".dropout", y, w.h, p.dropHid)
	return b.residualAdd(p, name+".residual", w.h, x, y)
}

func (w *whisperBlock) selfAttention(n *actT) *actT {
	return w.attend("self_attn", n, n, w.q, w.dec && w.p.useCache, w.dec, !w.inNoGrad)
}

func (w *whisperBlock) crossAttention(n *actT) *actT {
	return w.attend("encoder_attn", n, w.encOut, w.src, w.p.useCache, false, true)
}

// mlp is fc1, GELU (F.gelu saves its input), activation dropout (0 in
// every released config, not modelled) and fc2.
func (w *whisperBlock) mlp(n *actT) *actT {
	b, p := w.b, w.p
	f := int64(b.r.m.FFN) / p.tp
	u := b.linear(p, "fc1", "up_proj", n, w.h, f)
	g := b.op("gelu", b.size(f, p.e), p.e, list(u), u)
	return b.linear(p, "fc2", "down_proj", g, f, w.h)
}

// attend is WhisperAttention.forward (modeling_whisper.py:288-368) with
// queries from xq and keys and values from kv (kvLen tokens a sequence):
// q_proj times scaling, then q, k and v each transposed to (batch,
// heads, tokens, head_dim) and made contiguous (copies); with a cache,
// DynamicLayer.update's torch.cat copies of k and v, which attention
// reads and the returned cache holds; attention; out_proj.
func (w *whisperBlock) attend(name string, xq, kv *actT, kvLen int64, cache, causal, inGrad bool) *actT {
	b, p, h := w.b, w.p, w.h
	inner := w.heads * w.hd
	q := b.linear(p, name+".q_proj", "q_proj", xq, h, inner)
	q = b.op(name+".q*scaling", b.size(inner, q.dtype), q.dtype, list(q))
	q = b.op(name+".q.contiguous", b.size(inner, q.dtype), q.dtype, list(q))
	tokens := b.tokens
	b.tokens = w.batch * kvLen
	if kv == w.encOut {
		w.crossFirst = len(b.ops)
	}
	k := b.linear(p, name+".k_proj", "k_proj", kv, h, inner)
	k = b.op(name+".k.contiguous", b.size(inner, k.dtype), k.dtype, list(k))
	v := b.linear(p, name+".v_proj", "v_proj", kv, h, inner)
	v = b.op(name+".v.contiguous", b.size(inner, v.dtype), v.dtype, list(v))
	if cache {
		k = b.op(name+".cache.k", b.size(inner, k.dtype), k.dtype, list(k))
		v = b.op(name+".cache.v", b.size(inner, v.dtype), v.dtype, list(v))
		p.holdOutput(k, v)
	}
	b.tokens = tokens
	var o *actT
	if p.attnImpl == "eager" {
		// What needs a gradient: q, k and v from a source that does, or
		// from an adapted projection (the cross-attention's source, the
		// encoder's output, does).
		g := [3]bool{inGrad || p.lora["q_proj"], kv == w.encOut || inGrad || p.lora["k_proj"], kv == w.encOut || inGrad || p.lora["v_proj"]}
		o = w.eager(name, q, k, v, kvLen, causal, g)
	} else {
		d := blockDims{h: h, hSeq: h, hd: w.hd, heads: w.heads, kvHeads: w.heads, qDim: inner, kvDim: inner, oDim: inner}
		pk := p
		pk.seq, pk.keys = b.tokens/w.batch, kvLen
		// q is a (batch, heads, tokens, head_dim) tensor of its own, so
		// the output's transpose(1, 2).contiguous() copies.
		o = b.fusedAttention(pk, d, qkv{q: q, k: k, v: v, kd: inner, freshQ: true})
	}
	return b.linear(p, name+".out_proj", "o_proj", o, inner, h)
}

// eager is eager_attention_forward (modeling_whisper.py:214-241) as
// WhisperAttention calls it (scaling 1.0): the scores matmul (saves q and
// k), times 1.0 (a new tensor), plus the causal mask in the decoder's
// self-attention (promoted to the mask's dtype), softmax (saves its
// output) in that dtype, or in fp32 under autocast (softmax is on CUDA
// autocast's fp32 list; a CPU's autocast keeps it in bf16, which the CPU
// traces therefore do not exercise), dropout, the matmul with v (saves
// the probabilities, autocast's copy of them, and v), and
// transpose(1, 2).contiguous(). A
// matmul saves each operand only for the other's gradient: grad says
// which of q, k and v need one.
func (w *whisperBlock) eager(name string, q, k, v *actT, kvLen int64, causal bool, grad [3]bool) *actT {
	b, p := w.b, w.p
	inner := w.heads * w.hd
	maps := w.batch * w.heads * (b.tokens / w.batch) * kvLen
	sc := b.op(name+".scores", p.e.Size(maps), p.e, list(q, k), operands(q, grad[1], k, grad[0])...)
	b.ops[len(b.ops)-1].gemm = true
	sc.attn = true
	sc = b.op(name+".scores*scaling", sc.bytes, sc.dtype, list(sc))
	sc.attn = true
	if causal {
		md := promote(p.e, p.resid)
		sc = b.op(name+".scores+mask", md.Size(maps), md, list(sc))
		sc.attn = true
	}
	probD := sc.dtype
	if p.autocast {
		probD = FP32
	}
	pr := b.keep(b.op(name+".softmax", probD.Size(maps), probD, list(sc)))
	pr.attn = true
	if p.dropAttn > 0 {
		pr = b.op(name+".attn_dropout", pr.bytes, pr.dtype, list(pr))
		pr.attn = true
		b.side(name+".attn_dropout.mask", Bool.Size(maps), Bool).attn = true
	}
	pv := b.castIn(p, pr.name, pr)
	pv.attn = true
	o := b.op(name+".probs@v", b.size(inner, p.e), p.e, list(pv, v), operands(pv, grad[2], v, grad[0] || grad[1])...)
	b.ops[len(b.ops)-1].gemm = true
	return b.op(name+".attn_output.contiguous", b.size(inner, p.e), p.e, list(o))
}

// operands is what a matmul of a and b saves: a when b needs a gradient
// (aGrad: bᵀ·g… needs a), b when a does (autograd's generated
// MmBackward/BmmBackward save each input only for the other's gradient).
func operands(a *actT, bNeedsGrad bool, b *actT, aNeedsGrad bool) []*actT {
	var out []*actT
	if bNeedsGrad {
		out = append(out, a)
	}
	if aNeedsGrad {
		out = append(out, b)
	}
	return out
}

// encoderGradient: in the decoder, the gradient of the encoder's output,
// which every block's cross-attention k and v add to, exists from the
// backward of the first op reading it in the stack's last block; before
// that op in every other decoder block (as T5's, encdec.go
// stackGradients).
func (w *whisperBlock) encoderGradient(layer int) {
	if !w.dec {
		return
	}
	b, p := w.b, w.p
	g := gradSize(&actT{bytes: p.resid.Size(w.batch * w.src * w.h), dtype: p.resid})
	top := layer == b.r.m.Layers-1
	for i := range b.ops {
		if !top || i <= w.crossFirst {
			b.ops[i].heldGrad = addBytes(b.ops[i].heldGrad, g)
		}
	}
	if !top {
		b.persistGrad = g
	}
}
