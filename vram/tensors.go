package vram

import (
	"fmt"
	"sync"
)

// Tensor is one parameter tensor of a model.
type Tensor struct {
	Name  string  `json:"name"`  // Hugging Face state-dict name
	Shape []int64 `json:"shape"` // [out, in] for linear weights, as PyTorch stores them
	Layer int     `json:"layer"` // transformer block index, -1 outside the blocks
	// Role is the Llama-style name of a linear layer's job (q_proj, k_proj,
	// v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head), "qkv_proj" or
	// "gate_up_proj" for fused matrices, or "embedding", "norm", "bias",
	// "position", "router", "other". LoRA targets and quantization use it.
	Role string `json:"role"`
	// Parts splits a fused linear's output rows by role (q/k/v, gate/up), so a
	// LoRA that targets only some of them is sized exactly.
	Parts []Part `json:"parts,omitempty"`
	// Expert is the routed-expert index, or -1.
	Expert int `json:"expert"`
	// DType is set when the tensor was read from a checkpoint.
	DType DType `json:"dtype,omitempty"`
	// Bytes is the stored size when read from a checkpoint.
	Bytes Bytes `json:"bytes,omitempty"`
}

// Part is one role's slice of a fused linear layer.
type Part struct {
	Role string `json:"role"`
	Out  int64  `json:"out"`
}

// Numel is the element count (1 for a scalar, whose shape is empty).
func (t Tensor) Numel() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n = mulI64(n, d)
	}
	return n
}

// IsLinear reports whether t is the weight of a linear (matmul) layer: what
// quantization replaces and LoRA adapts.
func (t Tensor) IsLinear() bool {
	switch t.Role {
	case "embedding", "norm", "bias", "position", "other", "":
		return false
	}
	return len(t.Shape) == 2
}

// tensorList builds a model's tensors in state-dict order.
type tensorList struct {
	ts    []Tensor
	layer int
}

func (l *tensorList) add(name, role string, shape ...int64) {
	l.ts = append(l.ts, Tensor{Name: name, Shape: shape, Layer: l.layer, Role: role, Expert: -1})
}

// linear adds weight [out,in] and optionally its bias.
func (l *tensorList) linear(prefix, role string, in, out int64, bias bool, parts ...Part) {
	l.ts = append(l.ts, Tensor{Name: prefix + ".weight", Shape: []int64{out, in}, Layer: l.layer, Role: role, Parts: parts, Expert: -1})
	if bias {
		l.add(prefix+".bias", "bias", out)
	}
}

func (l *tensorList) norm(prefix string, layerNorm bool, h int64) {
	l.add(prefix+".weight", "norm", h)
	if layerNorm {
		l.add(prefix+".bias", "norm", h)
	}
}

// Tensors lists every parameter tensor with its Hugging Face name and shape
// (as transformers' modeling_<family>.py registers them), tied matrices once.
// The model must be valid (see Validate); an invalid one yields what it can.
func (m Model) Tensors() []Tensor {
	return append([]Tensor(nil), m.tensors()...)
}

// tensorCache memoizes tensor lists by normalized model, keyed by value
// (modelKey), so a caller that changes a model it shares with another can
// never be served the other's stale list: sweeps estimate the same
// architecture thousands of times.
var (
	tensorCache   sync.Map // Model → tensorSet
	tensorCacheMu sync.Mutex
	tensorCacheN  int
)

// modelKey is a Model by value: its pointer fields replaced by what they
// point to.
type modelKey struct {
	m     Model
	image Image
}

func (m Model) key() modelKey {
	k := modelKey{m: m}
	if m.Image != nil {
		k.image, k.m.Image = *m.Image, nil
	}
	return k
}

type tensorSet struct {
	ts     []Tensor
	params int64
	// byLayer[l] indexes block l's tensors; outside indexes the rest.
	byLayer [][]int
	outside []int
}

// tensors is Tensors without the copy; callers must not modify the result.
func (m Model) tensors() []Tensor { return m.tensorSet().ts }

