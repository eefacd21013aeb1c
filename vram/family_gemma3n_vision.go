package vram

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Gemma 3n's vision tower (transformers 5.23.0: the wrapper's
// vision_config, Gemma3nVisionConfig, configuration_gemma3n.py l.335-425,
// model_type gemma3n_vision, which AutoModel builds as TimmWrapperModel,
// models/auto/modeling_auto.py l.202; modeling_timm_wrapper.py
// l.163-175: timm.create_model(architecture, pretrained=False,
// num_classes=0, **model_args), l.59-69), the tower of family gemma3n. Its
// parameters are timm's MobileNetV5Encoder's under timm_model. (timm
// 1.0.31, timm/models/mobilenetv5.py; timm is not a dependency of
// transformers: examples/measure/requirements.txt pins it):
//   - conv_stem (l.493-503): a 3 × 3 stride-2 convolution 3 → 64 channels
//     with a bias (stem_size 64, l.890; stem_bias) and an RmsNorm2d weight;
//   - the blocks (l.505-518), built by timm's EfficientNetBuilder from the
//     architecture's strings (_gen_mobilenet_v5, l.789-886, decoded by
//     _efficientnet_builder.py _decode_block_str l.81-229 and built by
//     _make_block l.369-431): edge residuals (er: a k × k expansion
//     convolution and a 1 × 1 projection, each with an RmsNorm2d;
//     _efficientnet_blocks.py l.678-743), universal inverted residuals
//     (uir: an optional depthwise start convolution of a taps, a 1 × 1
//     expansion by e, an optional depthwise middle convolution of k taps,
//     a 1 × 1 projection, each a ConvNormAct with an RmsNorm2d, and a
//     layer-scale gamma; l.342-467) and mobile multi-query attention (mqa:
//     an RmsNorm2d, a 1 × 1 query projection to h heads of d, one key and
//     one value head of d, each after a depthwise k × k stride-v
//     convolution and an RmsNorm2d when v > 1, the output projection, a
//     layer-scale gamma; l.489-589, timm/layers/attention2d.py l.94-225);
//     no convolution but the stem's has a bias, and the strings ask for no
//     squeeze-excitation;
//   - msfa, the multi-scale fusion adapter (mobilenetv5.py l.50-100,
//     524-535): a uir without depthwise convolutions or layer scale from
//     the last two stages' channels concatenated (640 + 1,280) by 2 to the
//     encoder's 2,048 output channels (num_features, l.522), then an
//     RmsNorm2d.
//
// The tower has no buffers. Its parameters are listed from the decoded
// strings (gemma3nVisionTensors); the model's fields describe it as the
// architecture fixes it: layers the 84 blocks, heads, kv_heads and head_dim
// the last stage's attention (16 query heads of 96 over one key/value
// head), ffn the last stage's expansion (1,280 × 2); hidden is the
// config's hidden_size, the width of the wrapper's embed_vision (the
// encoder's output is 2,048 whatever it says), vocab its vocab_size, the
// rows of embed_vision's table of hard vision tokens. The tower's forward
// is not modelled (loadOnly): its weights load, plans run the text.
func init() {
	register(&family{
		name: gemma3nVisionModelType, source: "timm/models/mobilenetv5.py (timm 1.0.31) through transformers/models/timm_wrapper/modeling_timm_wrapper.py (transformers 5.23.0)",
		kind: encoder, images: true, towerOnly: true, loadOnly: true,
		defaults:   Model{MLP: "gelu_pytorch_tanh", Norm: "rmsnorm", Position: "none", Bias: BiasNone, Head: "none"},
		fromConfig: gemma3nVisionFromConfig,
		toConfig: func(m Model, c map[string]any) {
			c["architecture"], c["model_args"] = gemma3nVisionArch, nil
			c["hidden_size"], c["vocab_size"] = m.Hidden, m.Vocab
		},
		check:   gemma3nVisionCheck,
		tensors: gemma3nVisionTensors,
	})
}

