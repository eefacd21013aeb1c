package vram

import (
	"errors"
	"fmt"
)

// Gemma 4's vision encoder (transformers 5.23.0
// models/gemma4/modeling_gemma4.py, Gemma4VisionModel l.2055-2120; its
// config is the wrapper's vision_config, Gemma4VisionConfig,
// configuration_gemma4.py l.268-317, model_type gemma4_vision), the tower
// of family gemma4:
//   - a patch embedder (l.584-626): each 16 × 16 × 3 patch, scaled to
//     [-1, 1], through a bias-free linear, plus the sum of two learned
//     position tables (x and y) of position_embedding_size rows each, one
//     [2, rows, hidden] parameter;
//   - blocks as the language model's (l.971-1012): four RMSNorms around a
//     bidirectional attention with q_norm and k_norm per head and a
//     weightless v_norm (l.902-968) and a gelu_pytorch_tanh-gated MLP
//     (l.696-709); every linear is a bias-free Gemma4ClippableLinear
//     (l.175-201: the weight under .linear, and with use_clipped_linears
//     four scalar bounds as buffers);
//   - a 2-D rotary embedding of head_dim / 4 frequencies (l.712-747);
//   - a pooler (l.629-693) averaging each pooling_kernel_size² patches into
//     a soft token, scaled by sqrt(hidden) in fp32, with standardize a
//     stored std_bias and std_scale applied (l.2070-2072, 2114-2116).
//
// The processor (image_processing_gemma4.py) resizes an image to at most
// max_soft_tokens (280) · pooling_kernel_size² patches and pads every
// image to that many; the engine's image is the square one a 280-token
// budget gives, 16 × 16 soft tokens (768 pixels at patch 16 and pooling 3,
// 256 tokens). Where transformers runs the tower (a training step) it runs
// over the padding patches too (gemma4Padding: 2,520 at the default
// budget) under a padding mask, and its pooler strips the padding soft
// tokens (gemma4Project).
func init() {
	register(&family{
		name: "gemma4_vision", source: "transformers/models/gemma4/modeling_gemma4.py (transformers 5.23.0)", kind: encoder, images: true, towerOnly: true,
		// Not servingOnly itself: the wrapper's language model refuses
		// training, and a serving engine's profile runs the tower as a
		// plan of its own.
		defaults:   Model{MLP: "geglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Head: "none", NormPosition: "sandwich", QKNorm: "head"},
		fromConfig: gemma4VisionFromConfig,
		toConfig: func(m Model, c map[string]any) {
			im := m.Image
			c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"] = m.Layers, m.Hidden, m.FFN
			c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"] = m.Heads, m.KVHeads, m.HeadDim
			c["patch_size"], c["pooling_kernel_size"], c["position_embedding_size"] = im.Patch, im.Merge, im.PositionTable
			c["standardize"], c["use_clipped_linears"], c["hidden_activation"] = im.Standardize, im.ClippedLinears, "gelu_pytorch_tanh"
			// Not a key transformers reads: the engine writes the plan's
			// image size there and reads it back.
			c["image_size"] = im.Size
		},
		check:      gemma4VisionCheck,
		tensors:    gemma4VisionTensors,
		buffers:    gemma4VisionBuffers,
		recipe:     gemma4VisionRecipe,
		towerEmbed: gemma4VisionEmbed,
		// Gemma4VisionModel has no embed_tokens, embeddings, model or
		// language_model and is its own base_model: get_input_embeddings
		// raises NotImplementedError (5.23.0 modeling_utils.py:969-1006;
		// modeling_gemma4.py l.2055-2071), so transformers 5 hooks no input
		// embeddings in it (tower_records5.go).
		unhookedTower: true,
		towerPadding:  gemma4Padding,
	})
}

// gemma4VisionRecipe is the tower's recipe: its norms multiply by their
// weight in fp32; v goes through a weightless RMSNorm (vNorm,
// transformers 5.23.0 models/gemma4/modeling_gemma4.py:921, 947-948);
// eager attention's q and k live until the attention function returns
// (eagerQKHeld); with padding patches (Image.padTo) its attention reads
// the padding mask (towerPadMask).
func gemma4VisionRecipe(m Model, _ libVersion) recipe {
	im := m.Image
	return recipe{normWeightFP32: true, eagerQKHeld: true, vNorm: true, towerPadMask: im != nil && im.padTo > im.Size/max(1, im.Patch)*(im.Size/max(1, im.Patch))}
}

// gemma4SoftTokenBudgets are the budgets of soft tokens an image
// Gemma4ImageProcessor takes (max_soft_tokens, transformers 5.23.0
// models/gemma4/image_processing_gemma4.py:30).
var gemma4SoftTokenBudgets = []int{70, 140, 280, 560, 1120}

// gemma4Budget is the processor's budget for an image: the smallest that
// holds its soft tokens (a square image of that many, which the
// aspect-ratio-preserving resize keeps at its size, l.33-87), or 0 where
// none does.
func gemma4Budget(im Image) int {
	k := max(1, im.Merge)
	soft := (im.Size / max(1, im.Patch)) * (im.Size / max(1, im.Patch)) / (k * k)
	for _, b := range gemma4SoftTokenBudgets {
		if b >= soft {
			return b
		}
	}
	return 0
}

// gemma4Padding is the patches the processor pads each image to: its
// budget times pooling_kernel_size² (max_patches, zero rows at position
// -1, pad_along_first_dim, image_processing_gemma4.py l.97-111, 216-263).
func gemma4Padding(im Image) int {
	k := max(1, im.Merge)
	return gemma4Budget(im) * k * k
}

// gemma4SoftTokensSide is the side, in soft tokens, of the largest square
// image the processor's default budget of 280 soft tokens
// (Gemma4ImageProcessor.max_soft_tokens) holds.
const gemma4SoftTokensSide = 16

// gemma4VisionFromConfig reads a Gemma4VisionConfig, each key missing
// taking the class's default (configuration_gemma4.py l.300-316).
func gemma4VisionFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden, m.FFN = c.optInt("num_hidden_layers", 16), c.optInt("hidden_size", 768), c.optInt("intermediate_size", 3072)
	m.Heads, m.KVHeads = c.optInt("num_attention_heads", 12), c.optInt("num_key_value_heads", 12)
	m.HeadDim = c.optInt("head_dim", 64)
	if act := c.optString("hidden_activation", "gelu_pytorch_tanh"); act != "gelu_pytorch_tanh" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_activation %q: the Gemma 4 vision MLP is modelled with gelu_pytorch_tanh", act))
	}
	patch, pool := c.optInt("patch_size", 16), c.optInt("pooling_kernel_size", 3)
	m.Image = &Image{Size: c.optInt("image_size", gemma4SoftTokensSide*patch*pool), Patch: patch, Channels: 3, Merge: pool,
		PositionTable: c.optInt("position_embedding_size", 10240),
		Standardize:   c.optBool("standardize", false), ClippedLinears: c.optBool("use_clipped_linears", false)}
}

