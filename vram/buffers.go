package vram

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
	f := lookupFamily(m.Family)
	if f == nil {
		return nil
	}
	var b bufferList
	if m.Vision != nil {
		// The tower's first, then the language model's under the
		// wrapper's names.
		m.visionBuffers(&b)
		n := len(b.bs)
		text := m
		text.Vision = nil
		if w := m.visionWrapperOf(); w != nil && w.textBuffers != nil {
			w.textBuffers(text, &b) // the wrapper's text model's own, first
		}
		if f.buffers != nil {
			f.buffers(text, &b)
		}
		for i := n; i < len(b.bs); i++ {
			b.bs[i].Name = m.textBufferName(b.bs[i].Name)
		}
		m.audioBuffers(&b)  // audio.go: the audio tower's
		m.speechBuffers(&b) // speech.go: the speech generator's last
		return b.bs
	}
	if f.buffers != nil {
		f.buffers(m, &b)
	}
	return b.bs
}
