package vram

import "fmt"

// Shared building blocks of the families' parameter inventories: the
// tensors of a linear layer, a norm, an attention with separate or fused
// projections, a plain, gated or fused-gated MLP, routed experts, and the
// standard pre-norm decoder layout most families follow. A family's file
// composes them with its own names.

// tensorList builds a model's tensors in state-dict order.
type tensorList struct {
	ts    []Tensor
	layer int  // the block being listed, -1 outside the blocks
	head  bool // listing the head side (final norm, output layer, task head)
}

func (l *tensorList) tensor(name, role string, shape []int64) {
	l.ts = append(l.ts, Tensor{Name: name, Shape: shape, Layer: l.layer, Role: role, Expert: -1, head: l.head})
}

func (l *tensorList) add(name, role string, shape ...int64) { l.tensor(name, role, shape) }

// linear adds weight [out, in] and optionally its bias.
func (l *tensorList) linear(prefix, role string, in, out int64, bias bool, parts ...Part) {
	l.tensor(prefix+".weight", role, []int64{out, in})
	l.ts[len(l.ts)-1].Parts = parts
	if bias {
		l.add(prefix+".bias", "bias", out)
	}
}

// norm adds a norm's scale (and a LayerNorm's bias).
func (l *tensorList) norm(prefix string, layerNorm bool, h int64) {
	l.add(prefix+".weight", "norm", h)
	if layerNorm {
		l.add(prefix+".bias", "norm", h)
	}
}

// block starts listing block i; outside starts the embedding side
// (layer -1) and headSide the head side.
func (l *tensorList) block(i int) { l.layer, l.head = i, false }
func (l *tensorList) outside()    { l.layer, l.head = -1, false }
func (l *tensorList) headSide()   { l.layer, l.head = -1, true }

// asExpert marks the tensors added since start as routed expert e's.
func (l *tensorList) asExpert(start, e int) {
	for i := start; i < len(l.ts); i++ {
		l.ts[i].Expert = e
	}
}

// dims are the widths a model's tensors are built from.
type dims struct {
	h, v, f int64 // hidden, vocabulary, MLP inner width
	q, kv   int64 // query and key/value projection widths (heads × head_dim)
	ln      bool  // LayerNorm (scale and bias) rather than RMSNorm
}

func (m Model) dims() dims {
	hd := int64(m.HeadDim)
	return dims{h: int64(m.Hidden), v: int64(m.Vocab), f: int64(m.FFN),
		q: int64(m.Heads) * hd, kv: int64(m.KVHeads) * hd, ln: m.Norm == "layernorm"}
}

// attnQKVO adds separate q, k, v and output projections under prefix p
// (ending in "."), with the biases the model's BiasMode gives.
func attnQKVO(m Model, l *tensorList, p string) {
	d := m.dims()
	l.linear(p+"q_proj", "q_proj", d.h, d.q, m.Bias.attn())
	l.linear(p+"k_proj", "k_proj", d.h, d.kv, m.Bias.attn())
	l.linear(p+"v_proj", "v_proj", d.h, d.kv, m.Bias.attn())
	l.linear(p+"o_proj", "o_proj", d.q, d.h, m.Bias.out())
}

// fusedQKV adds one q|k|v matrix named name, split by role.
func fusedQKV(m Model, l *tensorList, name string, bias bool) {
	d := m.dims()
	l.linear(name, "qkv_proj", d.h, d.q+2*d.kv, bias, Part{"q_proj", d.q}, Part{"k_proj", d.kv}, Part{"v_proj", d.kv})
}

// mlpGated adds gate, up and down projections (or up and down for an
// ungated MLP) of inner width f under prefix p, as routed expert e (-1: not
// an expert).
func mlpGated(m Model, l *tensorList, p string, f int64, e int) {
	start := len(l.ts)
	h := int64(m.Hidden)
	if m.Gated() {
		l.linear(p+"gate_proj", "gate_proj", h, f, m.Bias.mlp())
	}
	l.linear(p+"up_proj", "up_proj", h, f, m.Bias.mlp())
	l.linear(p+"down_proj", "down_proj", f, h, m.Bias.mlp())
	l.asExpert(start, e)
}