// gemma4VisionCheck is the tower's rules.
func gemma4VisionCheck(m Model) error {
	im := m.Image
	if im == nil {
		return errors.New("model.image (size, patch, merge, position_table) is required for a Gemma 4 vision tower")
	}
	switch {
	case im.ClassToken || im.Registers != 0 || im.Window != 0 || im.Deepstack != "" || im.TemporalPatch > 1 || im.AdapterDim != 0:
		return errors.New("model.image: the Gemma 4 vision encoder has no class token, registers, windows, frames, deepstack or adapter")
	case im.Channels != 3:
		return fmt.Errorf("model.image.channels = %d: the patch embedder reads 3 channels (input_proj is 3 · patch² wide)", im.Channels)
	case im.Merge < 1 || im.Size%(im.Patch*im.Merge) != 0:
		return fmt.Errorf("model.image.size = %d must be a multiple of patch × merge (pooling_kernel_size) = %d × %d: the processor resizes to one", im.Size, im.Patch, im.Merge)
	case gemma4Budget(*im) == 0:
		return fmt.Errorf("model.image.size = %d: %d soft tokens an image, more than the processor's largest budget (max_soft_tokens %d)", im.Size, (im.Size/im.Patch)*(im.Size/im.Patch)/(im.Merge*im.Merge), gemma4SoftTokenBudgets[len(gemma4SoftTokenBudgets)-1])
	case im.PositionTable < im.Size/im.Patch:
		return fmt.Errorf("model.image.position_table = %d (position_embedding_size) must hold the %d patch positions of a side", im.PositionTable, im.Size/im.Patch)
	case m.MLP != "geglu" || m.Norm != "rmsnorm" || m.NormPosition != "sandwich" || m.QKNorm != "head" || m.Position != "rope" || m.Bias != BiasNone:
		return errors.New("model: the Gemma 4 vision blocks are sandwich RMSNorms, per-head q/k norms, a rotary embedding and a geglu MLP without biases")
	}
	return nil
}

// gemma4VisionTensors lists the tower's parameters under its own names
// (the wrapper adds model.vision_tower.): the position table and the
// patch projection (l.592-593), each block's attention and MLP linears
// (each's weight under .linear), q_norm, k_norm and four norms.
func gemma4VisionTensors(m Model, l *tensorList) {
	im := m.Image
	if im == nil {
		im = &Image{} // Validate reports it missing
	}
	h, f, hd := int64(m.Hidden), int64(m.FFN), int64(m.HeadDim)
	q, kv := int64(m.Heads)*hd, int64(m.KVHeads)*hd
	l.add("patch_embedder.position_embedding_table", "position", 2, int64(im.PositionTable), h)
	l.linear("patch_embedder.input_proj", "other", int64(3*im.Patch*im.Patch), h, false)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("encoder.layers.%d.", i)
		l.linear(p+"self_attn.q_proj.linear", "q_proj", h, q, false)
		l.linear(p+"self_attn.k_proj.linear", "k_proj", h, kv, false)
		l.linear(p+"self_attn.v_proj.linear", "v_proj", h, kv, false)
		l.linear(p+"self_attn.o_proj.linear", "o_proj", q, h, false)
		l.add(p+"self_attn.q_norm.weight", "norm", hd)
		l.add(p+"self_attn.k_norm.weight", "norm", hd)
		l.linear(p+"mlp.gate_proj.linear", "gate_proj", h, f, false)
		l.linear(p+"mlp.up_proj.linear", "up_proj", h, f, false)
		l.linear(p+"mlp.down_proj.linear", "down_proj", f, h, false)
		for _, n := range []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"} {
			l.norm(p+n, false, h)
		}
	}
}