// gemma3nVisionModelType is the tower's model_type, which the wrapper's
// rules name (family_gemma3n_text.go).
const gemma3nVisionModelType = "gemma3n_vision"

// gemma3nVisionArch is the one timm architecture modelled, the class's
// default (configuration_gemma3n.py l.366).
const gemma3nVisionArch = "mobilenetv5_300m_enc"

// mnv5Stages are mobilenetv5_300m_enc's blocks in timm's notation, stage
// by stage (timm/models/mobilenetv5.py l.789-886): 3, 5, 37 and 39 blocks.
var mnv5Stages = [][]string{
	{"er_r1_k3_s2_e4_c128", "er_r1_k3_s1_e4_c128", "er_r1_k3_s1_e4_c128"},
	{"uir_r1_a3_k5_s2_e6_c256", "uir_r1_a5_k0_s1_e4_c256", "uir_r1_a3_k0_s1_e4_c256", "uir_r1_a5_k0_s1_e4_c256", "uir_r1_a3_k0_s1_e4_c256"},
	slices.Concat([]string{"uir_r1_a5_k5_s2_e6_c640"}, mnv5Repeat(7, "uir_r1_a5_k0_s1_e4_c640"), []string{"uir_r1_a0_k0_s1_e1_c640"},
		mnv5Repeat(14, "mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640")),
	slices.Concat([]string{"uir_r1_a5_k5_s2_e6_c1280"}, mnv5Repeat(19, "mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280")),
}

// mnv5Repeat is n copies of the sequence blocks.
func mnv5Repeat(n int, blocks ...string) []string {
	var out []string
	for range n {
		out = append(out, blocks...)
	}
	return out
}

// mnv5Stem and mnv5Features are the stem's output channels and the
// encoder's (mobilenetv5.py l.890, 522).
const (
	mnv5Stem     = 64
	mnv5Features = 2048
)

// mnv5Block is one block as _decode_block_str reads its string: the kind,
// the output channels c, the expansion ratio e, k (er: the expansion
// convolution's taps; uir: the middle depthwise convolution's, 0 for none;
// mqa: the key/value down-sampling convolution's), a (uir: the start
// depthwise convolution's taps, 0 for none), and mqa's heads h, key and
// value width d and key/value stride v (1 when absent).
type mnv5Block struct {
	kind             string
	c, k, a, h, d, v int
	e                float64
	stride, repeats  int
}

// mnv5Decode reads one block string (_decode_block_str l.106-229): the
// kind, then options of a letter and a number each.
func mnv5Decode(s string) (mnv5Block, error) {
	ops := strings.Split(s, "_")
	b := mnv5Block{kind: ops[0], v: 1}
	for _, op := range ops[1:] {
		i := strings.IndexAny(op, "0123456789")
		if i < 1 {
			return b, fmt.Errorf("block %q: option %q", s, op)
		}
		key, val := op[:i], op[i:]
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return b, fmt.Errorf("block %q: option %q", s, op)
		}
		n := int(f)
		switch key {
		case "r":
			b.repeats = n
		case "k":
			b.k = n
		case "s":
			b.stride = n
		case "e":
			b.e = f
		case "c":
			b.c = n
		case "a":
			b.a = n
		case "h":
			b.h = n
		case "d":
			b.d = n
		case "v":
			b.v = n
		default:
			return b, fmt.Errorf("block %q: option %q is not modelled", s, op)
		}
	}
	return b, nil
}

// mnv5Blocks decodes mnv5Stages: each stage's blocks (every string has
// r1: one block each).
func mnv5Blocks() [][]mnv5Block {
	out := make([][]mnv5Block, len(mnv5Stages))
	for i, st := range mnv5Stages {
		for _, s := range st {
			b, err := mnv5Decode(s)
			if err != nil || b.repeats != 1 {
				panic(fmt.Sprintf("mobilenetv5 arch: %q (%v)", s, err))
			}
			out[i] = append(out[i], b)
		}
	}
	return out
}