// routedExperts adds a router named p+"gate" and the Experts gated MLPs
// p+"experts.N." of width ExpertFFN (Qwen-MoE, DeepSeek).
func routedExperts(m Model, l *tensorList, p string) {
	l.linear(p+"gate", "router", int64(m.Hidden), int64(m.Experts), false)
	for e := 0; e < m.Experts; e++ {
		mlpGated(m, l, fmt.Sprintf("%sexperts.%d.", p, e), int64(m.ExpertFFN), e)
	}
}

// stackedExperts adds routed experts kept as stacked tensors under p (Llama
// 4, gpt-oss): gate_up_proj [experts, hidden, 2·expert_ffn] and down_proj
// [experts, expert_ffn, hidden], with biases [experts, 2·expert_ffn] and
// [experts, hidden] when bias, in the modules' registration order.
func stackedExperts(m Model, l *tensorList, p string, bias bool) {
	e, h, f := int64(m.Experts), int64(m.Hidden), int64(m.ExpertFFN)
	start := len(l.ts)
	l.add(p+"gate_up_proj", "gate_up_proj", e, h, 2*f)
	if bias {
		l.add(p+"gate_up_proj_bias", "bias", e, 2*f)
	}
	l.add(p+"down_proj", "down_proj", e, f, h)
	if bias {
		l.add(p+"down_proj_bias", "bias", e, h)
	}
	for i := start; i < len(l.ts); i++ {
		l.ts[i].Stacked = m.Experts
	}
}

// fusedExperts adds routed experts as transformers 5 fuses them under p
// (glm4_moe_lite/modeling_glm4_moe_lite.py:445-446 and its 5.x siblings):
// gate_up_proj [experts, 2·expert_ffn, hidden] (gate rows, then up) and
// down_proj [experts, hidden, expert_ffn], each expert an nn.Linear weight,
// no ".weight" suffix.
func fusedExperts(m Model, l *tensorList, p string) {
	e, h, f := int64(m.Experts), int64(m.Hidden), int64(m.ExpertFFN)
	start := len(l.ts)
	l.add(p+"gate_up_proj", "gate_up_proj", e, 2*f, h)
	l.add(p+"down_proj", "down_proj", e, h, f)
	for i := start; i < len(l.ts); i++ {
		l.ts[i].Stacked, l.ts[i].OutIn = m.Experts, true
	}
}

// mlpFusedGateUp adds one gate|up matrix and the down projection.
func mlpFusedGateUp(m Model, l *tensorList, p string, f int64, e int) {
	start := len(l.ts)
	h := int64(m.Hidden)
	l.linear(p+"gate_up_proj", "gate_up_proj", h, 2*f, false, Part{"gate_proj", f}, Part{"up_proj", f})
	l.linear(p+"down_proj", "down_proj", f, h, false)
	l.asExpert(start, e)
}

// standardDecoder is the layout of a pre-norm decoder: the token embedding,
// blocks of norm → attention → norm → MLP, a final norm and the output
// layer, under the names most families share (model.layers.N.self_attn…).
// attn and mlp list one block's attention and MLP (or mixture of experts)
// tensors under their prefix.
type standardDecoder struct {
	attn func(m Model, l *tensorList, p string)
	mlp  func(m Model, l *tensorList, p string, layer int)
}

func (s standardDecoder) tensors(m Model, l *tensorList) {
	d := m.dims()
	l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
	if m.Position == "learned" {
		// A decoder given by its shape with learned absolute positions
		// (Megatron-LM's LanguageModelEmbedding.position_embeddings,
		// max_position_embeddings × hidden, replicated across TP ranks).
		l.add("model.embed_positions.weight", "position", int64(m.MaxPosition), d.h)
	}
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		l.norm(p+"input_layernorm", d.ln, d.h)
		s.attn(m, l, p+"self_attn.")
		l.norm(p+"post_attention_layernorm", d.ln, d.h)
		s.mlp(m, l, p, i)
	}
	l.headSide()
	l.norm("model.norm", d.ln, d.h)
	lmHead(m, l, "lm_head", "score")
}

// denseMLP is the MLP of a standard decoder block: gated or not, under mlp.
func denseMLP(m Model, l *tensorList, p string, _ int) { mlpGated(m, l, p+"mlp.", int64(m.FFN), -1) }

