package vram

import (
	"sync"
	"sync/atomic"
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
	// Stacked is the number of routed experts whose weights this one tensor
	// holds along its first dimension (Llama 4 and gpt-oss keep
	// experts.gate_up_proj as [experts, hidden, 2·ffn]); 0 otherwise.
	Stacked int `json:"stacked,omitempty"`
	// OutIn: a stacked tensor is laid out [experts, out, in], each expert
	// an nn.Linear weight (transformers 5's fused experts:
	// experts.gate_up_proj [experts, 2·ffn, hidden]), not [experts, in,
	// out].
	OutIn bool `json:"out_in,omitempty"`
	// DType is set when the tensor was read from a checkpoint.
	DType DType `json:"dtype,omitempty"`
	// Bytes is the stored size when read from a checkpoint.
	Bytes Bytes `json:"bytes,omitempty"`
	// head: the tensor belongs to the head side (final norm, output layer,
	// task head), which pipeline parallelism places on the last stage.
	head bool
	// part is a vision-language model's part the tensor belongs to
	// (textPart, towerPart, …; see vision.go).
	part uint8
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
// point to, so that a model changed in place, through a pointer it shares
// with the model its tensors were cached under, is a new key.
type modelKey struct {
	m       Model // every pointer field nil
	image   Image
	release Release
	// mixers are the SSM, ShortConv, DeltaNet, Mamba, KDA and Lightning
	// settings, the Compressed and BlockSparse layouts and an audio
	// tower's Conformer written out (planKey), "" when the model has none.
	mixers string
}

// mixerSettings are a model's recurrent mixers and block-sparse layout,
// for modelKey.mixers.
type mixerSettings struct {
	ssm       *SSM
	shortConv *ShortConv
	deltaNet  *DeltaNet
	mamba     *Mamba
	kda       *KDA
	// compressed is no mixer but, like them, a pointer whose lists key
	// the tensors.
	compressed *Compressed
	lightning  *Lightning
	sparse     *BlockSparse
	conformer  *Conformer
	codec      *Codec
}

func (m Model) key() modelKey {
	k := modelKey{m: m}
	k.m.Origin, k.m.Release, k.m.Image, k.m.Vision, k.m.Audio = nil, nil, nil, nil, nil // Origin changes no tensor; Vision, Audio: visionKey
	k.m.Speech = nil                                                                    // visionKey
	k.m.SSM, k.m.ShortConv, k.m.DeltaNet, k.m.Mamba, k.m.KDA, k.m.Compressed, k.m.Lightning, k.m.BlockSparse, k.m.Conformer, k.m.Codec = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
	if m.Release != nil {
		k.release = *m.Release
	}
	if m.Image != nil {
		k.image = *m.Image
	}
	if m.recurrent() || m.Compressed != nil || m.BlockSparse != nil || m.Conformer != nil || m.Codec != nil {
		k.mixers = m.mixersKey()
	}
	return k
}

// mixersKey writes out m's recurrent mixers' settings (out of key, whose
// models mostly have none: the settings escape to the heap).
func (m Model) mixersKey() string {
	b, _ := planKey(nil, &mixerSettings{m.SSM, m.ShortConv, m.DeltaNet, m.Mamba, m.KDA, m.Compressed, m.Lightning, m.BlockSparse, m.Conformer, m.Codec})
	return string(b)
}

// visionKey is a vision-language model by value (a larger key, kept apart
// so that the common one stays small to hash).
type visionKey struct {
	text   modelKey
	vision Vision // its tower's zero value: the tower is below
	tower  modelKey
	// audio is the audio tower's key (Model.Audio), when hasAudio.
	audio    modelKey
	hasAudio bool
	// speech are the speech generator's stages' keys (Model.Speech), when
	// hasSpeech.
	speech    [3]modelKey
	hasSpeech bool
}

func (m Model) visionKey() visionKey {
	v := *m.Vision
	k := visionKey{text: m.key(), tower: v.Tower.key()}
	v.Tower = Model{}
	k.vision = v
	if m.Audio != nil {
		k.audio, k.hasAudio = m.Audio.Tower.key(), true
	}
	if s := m.Speech; s != nil {
		k.speech, k.hasSpeech = [3]modelKey{s.Talker.key(), s.Predictor.key(), s.Vocoder.key()}, true
	}
	return k
}

type tensorSet struct {
	ts     []Tensor
	params int64
	// byLayer[l] indexes block l's tensors; outside indexes the rest.
	byLayer [][]int
	outside []int
	// bufs are the model's buffers (Model.Buffers); callers must not
	// modify them.
	bufs []Buffer
}

// tensors is Tensors without the copy; callers must not modify the result.
func (m Model) tensors() []Tensor { return m.tensorSet().ts }

func (m Model) tensorSet() tensorSet {
	m = m.Normalize()
	if m.ranges() != nil || m.Layers < 0 {
		return tensorSet{} // out of range: Validate says which field
	}
	if m.Vision != nil {
		return cachedTensors(m.visionKey(), m, &lastVision)
	}
	return cachedTensors(m.key(), m, &lastModel)
}

// lastTensors is the tensor set a cache lookup found last, under its key:
// estimates of one model (a sweep, a solver, a report) find it again by
// comparing keys instead of hashing one (BenchmarkParamCount: 0.23 µs
// against 0.85).
type lastTensors[K comparable] struct {
	key K
	ts  tensorSet
}

var (
	lastModel  atomic.Pointer[lastTensors[modelKey]]
	lastVision atomic.Pointer[lastTensors[visionKey]]
)

// clearTensorCache empties the cache and its last entries.
func clearTensorCache() {
	tensorCache.Clear()
	lastModel.Store(nil)
	lastVision.Store(nil)
}

// cachedTensors is m's tensor set from the cache under key, built and
// stored on a miss.
func cachedTensors[K comparable](key K, m Model, last *atomic.Pointer[lastTensors[K]]) tensorSet {
	if e := last.Load(); e != nil && e.key == key {
		return e.ts
	}
	if ts, ok := tensorCache.Load(key); ok {
		last.Store(&lastTensors[K]{key: key, ts: ts.(tensorSet)})
		return ts.(tensorSet)
	}
	ts := tensorSet{ts: m.buildTensors(), byLayer: make([][]int, m.Layers), bufs: m.Buffers()}
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
	last.Store(&lastTensors[K]{key: key, ts: ts})
	return ts
}

// buildTensors lists the model's tensors as its family declares them.
func (m Model) buildTensors() []Tensor {
	f := lookupFamily(m.Family)
	if f == nil || f.tensors == nil {
		return nil
	}
	l := &tensorList{layer: -1}
	if m.Vision != nil {
		if w := lookupFamily(m.Vision.Family); w != nil && w.tensors != nil {
			w.tensors(m, l)
			m.audioTensors(l)  // audio.go: nothing without Model.Audio
			m.speechTensors(l) // speech.go: nothing without Model.Speech
		}
		return l.ts
	}
	f.tensors(m, l)
	return l.ts
}