func (m Model) tensorSet() tensorSet {
	m = m.Normalize()
	if m.ranges() != nil || m.Layers < 0 {
		return tensorSet{} // out of range: Validate says which field
	}
	key := m.key()
	if ts, ok := tensorCache.Load(key); ok {
		return ts.(tensorSet)
	}
	ts := tensorSet{ts: m.buildTensors(), byLayer: make([][]int, m.Layers)}
	for i, t := range ts.ts {
		ts.params = int64(addBytes(Bytes(ts.params), Bytes(t.Numel())))
		if t.Layer >= 0 && t.Layer < m.Layers {
			ts.byLayer[t.Layer] = append(ts.byLayer[t.Layer], i)
		} else {
			ts.outside = append(ts.outside, i)
		}
	}
	tensorCacheMu.Lock()
	if tensorCacheN >= 256 { // bound the memory a long fuzz or sweep can hold
		tensorCache.Range(func(k, _ any) bool { tensorCache.Delete(k); return true })
		tensorCacheN = 0
	}
	tensorCache.Store(key, ts)
	tensorCacheN++
	tensorCacheMu.Unlock()
	return ts
}

func (m Model) buildTensors() []Tensor {
	l := &tensorList{layer: -1}
	h, v := int64(m.Hidden), int64(m.Vocab)
	ln := m.Norm == "layernorm"
	hd := int64(m.HeadDim)
	q, kv := int64(m.Heads)*hd, int64(m.KVHeads)*hd
	f := int64(m.FFN)
	classes, _ := m.headClasses()

	switch m.Family {
	case "gpt2", "gpt_bigcode":
		// modeling_gpt2.py / modeling_gpt_bigcode.py: Conv1D c_attn fused q|k|v.
		l.add("transformer.wte.weight", "embedding", v, h)
		l.add("transformer.wpe.weight", "position", int64(m.MaxPosition), h)
		for i := 0; i < m.Layers; i++ {
			l.layer = i
			p := fmt.Sprintf("transformer.h.%d.", i)
			l.norm(p+"ln_1", true, h)
			l.linear(p+"attn.c_attn", "qkv_proj", h, q+2*kv, true, Part{"q_proj", q}, Part{"k_proj", kv}, Part{"v_proj", kv})
			l.linear(p+"attn.c_proj", "o_proj", q, h, true)
			l.norm(p+"ln_2", true, h)
			l.linear(p+"mlp.c_fc", "up_proj", h, f, true)
			l.linear(p+"mlp.c_proj", "down_proj", f, h, true)
		}
		l.layer = -1
		l.norm("transformer.ln_f", true, h)
		m.head(l, "lm_head", "transformer.wte.weight", classes, "score")

	case "gpt_neox":
		// modeling_gpt_neox.py: fused query_key_value, two LayerNorms per layer
		// even with the parallel residual.
		l.add("gpt_neox.embed_in.weight", "embedding", v, h)
		for i := 0; i < m.Layers; i++ {
			l.layer = i
			p := fmt.Sprintf("gpt_neox.layers.%d.", i)
			l.norm(p+"input_layernorm", true, h)
			l.norm(p+"post_attention_layernorm", true, h)
			l.linear(p+"attention.query_key_value", "qkv_proj", h, q+2*kv, m.Bias.attn(), Part{"q_proj", q}, Part{"k_proj", kv}, Part{"v_proj", kv})
			l.linear(p+"attention.dense", "o_proj", q, h, m.Bias.out())
			l.linear(p+"mlp.dense_h_to_4h", "up_proj", h, f, m.Bias.mlp())
			l.linear(p+"mlp.dense_4h_to_h", "down_proj", f, h, m.Bias.mlp())
		}
		l.layer = -1
		l.norm("gpt_neox.final_layer_norm", true, h)
		m.head(l, "embed_out", "gpt_neox.embed_in.weight", classes, "score")

	case "gptj", "phi":
		// modeling_gptj.py / modeling_phi.py: one LayerNorm per parallel block.
		prefix, emb, norm, attnP, fc := "transformer.h.%d.", "transformer.wte.weight", "transformer.ln_f", "attn", [2]string{"mlp.fc_in", "mlp.fc_out"}
		qn, kn, vn, on, ln1 := "q_proj", "k_proj", "v_proj", "out_proj", "ln_1"
		if m.Family == "phi" {
			prefix, emb, norm, attnP, fc = "model.layers.%d.", "model.embed_tokens.weight", "model.final_layernorm", "self_attn", [2]string{"mlp.fc1", "mlp.fc2"}
			on, ln1 = "dense", "input_layernorm"
		}
		l.add(emb, "embedding", v, h)
		for i := 0; i < m.Layers; i++ {
			l.layer = i
			p := fmt.Sprintf(prefix, i)
			l.norm(p+ln1, true, h)
			l.linear(p+attnP+"."+qn, "q_proj", h, q, m.Bias.attn())
			l.linear(p+attnP+"."+kn, "k_proj", h, kv, m.Bias.attn())
			l.linear(p+attnP+"."+vn, "v_proj", h, kv, m.Bias.attn())
			l.linear(p+attnP+"."+on, "o_proj", q, h, m.Bias.out())
			l.linear(p+fc[0], "up_proj", h, f, m.Bias.mlp())
			l.linear(p+fc[1], "down_proj", f, h, m.Bias.mlp())
		}
		l.layer = -1
		l.norm(norm, true, h)
		m.head(l, "lm_head", emb, classes, "score")

	case "opt":
		// modeling_opt.py: learned positions with an offset of 2 rows;
		// project_in/out when word_embed_proj_dim differs; no final norm for
		// post-LN configs (do_layer_norm_before=False).
		e := h
		if m.WordEmbedProjDim > 0 {
			e = int64(m.WordEmbedProjDim)
		}
		l.add("model.decoder.embed_tokens.weight", "embedding", v, e)
		l.add("model.decoder.embed_positions.weight", "position", int64(m.MaxPosition)+2, h)
		if e != h {
			l.linear("model.decoder.project_out", "other", h, e, false)
			l.linear("model.decoder.project_in", "other", e, h, false)
		}
		for i := 0; i < m.Layers; i++ {
			l.layer = i
			p := fmt.Sprintf("model.decoder.layers.%d.", i)
			l.linear(p+"self_attn.k_proj", "k_proj", h, kv, m.Bias.attn())
			l.linear(p+"self_attn.v_proj", "v_proj", h, kv, m.Bias.attn())
			l.linear(p+"self_attn.q_proj", "q_proj", h, q, m.Bias.attn())
			l.linear(p+"self_attn.out_proj", "o_proj", q, h, m.Bias.out())
			l.norm(p+"self_attn_layer_norm", true, h)
			l.linear(p+"fc1", "up_proj", h, f, m.Bias.mlp())
			l.linear(p+"fc2", "down_proj", f, h, m.Bias.mlp())
			l.norm(p+"final_layer_norm", true, h)
		}
		l.layer = -1
		if m.NormPosition != "post" {
			l.norm("model.decoder.final_layer_norm", true, h)
		}
		if classes > 0 {
			l.linear("score", "other", h, int64(classes), false)
		} else if m.Head == "lm" && !m.TiedEmbeddings {
			l.linear("lm_head", "lm_head", e, v, m.LMHeadBias)
		}

	case "bert", "vit":
		m.encoderTensors(l, classes)

	default: // llama-style: llama, mistral, mixtral, qwen2, gemma, phi3, deepseek_v3
		l.add("model.embed_tokens.weight", "embedding", v, h)
		for i := 0; i < m.Layers; i++ {
			l.layer = i
			p := fmt.Sprintf("model.layers.%d.", i)
			l.norm(p+"input_layernorm", ln, h)
			m.attentionTensors(l, p+"self_attn.", h, q, kv)
			l.norm(p+"post_attention_layernorm", ln, h)
			m.mlpTensors(l, p, i, h)
		}
		l.layer = -1
		l.norm("model.norm", ln, h)
		m.head(l, "lm_head", "model.embed_tokens.weight", classes, "score")
	}
	return l.ts
}