// lmHead adds the output projection of a decoder: an untied LM head (or
// only its bias when tied), or a sequence classifier named cls.
func lmHead(m Model, l *tensorList, lmName, clsName string) {
	classes, _ := m.headClasses()
	h, v := int64(m.Hidden), int64(m.Vocab)
	switch {
	case classes > 0:
		l.linear(clsName, "other", h, int64(classes), false)
	case m.Head == "lm" && !m.TiedEmbeddings:
		l.linear(lmName, "lm_head", h, v, m.LMHeadBias)
	case m.Head == "lm" && m.LMHeadBias:
		l.add(lmName+".bias", "bias", v)
	}
}

// bufferList builds a model's module buffers.
type bufferList struct{ bs []Buffer }

func (b *bufferList) add(name string, layer int, d DType, shape ...int64) {
	b.bs = append(b.bs, Buffer{Name: name, Shape: shape, DType: d, Layer: layer})
}

// rotaryBuffer adds the rotary embedding's inv_freq (one per rotated pair
// of a head's dimensions) under prefix p (transformers' *RotaryEmbedding
// register_buffer("inv_freq", persistent=False)).
func rotaryBuffer(m Model, b *bufferList, p string) {
	rot := int64(float64(m.HeadDim) * m.RotaryPct)
	b.add(p+"rotary_emb.inv_freq", -1, FP32, rot/2)
}

// rotaryBuffers5 are transformers 5's rotary buffers under p: inv_freq and
// original_inv_freq, each of the rotated dimensions' half
// (modeling_minimax_m2.py:161-162 and every 5.x *RotaryEmbedding).
func rotaryBuffers5(m Model, b *bufferList, p string) {
	rot := int64(float64(m.HeadDim) * m.RotaryPct)
	b.add(p+"rotary_emb.inv_freq", -1, FP32, rot/2)
	b.add(p+"rotary_emb.original_inv_freq", -1, FP32, rot/2)
}

// mlaTensors adds multi-head latent attention's tensors (DeepSeek-V2 §2.1.2):
// q through a low-rank q_a/q_b pair (or one q_proj without q_lora_rank), the
// compressed kv with the decoupled rotary key (kv_a_proj_with_mqa), its norm
// and up-projection, and the output projection.
func mlaTensors(m Model, l *tensorList, p string) {
	h, nh := int64(m.Hidden), int64(m.Heads)
	qk := int64(m.QKNopeDim + m.QKRopeDim)
	// attention_bias puts biases on q_a_proj, kv_a_proj_with_mqa and
	// o_proj (DeepseekV3Attention; glm4_moe_lite l.246-270), not on q_proj,
	// q_b_proj or kv_b_proj.
	bias := m.Bias == BiasQKVOnly
	if m.QLoRARank > 0 {
		r := int64(m.QLoRARank)
		l.linear(p+"q_a_proj", "q_proj", h, r, bias)
		l.norm(p+"q_a_layernorm", false, r)
		l.linear(p+"q_b_proj", "q_proj", r, nh*qk, false)
	} else {
		l.linear(p+"q_proj", "q_proj", h, nh*qk, false)
	}
	r := int64(m.KVLoRARank)
	l.linear(p+"kv_a_proj_with_mqa", "k_proj", h, r+int64(m.QKRopeDim), bias)
	l.norm(p+"kv_a_layernorm", false, r)
	l.linear(p+"kv_b_proj", "v_proj", r, nh*int64(m.QKNopeDim+m.VHeadDim), false)
	l.linear(p+"o_proj", "o_proj", nh*int64(m.VHeadDim), h, bias)
}

// conv1DDecoder is the layout of GPT-2-style blocks under transformer.h.N:
// learned positions, a fused c_attn and c_proj, an MLP of c_fc and c_proj,
// LayerNorms ln_1, ln_2 and ln_f, every matmul with a bias.
func conv1DDecoder(m Model, l *tensorList) {
	d := m.dims()
	l.add("transformer.wte.weight", "embedding", d.v, d.h)
	l.add("transformer.wpe.weight", "position", int64(m.MaxPosition), d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("transformer.h.%d.", i)
		l.norm(p+"ln_1", true, d.h)
		fusedQKV(m, l, p+"attn.c_attn", true)
		l.linear(p+"attn.c_proj", "o_proj", d.q, d.h, true)
		l.norm(p+"ln_2", true, d.h)
		l.linear(p+"mlp.c_fc", "up_proj", d.h, d.f, true)
		l.linear(p+"mlp.c_proj", "down_proj", d.f, d.h, true)
	}
	l.headSide()
	l.norm("transformer.ln_f", true, d.h)
	lmHead(m, l, "lm_head", "score")
}

