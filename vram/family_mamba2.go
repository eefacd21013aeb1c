package vram

import "fmt"

// Mamba-2 (transformers/models/mamba2/modeling_mamba2.py): a stack of
// Mamba2Block — an RMSNorm, the Mamba-2 mixer (model.ssm; mamba.go builds
// its activations as the torch path runs it), a residual add in fp32
// (residual_in_fp32) — under backbone.*, without attention or positions.
// Heads, HeadDim and FFN repeat the mixer's heads, head width and inner
// width (expand · hidden). The mixer keeps a fixed state per sequence
// instead of a KV cache. A key config.json leaves out takes the class's
// default (configuration_mamba2.py:62-88, transformers 5.23.0).
func init() {
	register(&family{
		name: mamba2ModelType, source: "transformers/models/mamba2/modeling_mamba2.py",
		defaults: Model{MLP: "silu", Norm: "rmsnorm", Position: "none", Bias: BiasNone},
		ssm:      true,
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden, m.Vocab = c.optInt("num_hidden_layers", 64), c.optInt("hidden_size", 4096), c.optInt("vocab_size", 32768)
			s := SSM{Heads: c.optInt("num_heads", 128), HeadDim: c.optInt("head_dim", 64), State: c.optInt("state_size", 128),
				Groups: c.optInt("n_groups", 8), ConvKernel: c.optInt("conv_kernel", 4), Chunk: c.optInt("chunk_size", 256),
				NoConvBias: !c.optBool("use_conv_bias", true), ProjBias: c.optBool("use_bias", false)}
			if expand := c.optFloat("expand", 2); c.err == nil && int64(expand*float64(m.Hidden)) != s.inner() {
				c.fail(fmt.Sprintf("hidden_size · expand = %v must equal num_heads · head_dim = %d (Mamba2Config's rule)", expand*float64(m.Hidden), s.inner()))
			}
			if !c.optBool("residual_in_fp32", true) && c.err == nil {
				c.fail("residual_in_fp32 false: a residual stream in the weights' dtype is not modelled")
			}
			m.SSM, m.Heads, m.KVHeads, m.HeadDim, m.FFN = &s, s.Heads, s.Heads, s.HeadDim, int(s.inner())
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
		},
		toConfig: func(m Model, c map[string]any) {
			s := *m.SSM
			c["num_hidden_layers"], c["hidden_size"], c["vocab_size"] = m.Layers, m.Hidden, m.Vocab
			c["num_heads"], c["head_dim"], c["state_size"], c["n_groups"] = s.Heads, s.HeadDim, s.State, s.Groups
			c["expand"], c["conv_kernel"], c["chunk_size"] = float64(s.inner())/float64(m.Hidden), s.ConvKernel, s.Chunk
			c["use_conv_bias"], c["use_bias"], c["tie_word_embeddings"] = !s.NoConvBias, s.ProjBias, m.TiedEmbeddings
			c["residual_in_fp32"] = true
			if m.Vocab <= 2 {
				c["pad_token_id"] = nil
			}
		},
		check: func(m Model) error {
			s := m.SSM
			switch {
			case s == nil:
				return fmt.Errorf("model: mamba2 needs model.ssm (heads, head_dim, state)")
			case m.Heads != s.Heads || m.HeadDim != s.HeadDim || int64(m.FFN) != s.inner():
				return fmt.Errorf("model: mamba2's heads, head_dim and ffn repeat ssm.heads, ssm.head_dim and their product (%d, %d, %d)", s.Heads, s.HeadDim, s.inner())
			case len(s.Attention) > 0:
				return fmt.Errorf("model.ssm.attention_layers: every mamba2 layer is a mixer; hybrids with attention layers are families bamba and granitemoehybrid")
			case m.Bias != BiasNone:
				return fmt.Errorf("model.bias %q: mamba2's projections' biases are model.ssm.proj_bias (use_bias)", m.Bias)
			}
			return nil
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			l.add("backbone.embeddings.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("backbone.layers.%d.", i)
				l.norm(p+"norm", false, d.h)
				mamba2Mixer(m, l, p+"mixer.")
			}
			l.headSide()
			l.norm("backbone.norm_f", false, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		block: mambaBlock,
		// Mamba2Model keeps no cache in training: use_cache defaults to
		// config.use_cache only when not training (5.23
		// modeling_mamba2.py:783; 4.57 l.871).
		// It returns self.lm_head(...).float() (5.23 l.919; 4.57
		// l.1041, the same).
		recipe: func(Model, libVersion) recipe { return recipe{noTrainingCache: true, logitsFloat: true} },
		// Mamba-Codestral-7B: 64 layers 4,096 wide, 128 heads of 64, a
		// 128-number state, 8 groups (Mamba2Config's defaults are its
		// shape; mistralai/Mamba-Codestral-7B-v0.1's config.json).
		presets: map[string]Preset{
			"mamba-codestral-7b": {Model{Name: "mistralai/Mamba-Codestral-7B-v0.1", Layers: 64, Hidden: 4096, Heads: 128, KVHeads: 128, HeadDim: 64, FFN: 8192, Vocab: 32768,
				SSM: &SSM{Heads: 128, HeadDim: 64, State: 128, Groups: 8, ConvKernel: 4, Chunk: 256}}, hf("mistralai/Mamba-Codestral-7B-v0.1")},
		},
	})
}

// mamba2Mixer adds a Mamba2Mixer's parameters under p in named_parameters
// order: its own (dt_bias, A_log, D), then conv1d, in_proj, the gated
// norm (none with ssm.norm "none": Falcon-H1 without mamba_rms_norm) and
// out_proj.
func mamba2Mixer(m Model, l *tensorList, p string) {
	s := *m.SSM
	h, heads := int64(m.Hidden), int64(s.Heads)
	l.add(p+"dt_bias", "other", heads)
	l.add(p+"A_log", "other", heads)
	l.add(p+"D", "other", heads)
	l.add(p+"conv1d.weight", "other", s.convDim(), 1, int64(s.ConvKernel))
	if !s.NoConvBias {
		l.add(p+"conv1d.bias", "bias", s.convDim())
	}
	l.linear(p+"in_proj", "in_proj", h, s.inner()+s.convDim()+heads, s.ProjBias)
	if s.Norm != "none" {
		l.norm(p+"norm", false, s.inner())
	}
	l.linear(p+"out_proj", "out_proj", s.inner(), h, s.ProjBias)
}

// mamba2ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const mamba2ModelType = "mamba2"