// head adds the output projection: an untied lm head, or a classifier.
func (m Model) head(l *tensorList, lmName, embName string, classes int, clsName string) {
	h, v := int64(m.Hidden), int64(m.Vocab)
	switch {
	case classes > 0:
		l.linear(clsName, "other", h, int64(classes), false)
	case m.Head == "lm" && !m.TiedEmbeddings:
		l.linear(lmName, "lm_head", h, v, m.LMHeadBias)
	case m.Head == "lm" && m.LMHeadBias:
		l.add(lmName+".bias", "bias", v)
	}
	_ = embName
}

func (m Model) attentionTensors(l *tensorList, p string, h, q, kv int64) {
	switch {
	case m.Family == "deepseek_v3":
		// modeling_deepseek_v3.py DeepseekV3Attention (MLA): low-rank q and kv
		// with a decoupled rotary part.
		qk := int64(m.QKNopeDim + m.QKRopeDim)
		nh := int64(m.Heads)
		if m.QLoRARank > 0 {
			r := int64(m.QLoRARank)
			l.linear(p+"q_a_proj", "q_proj", h, r, false)
			l.norm(p+"q_a_layernorm", false, r)
			l.linear(p+"q_b_proj", "q_proj", r, nh*qk, false)
		} else {
			l.linear(p+"q_proj", "q_proj", h, nh*qk, false)
		}
		r := int64(m.KVLoRARank)
		l.linear(p+"kv_a_proj_with_mqa", "k_proj", h, r+int64(m.QKRopeDim), false)
		l.norm(p+"kv_a_layernorm", false, r)
		l.linear(p+"kv_b_proj", "v_proj", r, nh*int64(m.QKNopeDim+m.VHeadDim), false)
		l.linear(p+"o_proj", "o_proj", nh*int64(m.VHeadDim), h, false)
	case m.Family == "phi3":
		// modeling_phi3.py: fused qkv_proj.
		l.linear(p+"qkv_proj", "qkv_proj", h, q+2*kv, false, Part{"q_proj", q}, Part{"k_proj", kv}, Part{"v_proj", kv})
		l.linear(p+"o_proj", "o_proj", q, h, false)
	default:
		l.linear(p+"q_proj", "q_proj", h, q, m.Bias.attn())
		l.linear(p+"k_proj", "k_proj", h, kv, m.Bias.attn())
		l.linear(p+"v_proj", "v_proj", h, kv, m.Bias.attn())
		l.linear(p+"o_proj", "o_proj", q, h, m.Bias.out())
	}
}