// parallelNames name a parallel block of one norm feeding attention (q, k,
// v and an output projection) and a plain MLP (GPT-J, Phi).
type parallelNames struct {
	embed, layers, final string // "transformer.wte.weight", "transformer.h.%d.", "transformer.ln_f"
	norm, attn, out      string // "ln_1", "attn.", "out_proj"
	fcIn, fcOut          string // "mlp.fc_in", "mlp.fc_out"
}

// parallelDecoder lists a one-norm parallel-block decoder under names n.
func parallelDecoder(n parallelNames) func(m Model, l *tensorList) {
	return func(m Model, l *tensorList) {
		d := m.dims()
		l.add(n.embed, "embedding", d.v, d.h)
		for i := 0; i < m.Layers; i++ {
			l.block(i)
			p := fmt.Sprintf(n.layers, i)
			l.norm(p+n.norm, true, d.h)
			l.linear(p+n.attn+"q_proj", "q_proj", d.h, d.q, m.Bias.attn())
			l.linear(p+n.attn+"k_proj", "k_proj", d.h, d.kv, m.Bias.attn())
			l.linear(p+n.attn+"v_proj", "v_proj", d.h, d.kv, m.Bias.attn())
			l.linear(p+n.attn+n.out, "o_proj", d.q, d.h, m.Bias.out())
			l.linear(p+n.fcIn, "up_proj", d.h, d.f, m.Bias.mlp())
			l.linear(p+n.fcOut, "down_proj", d.f, d.h, m.Bias.mlp())
		}
		l.headSide()
		l.norm(n.final, true, d.h)
		lmHead(m, l, "lm_head", "score")
	}
}

// qkNormTensors adds the q_norm and k_norm scales of a model with QKNorm
// "head" (one per head dimension) or "full" (one per projection output).
func qkNormTensors(m Model, l *tensorList, p string) {
	d := m.dims()
	switch m.QKNorm {
	case "head":
		l.add(p+"q_norm.weight", "norm", int64(m.HeadDim))
		l.add(p+"k_norm.weight", "norm", int64(m.HeadDim))
	case "full":
		l.add(p+"q_norm.weight", "norm", d.q)
		l.add(p+"k_norm.weight", "norm", d.kv)
	}
}

// sublayerDecoder is the layout of OLMo 2/3 and EXAONE 4 blocks:
// attention with its q/k norms and the MLP, each followed by its norm
// (post_attention_layernorm, post_feedforward_layernorm), none before.
func sublayerDecoder(m Model, l *tensorList) {
	d := m.dims()
	l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		attnQKVO(m, l, p+"self_attn.")
		qkNormTensors(m, l, p+"self_attn.")
		mlpGated(m, l, p+"mlp.", d.f, -1)
		l.norm(p+"post_attention_layernorm", false, d.h)
		l.norm(p+"post_feedforward_layernorm", false, d.h)
	}
	l.headSide()
	l.norm("model.norm", false, d.h)
	lmHead(m, l, "lm_head", "score")
}

// routerBiases lists each MoE layer's router e_score_correction_bias (a
// persistent fp32 buffer the checkpoint stores) from DenseLayers up to
// layers (the MTP layers included).
func routerBiases(m Model, l *tensorList, layers int) {
	for i := m.DenseLayers; i < layers; i++ {
		l.block(i)
		l.add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), "bias", int64(m.Experts))
		l.ts[len(l.ts)-1].DType = FP32
	}
}

// sandwichDecoder is the layout of Gemma 2/3 blocks: attention and MLP, then
// the four norms around them (input, post-attention, pre- and
// post-feedforward), under the standard names.
func sandwichDecoder(m Model, l *tensorList) {
	d := m.dims()
	l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		attnQKVO(m, l, p+"self_attn.")
		qkNormTensors(m, l, p+"self_attn.")
		mlpGated(m, l, p+"mlp.", d.f, -1)
		for _, n := range []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"} {
			l.norm(p+n, d.ln, d.h)
		}
	}
	l.headSide()
	l.norm("model.norm", d.ln, d.h)
	lmHead(m, l, "lm_head", "score")
}
