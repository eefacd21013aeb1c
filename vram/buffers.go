package vram

import "fmt"

// Buffer is a module buffer: state a model keeps on the device that is not a
// parameter (causal masks, position ids, rotary frequencies). It has no
// gradient and no optimizer state, and data parallelism never shards it.
type Buffer struct {
	Name  string  `json:"name"`
	Shape []int64 `json:"shape"`
	DType DType   `json:"dtype"`
	Layer int     `json:"layer"` // transformer block index, -1 outside the blocks
}

// Bytes is the buffer's size.
func (b Buffer) Bytes() Bytes {
	n := int64(1)
	for _, d := range b.Shape {
		n = mulI64(n, d)
	}
	return b.DType.Size(n)
}

// Buffers lists the model's buffers as transformers registers them
// (register_buffer, persistent or not), with their state-dict names.
func (m Model) Buffers() []Buffer {
	m = m.Normalize()
	if m.ranges() != nil {
		return nil // out of range: Validate says which field
	}
	p := int64(m.MaxPosition)
	var bs []Buffer
	add := func(name string, layer int, d DType, shape ...int64) {
		bs = append(bs, Buffer{Name: name, Shape: shape, DType: d, Layer: layer})
	}
	switch m.Family {
	case "gpt2":
		// modeling_gpt2.py GPT2Attention: the causal mask "bias" (bool,
		// 1×1×n_positions×n_positions) and "masked_bias", in every block.
		for i := 0; i < m.Layers; i++ {
			add(fmt.Sprintf("transformer.h.%d.attn.bias", i), i, Bool, 1, 1, p, p)
			add(fmt.Sprintf("transformer.h.%d.attn.masked_bias", i), i, FP32)
		}
	case "gpt_bigcode":
		// modeling_gpt_bigcode.py GPTBigCodeModel: one causal mask for all blocks.
		add("transformer.bias", -1, Bool, p, p)
	case "bert":
		// modeling_bert.py BertEmbeddings: position_ids and token_type_ids.
		pre := ""
		if c, _ := m.headClasses(); c > 0 || m.Head == "lm" {
			pre = "bert."
		}
		add(pre+"embeddings.position_ids", -1, INT64, 1, p)
		add(pre+"embeddings.token_type_ids", -1, INT64, 1, p)
	}
	if m.Position == "rope" && m.Family != "gptj" {
		// The rotary embedding's inv_freq (one per rotated pair of dims).
		pre := "model."
		if m.Family == "gpt_neox" {
			pre = "gpt_neox."
		}
		rot := int64(float64(m.HeadDim) * m.RotaryPct)
		if m.Family == "deepseek_v3" {
			rot = int64(m.QKRopeDim)
		}
		add(pre+"rotary_emb.inv_freq", -1, FP32, rot/2)
	}
	if m.Family == "deepseek_v3" {
		// DeepseekV3TopkRouter registers e_score_correction_bias as a buffer.
		for i := m.DenseLayers; i < m.Layers; i++ {
			add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
		}
	}
	return bs
}