func (m Model) mlpTensors(l *tensorList, p string, layer int, h int64) {
	gated := func(prefix string, f int64, expert int) {
		start := len(l.ts)
		if m.Family == "phi3" {
			l.linear(prefix+"gate_up_proj", "gate_up_proj", h, 2*f, false, Part{"gate_proj", f}, Part{"up_proj", f})
		} else if m.Gated() {
			l.linear(prefix+"gate_proj", "gate_proj", h, f, m.Bias.mlp())
			l.linear(prefix+"up_proj", "up_proj", h, f, m.Bias.mlp())
		} else {
			l.linear(prefix+"up_proj", "up_proj", h, f, m.Bias.mlp())
		}
		l.linear(prefix+"down_proj", "down_proj", f, h, m.Bias.mlp())
		for i := start; i < len(l.ts); i++ {
			l.ts[i].Expert = expert
		}
	}
	if !m.IsMoELayer(layer) {
		gated(p+"mlp.", int64(m.FFN), -1)
		return
	}
	ef := int64(m.ExpertFFN)
	switch m.Family {
	case "mixtral":
		// modeling_mixtral.py: block_sparse_moe.gate + experts.N.w1/w3/w2.
		l.linear(p+"block_sparse_moe.gate", "router", h, int64(m.Experts), false)
		for e := 0; e < m.Experts; e++ {
			q := fmt.Sprintf("%sblock_sparse_moe.experts.%d.", p, e)
			start := len(l.ts)
			l.linear(q+"w1", "gate_proj", h, ef, false)
			l.linear(q+"w2", "down_proj", ef, h, false)
			l.linear(q+"w3", "up_proj", h, ef, false)
			for i := start; i < len(l.ts); i++ {
				l.ts[i].Expert = e
			}
		}
	default:
		// modeling_deepseek_v3.py: mlp.gate (+ e_score_correction_bias), routed
		// experts, shared_experts as one MLP of width shared·expert_ffn.
		// The router's e_score_correction_bias is a buffer in transformers
		// (DeepseekV3TopkRouter.register_buffer), not a parameter.
		l.linear(p+"mlp.gate", "router", h, int64(m.Experts), false)
		for e := 0; e < m.Experts; e++ {
			gated(fmt.Sprintf("%smlp.experts.%d.", p, e), ef, e)
		}
		if m.SharedExperts > 0 {
			gated(p+"mlp.shared_experts.", ef*int64(m.SharedExperts), -1)
		}
	}
}

