package vram

// DINOv2 with registers (transformers/models/dinov2_with_registers/
// modeling_dinov2_with_registers.py): DINOv2 with num_register_tokens
// learned tokens between the class token and the patches. A key
// config.json leaves out takes the class's default
// (configuration_dinov2_with_registers.py:64-84, transformers 5.23.0):
// Dinov2's, but with patches of 16 (l.74), not 14.
func init() {
	register(&family{
		name: "dinov2_with_registers", source: "transformers/models/dinov2_with_registers/modeling_dinov2_with_registers.py", kind: encoder, images: true,
		defaults:   Model{MLP: "gelu", Norm: "layernorm", Position: "learned", Bias: BiasAll, Head: "none"},
		fromConfig: func(c *hfReader, m *Model) { dinov2Config(c, m, c.optInt("num_register_tokens", 4), 16) },
		toConfig:   func(m Model, c map[string]any) { writeDinov2Config(m, c) },
		check:      dinov2Check,
		recipe:     func(Model, libVersion) recipe { return recipe{layerScale: true, fusedGateUp: true} },
		tensors:    func(m Model, l *tensorList) { dinov2Tensors(m, l, true) },
		presets: map[string]Preset{
			"dinov2-with-registers-large": {Model{Name: "facebook/dinov2-with-registers-large", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096,
				Image: &Image{Size: 518, Patch: 14, Channels: 3, ClassToken: true, Registers: 4}}, hf("facebook/dinov2-with-registers-large")},
		},
	})
}