// makeDivisible is timm's make_divisible with divisor 8 (timm/layers/
// helpers.py l.55-75): v rounded to the nearest multiple of 8, at least 8,
// and not more than 10% below v.
func makeDivisible(v float64) int64 {
	n := max(8, int64(v+4)/8*8)
	if float64(n) < 0.9*v {
		n += 8
	}
	return n
}

// gemma3nVisionFromConfig reads a Gemma3nVisionConfig, each key missing
// taking the class's default (configuration_gemma3n.py l.366-374).
func gemma3nVisionFromConfig(c *hfReader, m *Model) {
	if a := c.optString("architecture", gemma3nVisionArch); a != gemma3nVisionArch && c.err == nil {
		c.fail(fmt.Sprintf("architecture %q: the Gemma 3n vision tower is modelled as timm's %s (the class's default and the released models')", a, gemma3nVisionArch))
	}
	if v, ok := c.c["model_args"]; ok && v != nil {
		if args, isMap := v.(map[string]any); !isMap || len(args) > 0 {
			c.fail(fmt.Sprintf("model_args %v: keyword arguments to timm.create_model change the architecture, which is modelled without them (model_args null)", v))
		}
	}
	m.Hidden, m.Vocab = c.optInt("hidden_size", 2048), c.optInt("vocab_size", 128)
	gemma3nVisionShape(m)
}

// gemma3nVisionShape sets the fields the architecture fixes: the blocks,
// the last stage's attention heads and expansion.
func gemma3nVisionShape(m *Model) {
	stages := mnv5Blocks()
	m.Layers = 0
	for _, st := range stages {
		m.Layers += len(st)
	}
	last := stages[len(stages)-1]
	for _, b := range last {
		switch b.kind {
		case "mqa":
			m.Heads, m.KVHeads, m.HeadDim = b.h, 1, b.d
		case "uir":
			m.FFN = int(makeDivisible(float64(b.c) * b.e))
		}
	}
}

// gemma3nVisionCheck: the fields the architecture fixes are its.
func gemma3nVisionCheck(m Model) error {
	want := Model{Hidden: m.Hidden, Vocab: m.Vocab}
	gemma3nVisionShape(&want)
	switch {
	case m.Layers != want.Layers || m.Heads != want.Heads || m.KVHeads != want.KVHeads || m.HeadDim != want.HeadDim || m.FFN != want.FFN:
		return fmt.Errorf("model: %s's %s has layers %d (blocks), heads %d, kv_heads %d, head_dim %d and ffn %d, fixed by the architecture; got %d, %d, %d, %d, %d",
			m.Family, gemma3nVisionArch, want.Layers, want.Heads, want.KVHeads, want.HeadDim, want.FFN, m.Layers, m.Heads, m.KVHeads, m.HeadDim, m.FFN)
	case m.Image != nil:
		return errors.New("model.image: the Gemma 3n vision tower's image is the processor's 768 × 768, not modelled (its forward is not)")
	case m.Vocab < 1:
		return fmt.Errorf("model.vocab = %d (vision_config.vocab_size) must be ≥ 1: embed_vision's table of hard vision tokens", m.Vocab)
	case m.MLP != "gelu_pytorch_tanh" || m.Norm != "rmsnorm" || m.Bias != BiasNone:
		return errors.New("model: the MobileNetV5 blocks are modelled with tanh-approximated GELUs, RmsNorm2d and no biases but the stem's")
	}
	return nil
}