// encoderTensors lists BERT (modeling_bert.py) and ViT (modeling_vit.py).
func (m Model) encoderTensors(l *tensorList, classes int) {
	h, f := int64(m.Hidden), int64(m.FFN)
	q := int64(m.Heads) * int64(m.HeadDim)
	// The bare models (BertModel, ViTModel) have no prefix; task heads wrap
	// them as bert. / vit.
	root := ""
	if m.Head != "none" {
		root = m.Family + "."
	}
	layerFmt := root + "encoder.layer.%d."
	selfAttn := "attention.self." // modeling_bert.py BertSelfAttention
	if m.Family == "vit" {
		selfAttn = "attention.attention." // modeling_vit.py ViTSelfAttention
		im := m.Image
		l.add(root+"embeddings.cls_token", "other", 1, 1, h)
		l.add(root+"embeddings.position_embeddings", "position", 1, int64(im.Tokens()), h)
		l.add(root+"embeddings.patch_embeddings.projection.weight", "other", h, int64(im.Channels), int64(im.Patch), int64(im.Patch))
		l.add(root+"embeddings.patch_embeddings.projection.bias", "bias", h)
	} else {
		l.add(root+"embeddings.word_embeddings.weight", "embedding", int64(m.Vocab), h)
		l.add(root+"embeddings.position_embeddings.weight", "position", int64(m.MaxPosition), h)
		if m.TypeVocab > 0 {
			l.add(root+"embeddings.token_type_embeddings.weight", "embedding", int64(m.TypeVocab), h)
		}
		l.norm(root+"embeddings.LayerNorm", true, h)
	}
	for i := 0; i < m.Layers; i++ {
		l.layer = i
		p := fmt.Sprintf(layerFmt, i)
		if m.Family == "vit" {
			l.norm(p+"layernorm_before", true, h)
		}
		l.linear(p+selfAttn+"query", "q_proj", h, q, true)
		l.linear(p+selfAttn+"key", "k_proj", h, q, true)
		l.linear(p+selfAttn+"value", "v_proj", h, q, true)
		l.linear(p+"attention.output.dense", "o_proj", q, h, true)
		if m.Family == "bert" {
			l.norm(p+"attention.output.LayerNorm", true, h)
		} else {
			l.norm(p+"layernorm_after", true, h)
		}
		l.linear(p+"intermediate.dense", "up_proj", h, f, true)
		l.linear(p+"output.dense", "down_proj", f, h, true)
		if m.Family == "bert" {
			l.norm(p+"output.LayerNorm", true, h)
		}
	}
	l.layer = -1
	if m.Family == "vit" {
		l.norm(root+"layernorm", true, h)
	}
	if m.Pooler {
		l.linear(root+"pooler.dense", "other", h, h, true)
	}
	switch {
	case classes > 0:
		l.linear("classifier", "other", h, int64(classes), true)
	case m.Head == "lm" && m.Family == "bert":
		// BertForMaskedLM: transform (dense + LayerNorm), decoder tied to the
		// word embeddings, its own bias.
		l.linear("cls.predictions.transform.dense", "other", h, h, true)
		l.norm("cls.predictions.transform.LayerNorm", true, h)
		if !m.TiedEmbeddings {
			l.linear("cls.predictions.decoder", "lm_head", h, int64(m.Vocab), false)
		}
		l.add("cls.predictions.bias", "bias", int64(m.Vocab))
	}
}