// gemma4VisionBuffers lists the tower's buffers: std_bias and std_scale
// with standardize (persistent, fp32), the rotary embedding's two (one per
// other dimension of half a head, l.735-744), and with use_clipped_linears
// each linear's four scalar bounds (persistent).
func gemma4VisionBuffers(m Model, b *bufferList) {
	im := m.Image
	if im == nil {
		return
	}
	h := int64(m.Hidden)
	if im.Standardize {
		b.add("std_bias", -1, FP32, h)
		b.add("std_scale", -1, FP32, h)
	}
	n := int64(m.HeadDim/2+1) / 2
	b.add("encoder.rotary_emb.inv_freq", -1, FP32, n)
	b.add("encoder.rotary_emb.original_inv_freq", -1, FP32, n)
	if !im.ClippedLinears {
		return
	}
	for i := 0; i < m.Layers; i++ {
		for _, lin := range []string{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} {
			for _, bound := range []string{"input_min", "input_max", "output_min", "output_max"} {
				b.add(fmt.Sprintf("encoder.layers.%d.%s.%s", i, lin, bound), i, FP32)
			}
		}
	}
}

// gemma4VisionEmbed is Gemma4VisionPatchEmbedder.forward as a tower
// (l.614-626) for n images: the fp32 pixels of each patch scaled to [-1,
// 1] and cast to the weights' dtype, input_proj, the two position lookups
// summed and zeroed at padding (torch.where), the sum; and the encoder's
// rotary cos and sin (l.1037), which every block reads, with padding
// patches (Image.padTo) beside them the padding mask
// create_bidirectional_mask builds from ~padding_positions (l.1031-1035,
// 2090-2096): [images, 1, patches, patches], for eager attention additive
// in the hidden states' dtype, for SDPA bool.
func gemma4VisionEmbed(b *actBuilder, p blockPlan, m Model, n int64, grad bool) (*actT, []*actT) {
	im := *m.Image
	h, hd := int64(m.Hidden), int64(m.HeadDim)
	row := int64(3 * im.Patch * im.Patch)
	b.tokens = n * int64(im.Tokens())
	px := b.batchInput("pixel_values", b.size(row, FP32), FP32)
	pos := b.batchInput("pixel_position_ids", b.size(2, INT64), INT64)
	px = b.op("vision.pixel_values.sub", b.size(row, FP32), FP32, list(px))
	px = b.op("vision.pixel_values.mul", b.size(row, FP32), FP32, list(px))
	if p.baseDType != FP32 {
		px = b.op("vision.pixel_values.to", b.size(row, p.baseDType), p.baseDType, list(px))
	}
	x := b.linear(p, "vision.patch_embedder.input_proj", "other", px, row, h)
	w := p.baseDType
	var saved []*actT
	if grad {
		saved = append(saved, pos) // embedding_dense_backward reads the indices
	}
	xe := b.op("vision.position_embedding.x", b.size(h, w), w, list(pos), saved...)
	ye := b.op("vision.position_embedding.y", b.size(h, w), w, list(pos))
	pe := b.op("vision.position_embedding.add", b.size(h, w), w, list(xe, ye))
	pe = b.op("vision.position_embedding.where", b.size(h, w), w, list(pe))
	d := promote(x.dtype, w)
	x = b.op("vision.patch_embedder.add", b.size(h, d), d, list(x, pe))
	cos := b.op("vision.rotary.cos", b.size(hd, p.resid), p.resid, list(pos))
	sin := b.op("vision.rotary.sin", b.size(hd, p.resid), p.resid, list(pos))
	if !p.rec.towerPadMask {
		return x, []*actT{cos, sin}
	}
	md := x.dtype
	if b.r.Attention != "eager" {
		md = Bool
	}
	mask := b.op("vision.padding_mask", md.Size(mulI64(b.tokens, int64(im.Tokens()))), md, list(pos))
	return x, []*actT{cos, sin, mask}
}

// gemma4Tower is the released 31B's and 26B-A4B's vision_config: 27
// blocks 1,152 wide, 16 heads of 72, an MLP of 4,304, patches of 16
// pooled 3 × 3, a 10,240-row position table, standardized; at the
// engine's 768-pixel image.
func gemma4Tower() Model {
	return Model{Family: "gemma4_vision", Layers: 27, Hidden: 1152, Heads: 16, KVHeads: 16, HeadDim: 72, FFN: 4304,
		Image: &Image{Size: gemma4SoftTokensSide * 16 * 3, Patch: 16, Channels: 3, Merge: 3, PositionTable: 10240, Standardize: true}}
}