// gemma3nVisionTensors lists timm's MobileNetV5Encoder parameters under
// its own names (the wrapper adds model.vision_tower.timm_model.): the
// stem, each block by its kind, the fusion adapter. Convolution weights
// are [out, in / groups, taps, taps] (role other: no linear).
func gemma3nVisionTensors(_ Model, l *tensorList) {
	l.add("conv_stem.conv.weight", "other", mnv5Stem, 3, 3, 3)
	l.add("conv_stem.conv.bias", "bias", mnv5Stem)
	l.add("conv_stem.bn.weight", "norm", mnv5Stem)
	in := int64(mnv5Stem)
	var ends []int64
	for s, st := range mnv5Blocks() {
		for i, b := range st {
			p := fmt.Sprintf("blocks.%d.%d.", s, i)
			switch b.kind {
			case "er":
				mnv5EdgeResidual(l, p, b, in)
			case "uir":
				mnv5UIR(l, p, in, int64(b.c), b.a, b.k, b.e, true)
			case "mqa":
				mnv5MQA(l, p, b, in)
			}
			in = int64(b.c)
		}
		ends = append(ends, in)
	}
	// msfa_indices (-2, -1): the last two stages' outputs, concatenated.
	cat := ends[len(ends)-2] + ends[len(ends)-1]
	mnv5UIR(l, "msfa.ffn.", cat, mnv5Features, 0, 0, 2, false)
	l.add("msfa.norm.weight", "norm", mnv5Features)
}

// mnv5EdgeResidual adds an EdgeResidual (l.678-743): conv_exp (k × k,
// groups 1), bn1, conv_pwl (1 × 1), bn2.
func mnv5EdgeResidual(l *tensorList, p string, b mnv5Block, in int64) {
	mid, k, out := makeDivisible(float64(in)*b.e), int64(b.k), int64(b.c)
	l.add(p+"conv_exp.weight", "other", mid, in, k, k)
	l.add(p+"bn1.weight", "norm", mid)
	l.add(p+"conv_pwl.weight", "other", out, mid, 1, 1)
	l.add(p+"bn2.weight", "norm", out)
}

// mnv5UIR adds a UniversalInvertedResidual (l.342-467): dw_start (a taps,
// depthwise) when a > 0, pw_exp to make_divisible(in · e), dw_mid (k taps,
// depthwise) when k > 0, pw_proj, each a conv and its RmsNorm2d (bn), then
// layer_scale's gamma when scaled.
func mnv5UIR(l *tensorList, p string, in, out int64, a, k int, e float64, scaled bool) {
	mid := makeDivisible(float64(in) * e)
	conv := func(name string, o, i, taps int64) {
		l.add(p+name+".conv.weight", "other", o, i, taps, taps)
		l.add(p+name+".bn.weight", "norm", o)
	}
	if a > 0 {
		conv("dw_start", in, 1, int64(a))
	}
	conv("pw_exp", mid, in, 1)
	if k > 0 {
		conv("dw_mid", mid, 1, int64(k))
	}
	conv("pw_proj", out, mid, 1)
	if scaled {
		l.add(p+"layer_scale.gamma", "norm", out)
	}
}

// mnv5MQA adds a MobileAttention with multi-query attention (l.489-589,
// attention2d.py l.149-225): norm, the query projection to h · d, key and
// value (each: with v > 1 a depthwise k × k down_conv and its norm, then a
// projection to d), the output projection, layer_scale's gamma.
func mnv5MQA(l *tensorList, p string, b mnv5Block, in int64) {
	hd, d, k := int64(b.h)*int64(b.d), int64(b.d), int64(b.k)
	l.add(p+"norm.weight", "norm", in)
	l.add(p+"attn.query.proj.weight", "other", hd, in, 1, 1)
	for _, kv := range []string{"key", "value"} {
		if b.v > 1 {
			l.add(p+"attn."+kv+".down_conv.weight", "other", in, 1, k, k)
			l.add(p+"attn."+kv+".norm.weight", "norm", in)
		}
		l.add(p+"attn."+kv+".proj.weight", "other", d, in, 1, 1)
	}
	l.add(p+"attn.output.proj.weight", "other", int64(b.c), hd, 1, 1)
	l.add(p+"layer_scale.gamma", "norm", int64(b.c))
}
