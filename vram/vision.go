package vram

import (
	"fmt"
	"strings"
)

// Vision-language models: a language model (a decoder family) with a vision
// tower (an image encoder family), a projector, and a wrapper family (LLaVA)
// that puts the projected image features in the token sequence. The wrapper
// declares its names, its projector and its defaults (visionWrapper); the
// tower and the language model are their own families' declarations; this
// file composes them: the tensor inventory (tower, projector, language
// model, in the wrapper's state-dict order), the checks, and the image side
// of the embedding, which runs the tower's blocks op by op.

// visionWrapper is what a vision-language wrapper family declares.
type visionWrapper struct {
	// textPrefix replaces the language model's leading "model." in its
	// tensor names; headPrefix goes before the others (lm_head: Llama 4's
	// language_model.lm_head), towerPrefix before the tower's.
	textPrefix, headPrefix, towerPrefix string
	// noCat: the projected features go into the embeddings as they are
	// (Llama 4), not concatenated image by image first (LLaVA's torch.cat).
	noCat bool
	// featureLayer is Vision.FeatureLayer's default.
	featureLayer int
	// projector lists the projector's tensors (hv: the tower's width, h:
	// the language model's).
	projector func(v Vision, l *tensorList, hv, h int64)
	// project builds the projector's ops on the selected image features x
	// (b.tokens image tokens hv wide); it returns features h wide.
	project func(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT
	// rename maps a tensor name of a checkpoint saved by an older release
	// to today's (the model class's _checkpoint_conversion_mapping).
	rename func(name string) string
	// hiddenStates: the wrapper asks the tower for every hidden state
	// (output_hidden_states=True), all alive until the features are
	// chosen; otherwise the features come from the tower's last output.
	hiddenStates bool
	// returnsFeatures: the model's output holds the image features
	// (LLaVA's image_hidden_states).
	returnsFeatures bool
	// textRecipe adjusts the language model's recipe where the wrapper's
	// text model computes differently from its family's.
	textRecipe func(*recipe, libVersion)
	// textBuffers adds the buffers the wrapper's text model has and its
	// family's does not, under the family's names (before renaming).
	textBuffers func(m Model, b *bufferList)
	// tap builds what the wrapper runs on tower block block's output as
	// the tower's loop passes it (Qwen3-VL's deepstack mergers) and
	// returns its features (b.tokens image tokens h wide), or nil where it
	// does not tap the block. The features live until the text model's
	// forward returns (textMasks carries them past the embedding side).
	tap func(b *actBuilder, p blockPlan, v Vision, block int, x *actT, hv, h int64) *actT
	// textMasks lists what the wrapper's model builds before the blocks
	// and passes beside them (the tapped features).
	textMasks func(r *resolved, p blockPlan) []maskPart
	// afterLayer adds the wrapper's ops after decoder layer layer's
	// output x (on the layers hookedLayer says) and returns the output.
	afterLayer func(b *actBuilder, p blockPlan, layer int, x *actT) *actT
	// maxPixels is the released processor's max_pixels
	// (preprocessor_config.json), the largest image it passes, where the
	// tower takes any size; 0: the tower's own size. video says how the
	// processor's videos are made, which vLLM's profile runs (vllm_mm.go);
	// videoMinPixels and videoMaxPixels bound a Qwen3-VL video's frames ×
	// height × width (video_preprocessor_config.json's size).
	maxPixels                      int
	video                          videoKind
	videoMinPixels, videoMaxPixels int
	// tiles: the processor cuts an image into up to this many tiles of
	// the tower's size, plus a global tile when there are more than one
	// (Llama 4). A training step or a prefill counts one tile an image;
	// vLLM's profile runs its dummy image's tiles (vllm_mm.go).
	tiles int
	// pixels is the dtype of the processor's pixel values, FP32 when
	// zero.
	pixels DType
	// audioPrefix goes before the names of an audio tower's tensors and
	// buffers (Model.Audio), and audioProjector lists its projector's
	// tensors (h: the language model's width); empty and nil for a wrapper
	// without an audio side (audio.go).
	audioPrefix    string
	audioProjector func(a Audio, l *tensorList, h int64)
	// speechStages are the families of the speech generator's talker,
	// predictor and vocoder (Model.Speech) the wrapper builds, "" for a
	// stage it has not; speech lists their tensors and speechBuffers
	// their buffers under the wrapper's names, with what joins them to the
	// language model; nil for a wrapper without one (speech.go).
	speechStages  [3]string
	speech        func(m Model, l *tensorList)
	speechBuffers func(m Model, b *bufferList)
}

// hookedLayer reports whether the wrapper's afterLayer runs after decoder
// layer i: the first len(Image.Deepstack) layers (Qwen3-VL's deepstack).
func (m *Model) hookedLayer(i int) bool {
	v := m.Vision
	if v == nil || v.Tower.Image == nil || i >= v.Tower.Image.Deepstack.Len() {
		return false
	}
	f := lookupFamily(v.Family)
	return f != nil && f.vision != nil && f.vision.afterLayer != nil
}

// Tensor parts of a vision-language model: what trains with what.
const (
	textPart      uint8 = iota // the language model
	towerPart                  // the vision tower's blocks and embeddings
	projectorPart              // the projector
	unusedPart                 // tower tensors the features never pass through (no gradient)
	frozenPart                 // a parameter created with requires_grad=False (ERNIE 4.5's moe_statics)
	noGradPart                 // a parameter only a torch.no_grad forward reads (DSA's lightning indexer, dsa.go), or one only integer outputs come of (MiniMax-M3's indexer, blocksparse.go): never given a gradient
	audioPart                  // an audio tower and its projector (Model.Audio): loaded, run by no modelled plan (audio.go)
	speechPart                 // a speech generator (Model.Speech): stored, loaded by transformers only, run by no modelled plan (speech.go)
)

// visionWrapperOf returns the wrapper's declaration, or nil.
func (m Model) visionWrapperOf() *visionWrapper {
	if m.Vision == nil {
		return nil
	}
	if f := lookupFamily(m.Vision.Family); f != nil {
		return f.vision
	}
	return nil
}

// featureIndex is the index into the tower's hidden states (0: the
// embeddings' output, i: block i-1's output) that the projector reads.
func (v Vision) featureIndex(w *visionWrapper) int {
	k := v.FeatureLayer
	if k == 0 && w != nil {
		k = w.featureLayer
	}
	if k < 0 {
		k += v.Tower.Layers + 1
	}
	return k
}

// ImageTokens is the number of tokens each image takes in the language
// model's sequence: the tower's tokens, without the class token unless the
// wrapper keeps it.
func (v Vision) ImageTokens() int {
	im := v.Tower.Image
	if im == nil {
		return 0
	}
	n := im.Tokens()
	if im.ClassToken && !v.KeepClassToken {
		n--
	}
	if im.Merge > 1 {
		n /= im.Merge * im.Merge
	}
	return n
}

// validateVision checks the vision side of a model (the language model's
// own fields are checked by Validate).
func (m Model) validateVision() error {
	v := m.Vision
	f := lookupFamily(v.Family)
	if f == nil || f.vision == nil {
		known := familiesWhere(func(f *family) bool { return f.vision != nil })
		return fmt.Errorf("model.vision.family %q is not a vision-language wrapper; known: %s%s", v.Family, strings.Join(known, ", "), didYouMean(v.Family, known))
	}
	if tf := lookupFamily(m.Family); tf == nil || tf.kind != decoder {
		return fmt.Errorf("model.family %q: a %s model's language model is a decoder", m.Family, v.Family)
	}
	if err := v.Tower.validate(true); err != nil {
		return fmt.Errorf("model.vision.tower: %s", strings.TrimPrefix(err.Error(), "model."))
	}
	if tf := lookupFamily(v.Tower.Family); !tf.images || tf.kind != encoder {
		return fmt.Errorf("model.vision.tower.family %q is not an image encoder", v.Tower.Family)
	}
	if k := v.featureIndex(f.vision); k < 1 || k > v.Tower.Layers {
		return fmt.Errorf("model.vision.feature_layer = %d must name a block's output: in [1, %d] or [-%d, -1]", v.FeatureLayer, v.Tower.Layers, v.Tower.Layers)
	}
	return nil
}

// visionTensors lists a vision-language model's tensors in the wrapper's
// state-dict order: the tower's, the projector's, the language model's.
// The tower's and the projector's sit outside the blocks (with the
// embedding, on the first pipeline stage).
func (m Model) visionTensors(l *tensorList) {
	w := m.visionWrapperOf()
	tower, ok := m.towerTensors(l, w)
	if !ok {
		return
	}
	m.projectorTensors(l, w, tower)
	m.wrappedTextTensors(l, w, lookupFamily(m.Family).tensors)
}

// towerTensors lists the tower's tensors under the wrapper's prefix and
// returns the tower (normalized); ok is false where the wrapper or the
// tower's family is unknown (nothing listed).
func (m Model) towerTensors(l *tensorList, w *visionWrapper) (tower Model, ok bool) {
	tower = m.Vision.Tower.Normalize()
	tf := lookupFamily(tower.Family)
	if w == nil || tf == nil || tf.tensors == nil || lookupFamily(m.Family) == nil {
		return tower, false
	}
	used := m.Vision.featureIndex(w) // blocks 0 … used-1 feed the features
	start := len(l.ts)
	tf.tensors(tower, l)
	for i := start; i < len(l.ts); i++ {
		t := &l.ts[i]
		t.Name = w.towerPrefix + t.Name
		t.part = towerPart
		if t.head || t.Layer >= used {
			t.part = unusedPart
		}
		t.Layer, t.head = -1, false
	}
	l.outside()
	return tower, true
}

// projectorTensors lists the wrapper's projector, outside the blocks.
func (m Model) projectorTensors(l *tensorList, w *visionWrapper, tower Model) {
	l.outside()
	start := len(l.ts)
	w.projector(*m.Vision, l, int64(tower.Hidden), int64(m.Hidden))
	for i := start; i < len(l.ts); i++ {
		l.ts[i].part = projectorPart
	}
}

// wrappedTextTensors lists the language model as tensors lists it (its
// family's, or the wrapper's where its text model is built otherwise),
// renamed under the wrapper's prefixes.
func (m Model) wrappedTextTensors(l *tensorList, w *visionWrapper, tensors func(Model, *tensorList)) {
	start := len(l.ts)
	text := m
	text.Vision = nil
	tensors(text, l)
	for i := start; i < len(l.ts); i++ {
		if n := l.ts[i].Name; strings.HasPrefix(n, "model.") {
			l.ts[i].Name = w.textPrefix + strings.TrimPrefix(n, "model.")
		} else {
			l.ts[i].Name = w.headPrefix + n
		}
	}
}

// readWrapped reads a vision-language config.json: its text_config (of
// family text) into *m, keeping a name the reader has set, and its
// vision_config (of family tower), which it returns; ok is false when
// either could not be read (the reader holds the error).
func (c *hfReader) readWrapped(m *Model, text, tower string) (Model, bool) {
	t := c.nested("text_config", text)
	v := c.nested("vision_config", tower)
	if c.err != nil {
		return Model{}, false
	}
	name := m.Name
	*m = t
	if name != "" {
		m.Name = name
	}
	return v, true
}

// writeWrapped writes a vision-language config.json's common keys:
// model_type, the language model as text_config, the tower as
// vision_config, and the image token (the vocabulary's last).
func (m Model) writeWrapped(c map[string]any, modelType string) {
	text, tower := m, m.Vision.Tower
	text.Vision, text.Name, tower.Name = nil, "", ""
	c["model_type"] = modelType
	c["text_config"] = text.HFConfig()
	// The wrapper's own tie_word_embeddings, which transformers 5 reads
	// (5.23.0 gemma3/configuration_gemma3.py:213,
	// mistral3/configuration_mistral3.py:98, default True) where 4.57 read
	// text_config's: as the language model ties, so a model built from
	// this config keeps lm_head as the released checkpoints store it.
	c["tie_word_embeddings"] = m.TiedEmbeddings
	c["vision_config"] = tower.HFConfig()
	c["image_token_index"] = m.Vocab - 1
}

// visionBuffers adds the tower's buffers under the wrapper's prefix.
func (m Model) visionBuffers(b *bufferList) {
	w := m.visionWrapperOf()
	if w == nil {
		return
	}
	for _, bf := range m.Vision.Tower.Buffers() {
		bf.Name, bf.Layer = w.towerPrefix+bf.Name, -1
		b.bs = append(b.bs, bf)
	}
}

// visionBufferNames renames the language model's buffers.
func (m Model) textBufferName(name string) string {
	if w := m.visionWrapperOf(); w != nil && strings.HasPrefix(name, "model.") {
		return w.textPrefix + strings.TrimPrefix(name, "model.")
	}
	return name
}

// towerPlan resolves the run of a vision-language model's tower: the
// images of a micro-batch as the tower's batch, its own family's recipe,
// trained in full or frozen as the plan says, no adapters, no model
// parallelism (the tower is replicated) but a serving engine's
// (vision_tp.go).
func (r *resolved) towerPlan() (*resolved, error) {
	v := r.m.Vision
	t := Training{Model: v.Tower, SeqLen: v.Tower.Image.Tokens(), MicroBatch: r.MicroBatch * r.images,
		Precision: r.Precision, WeightsDType: r.WeightsDType, ComputeDType: r.ComputeDType, Autocast: r.Autocast,
		MasterWeights: r.MasterWeights, GradsDType: r.GradsDType, Optimizer: "none",
		Checkpointing: r.Checkpointing, Attention: r.Attention, Trainable: "frozen", Framework: r.Framework, Transformers: r.towerTransformers(),
		asTower: true}
	if r.Checkpointing == CheckpointSelective {
		t.Checkpointing = CheckpointNone // transformers checkpoints whole layers or none
	}
	if r.towerTP > 1 {
		t.Parallel.TP = r.towerTP // vision_tp.go
	}
	if f := lookupFamily(v.Tower.Family); f != nil && f.towerPadding != nil && r.runsTransformers() {
		im := *v.Tower.Image
		im.padTo = f.towerPadding(im)
		t.Model.Image, t.SeqLen = &im, im.Tokens()
	}
	if r.towerTrains() {
		t.Trainable = "full"
	}
	t.QuantizedBase = r.QuantizedBase
	if t.QuantizedBase.Quantized() {
		t.Trainable = "frozen"
	}
	rv, err := t.resolve()
	if err != nil {
		return nil, fmt.Errorf("model.vision.tower: %w", err)
	}
	return &rv, nil
}

// towerTransformers is the transformers release the tower is planned at:
// the wrapper's, which for a transformers 5 model left unset is the 5.x
// release it resolved to (transformersOf), not the engine's 4.x default a
// tower family would get on its own.
func (r *resolved) towerTransformers() string {
	if r.Transformers == "" && only5(r.m) {
		return transformers5String()
	}
	return r.Transformers
}

// holdShared keeps what every tower block read (shared) until the tower
// returns, or, saved by the blocks' ops when they record, until their
// backward.
func (b *actBuilder) holdShared(shared []*actT, record bool) {
	b.hold(shared...)
	if record {
		for _, t := range shared {
			t.saved, t.release = true, t.born
		}
	}
}

// towerTrains reports whether the tower's weights train.
func (r *resolved) towerTrains() bool { return r.Trainable == "full" && r.VisionTower == "trainable" }

// trains reports whether a tensor of the model gets a gradient and
// optimizer state in full training: the tower's only with a trainable
// tower, never the tower parts the features bypass or an audio tower.
func (r *resolved) trains(t Tensor) bool {
	switch t.part {
	case towerPart:
		return r.towerTrains()
	case unusedPart, frozenPart, noGradPart, audioPart, speechPart:
		return false
	}
	return !r.frozen
}

// imageSide builds what a vision-language model runs between the token
// embedding and the first block (LlavaModel.forward): the tower over the
// micro-batch's images with every hidden state kept (output_hidden_states),
// the projector on the selected one, the concatenation of the images'
// features in the embeddings' dtype, the placeholder mask and its check,
// and masked_scatter of the features into the embeddings. text is the
// token embeddings; the result is the language model's input.
func (b *actBuilder) imageSide(r *resolved, p blockPlan, text *actT) *actT {
	m := r.m
	v := *m.Vision
	w := m.visionWrapperOf()
	rv := r.tower
	tower := rv.m
	pv := rv.blockPlan(0)
	grad := r.towerTrains()
	record := grad || r.towerRecords()
	n := int64(rv.MicroBatch) // images
	hv, h := int64(tower.Hidden), int64(m.Hidden)
	tokens := b.tokens

	// The embeddings, as the tower's family builds them. Without a graph
	// only the tower's ops lose theirs: what the text side built before
	// (Gemma 4's per-layer inputs) keeps its own.
	towerFrom := len(b.ops)
	x, shared := lookupFamily(tower.Family).towerEmbed(b, pv, tower, n, grad)
	if !record {
		b.noGraph(towerFrom)
	}

	// The blocks, each spliced in op by op. A wrapper that asks for the
	// hidden states keeps every block's input and the last output
	// (encoder_states) until get_image_features returns; blocks past the
	// selected one still run, and their graph (if any) goes with the tuple.
	used := v.featureIndex(w)
	states := []*actT{x}
	b.towerEmbeds = x
	projFrozen := !r.trains(Tensor{part: projectorPart})
	var taps []*actT
	var kinds [blockKinds]*BlockActivations
	for i := 0; i < tower.Layers; i++ {
		k := tower.blockKind(i)
		if kinds[k] == nil {
			a := buildBlock(rv, i)
			kinds[k] = &a
		}
		// Each block's ops, spliced one by one so that the allocator replay
		// sees its real tensors; without a gradient (a frozen tower, or a
		// block past the selected hidden state) nothing is saved and no
		// backward runs through them.
		x = b.splice(kinds[k], x, record && i < used, record && i < used && rv.checkpointed(i))
		states = append(states, x)
		if w.tap != nil {
			taps = b.tapBlock(w, p.withFrozen(projFrozen), v, i, x, hv, h, projFrozen && !grad, taps)
		}
	}
	b.holdShared(shared, record)
	x = b.towerFinalNorm(pv, tower, x, n, record)

	// The selected hidden state (LLaVA: without the class token, a view
	// that keeps the whole state when saved), through the projector.
	b.tokens = n * int64(v.ImageTokens())
	from := len(b.ops)
	src := x
	if w.hiddenStates {
		src = states[used]
	}
	feats := w.project(b, p.withFrozen(projFrozen), v, src, hv, h)
	switch {
	case projFrozen && !record:
		b.noGraph(from) // nothing before the projector or in it needs a gradient
	case !record:
		b.withoutGrad(nil) // the projector's first ops read features without a gradient
	}
	if w.hiddenStates {
		b.hold(states...)
	}

	// torch.cat of the per-image features (a copy), then .to the
	// embeddings' dtype (another when they differ).
	if !w.noCat {
		feats = b.op("image_features.cat", b.size(h, feats.dtype), feats.dtype, list(feats))
	}
	if feats.dtype != text.dtype {
		feats = b.op("image_features.to", b.size(h, text.dtype), text.dtype, list(feats))
	}
	if w.returnsFeatures {
		p.holdOutput(feats) // returned as image_hidden_states
	}
	// get_placeholder_mask: input_ids == image_token_id (one byte a token),
	// expanded; inputs_embeds[mask] copies the image rows to count them.
	b.tokens = tokens
	mask := b.op("image_token_mask", Bool.Size(tokens), Bool, nil)
	b.tokens = n * int64(v.ImageTokens())
	b.op("inputs_embeds[mask]", b.size(h, text.dtype), text.dtype, list(text, mask))
	// masked_scatter: a new tensor; its backward needs the mask only.
	b.tokens = tokens
	out := b.op("inputs_embeds.masked_scatter", b.size(h, text.dtype), text.dtype, list(text, mask, feats), mask)
	b.hold(taps...) // then textMasks carries them
	b.tapGrads(taps)
	return out
}

// tapGrads marks the gradients of the tapped features, which the text
// model's backward made, as in flight while the ops created after each
// feature run their backward (autograd runs those first); the feature's
// own op consumes its gradient.
func (b *actBuilder) tapGrads(taps []*actT) {
	for _, t := range taps {
		g := gradSize(t)
		for i := t.born + 1; i < len(b.ops); i++ {
			b.ops[i].heldGrad = addBytes(b.ops[i].heldGrad, g)
		}
	}
}

// tapBlock runs the wrapper's tap on tower block i's output x (its ops on
// the image tokens, without a graph when nothing in them trains) and
// appends its features to taps.
func (b *actBuilder) tapBlock(w *visionWrapper, p blockPlan, v Vision, i int, x *actT, hv, h int64, noGraph bool, taps []*actT) []*actT {
	tokens := b.tokens
	b.tokens = int64(b.r.tower.MicroBatch) * int64(v.ImageTokens())
	from := len(b.ops)
	f := w.tap(b, p, v, i, x, hv, h)
	if f != nil && noGraph {
		b.noGraph(from)
	}
	b.tokens = tokens
	if f == nil {
		return taps
	}
	return append(taps, f)
}

// towerFinalNorm is a tower's final norm after its blocks: on the class
// token only (CLIP's post_layernorm, the pooled output the wrapper does not
// read), or on every token (SigLIP's, the last hidden state it reads). It
// returns the last hidden state.
func (b *actBuilder) towerFinalNorm(pv blockPlan, tower Model, x *actT, n int64, grad bool) *actT {
	hv := int64(tower.Hidden)
	switch {
	case pv.rec.pooledNorm:
		b.tokens = n
		b.op("vision.post_layernorm", b.size(hv, pv.resid), pv.resid, list(x))
	case pv.rec.towerPostNorm:
		b.tokens = n * int64(tower.Image.Tokens())
		from := len(b.ops)
		x = b.norm(pv, "vision.post_layernorm", tower.Norm, x, hv)
		if !grad {
			b.noGraph(from)
		}
	}
	return x
}

// noGraph makes the ops from op from on run without an autograd graph
// (nothing they read needs a gradient): they save nothing and create no
// weight gradient.
func (b *actBuilder) noGraph(from int) {
	for i := from; i < len(b.ops); i++ {
		op := &b.ops[i]
		op.saves, op.weights, op.castWeights, op.gradWorkspace, op.noGrad = false, 0, false, 0, true
	}
	for _, t := range b.ts {
		if t.saved && t.release >= from {
			t.saved, t.release = false, -1
		}
	}
}

// withFrozen is p with its weights frozen or not.
func (p blockPlan) withFrozen(frozen bool) blockPlan {
	p.frozen = frozen
	p.lora = nil
	return p
}

// splice appends the ops of a block's program to b, reading x where the
// block reads its input, and returns the block's output. With grad false
// the ops run without an autograd graph (nothing that needs a gradient
// reaches them): nothing is saved and each tensor dies after its last use.
// With ckpt the block is checkpointed: only x is kept for its backward,
// which first rebuilds the block's saved tensors (its gradWorkspace).
func (b *actBuilder) splice(a *BlockActivations, x *actT, grad, ckpt bool) *actT {
	blk := a.prog
	off := len(b.ops)
	shift := func(i int) int {
		if i < 0 {
			return i
		}
		return i + off
	}
	// to maps the block's tensors (by id) to their copies in b.
	b.spliceTo = resize(b.spliceTo[:0], len(blk.ts))
	to := b.spliceTo
	var out *actT
	for _, t := range blk.ts {
		if t == blk.in {
			to[t.id] = x
			continue
		}
		c := b.newT(*t)
		c.born, c.lastUse, c.release = shift(t.born), shift(t.lastUse), shift(t.release)
		if t.holdUntil > 0 {
			c.holdUntil = t.holdUntil + off
		}
		if !grad || ckpt {
			c.saved, c.held, c.release = false, false, -1
		}
		if t.keepAlive {
			c.keepAlive = false
			out = c
		}
		c.id = len(b.ts)
		b.ts = append(b.ts, c)
		to[t.id] = c
	}
	in := blk.in
	x.lastUse = max(x.lastUse, shift(in.lastUse))
	if in.holdUntil > 0 {
		x.holdUntil = max(x.holdUntil, in.holdUntil+off)
	}
	if grad && (in.saved || ckpt) {
		rel := off // a checkpoint keeps its input until the block's backward ends
		if !ckpt {
			rel = shift(in.release)
		}
		if !x.saved || x.release < 0 || rel < x.release {
			x.release = rel
		}
		x.saved = true
	}
	if grad && !ckpt {
		for _, sr := range blk.saves {
			if blk.owns(sr.t) {
				b.saves = append(b.saves, saveRec{sr.op + off, to[sr.t.id]})
			}
		}
	}
	for _, op := range blk.ops {
		c := op
		c.outs, c.ins = b.mapped(blk, op.outs), b.mapped(blk, op.ins)
		if !grad {
			c.weights, c.saves, c.castWeights, c.gradWorkspace, c.heldGrad, c.noGrad = 0, false, false, 0, 0, true
		} else if ckpt {
			c.saves = false
		}
		b.ops = append(b.ops, c)
	}
	if grad && ckpt && len(b.ops) > off {
		b.ops[len(b.ops)-1].gradWorkspace += b.recomputeCharge(a, in.saved, in.bytes)
	}
	if out == nil {
		out = x
	}
	return out
}

// mapped is ts with the tensors of blk replaced by their copies in b
// (b.spliceTo), in b's store of tensor lists.
func (b *actBuilder) mapped(blk *actBuilder, ts []*actT) []*actT {
	if len(ts) == 0 {
		return nil
	}
	l := b.ptrList(ts...)
	for i, t := range l {
		if blk.owns(t) {
			l[i] = b.spliceTo[t.id]
		}
	}
	return l
}

// recomputeCharge is what a checkpointed tower block's recomputation adds
// at its last op's backward (inSaved, in: whether its input is saved, and
// its size, kept anyway). The recomputation rebuilds the block's saved
// tensors before its backward runs; the most that backward holds at once
// (what is still saved and in flight at each of its steps, and the weight
// gradients its earlier steps made, which the outer walk adds only as it
// reaches their ops) is charged to the last op's, whose own in-flight
// gradients the outer walk counts.
func (b *actBuilder) recomputeCharge(a *BlockActivations, inSaved bool, in Bytes) Bytes {
	var w int64
	for _, op := range a.prog.ops {
		w += op.weights
	}
	wg := func(st bwdStep) Bytes { return Bytes(st.gradFrac * float64(b.r.GradsDType.Size(w))) }
	re := a.Saved
	if len(a.bwd) > 0 {
		re = 0
		for _, st := range a.bwd {
			re = max(re, st.saved+st.inflight+wg(st))
		}
		re -= a.bwd[0].inflight + wg(a.bwd[0])
	}
	if inSaved {
		re -= in
	}
	return re
}

// TowerRuns reports whether plans run the tower's forward over their
// images: false for a tower family declared loadOnly, whose weights load
// with the model while the plan runs the text alone.
func (v Vision) TowerRuns() bool {
	tf := lookupFamily(v.Tower.Family)
	return tf == nil || !tf.loadOnly
}

// resolveVision checks a plan's images and vision_tower and resolves the
// tower's run.
func (r *resolved) resolveVision() error {
	v := r.m.Vision
	if v == nil {
		if r.Images != 0 || r.VisionTower != "" {
			return fmt.Errorf("images and vision_tower apply to vision-language models (model.vision), not %q", r.m.Family)
		}
		return nil
	}
	if r.Images < 0 || r.Images > MaxTokens {
		return fmt.Errorf("images must be in [1, %d], got %d", MaxTokens, r.Images)
	}
	if !v.TowerRuns() {
		// A load-only tower (family.loadOnly): its weights load, the plan
		// runs the text (r.tower stays nil, the embedding side runs no
		// image).
		if r.Images > 0 || r.VisionTower == "trainable" {
			return fmt.Errorf("images and vision_tower: the %s tower's forward is not modelled yet (its parameters, buffers, stored bytes and checkpoint are); plan the text alone, without images", v.Tower.Family)
		}
		return nil
	}
	r.images = max(1, r.Images)
	if tf := lookupFamily(v.Tower.Family); tf == nil || tf.towerEmbed == nil {
		// A tower family whose forward the engine does not build.
		return fmt.Errorf("model.vision.tower: the %s tower's forward is not modelled yet (%w); its parameters, buffers, stored bytes and checkpoint are, and so is a serving engine that skips the tower (vLLM with limit_mm_per_prompt 0 for the model's modalities: %s)", v.Tower.Family, ErrServingOnly, strings.Join(vllmModalities(r.m), ", "))
	}
	if r.VisionTower == "" {
		r.VisionTower = "frozen"
	}
	if err := oneOf("vision_tower", r.VisionTower, "frozen", "trainable"); err != nil {
		return err
	}
	if r.VisionTower == "trainable" && r.Trainable != "full" {
		return fmt.Errorf("vision_tower \"trainable\" needs trainable \"full\", not %q (adapters train the language model only)", r.Trainable)
	}
	per := v.ImageTokens()
	if int64(r.images)*int64(per) > int64(r.SeqLen) {
		return fmt.Errorf("seq_len = %d cannot hold images = %d of %d tokens each: seq_len counts the image tokens too", r.SeqLen, r.images, per)
	}
	if r.cp > 1 || r.pp > 1 {
		return fmt.Errorf("parallel: context and pipeline parallelism of vision-language models are not modelled")
	}
	if _, err := boundedProduct(maxBatchTokens, "micro_batch × images × tower tokens", int64(r.MicroBatch)*int64(r.images), int64(v.Tower.Image.Tokens())); err != nil {
		return err
	}
	rv, err := r.towerPlan()
	if err != nil {
		return err
	}
	r.tower = rv
	return nil
}

// visionGradShare is the share of the embedding side's trained elements
// that the projector and the tower hold: their gradients appear during
// their backward, the token embedding's after it.
func (r *resolved) visionGradShare() float64 {
	var vis, all int64
	for _, t := range r.m.tensors() {
		if t.Layer >= 0 || t.head || !r.trains(t) {
			continue
		}
		all += t.Numel()
		if t.part == towerPart || t.part == projectorPart {
			vis += t.Numel()
		}
	}
	if all == 0 {
		return 0
	}
	return float64(vis) / float64(all)
}

// currentName maps a tensor name of a checkpoint saved by an older
// transformers release to today's (a wrapper's renames; other names as
// they are).
func (m Model) currentName(name string) string {
	if w := m.visionWrapperOf(); w != nil && w.rename != nil {
		return w.rename(name)
	}
	return name
}
