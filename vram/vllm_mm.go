package vram

import (
	"fmt"
	"math"
)

// vLLM's profile of a vision-language model (vLLM 0.11.0). Before it sizes
// the KV cache, profile_run (v1/worker/gpu_model_runner.py l.3325-3403)
// runs the vision encoder once on dummy items of the largest size the
// model's processor passes, of the modality with the most tokens an item
// (v1/worker/utils.py l.75-79): as many items as the encoder budget holds,
// max(max_num_batched_tokens, that size) tokens (v1/core/
// encoder_cache_manager.py l.292-332; utils.py l.84-127), in one batched
// get_multimodal_embeddings call on fp32 pixels moved to the GPU as the
// processor made them (multimodal/utils.py group_mm_kwargs_by_modality).
// Outputs shorter than the budget are copied into zero tensors of the
// budget's length (l.3374-3384), kept in the encoder cache with the pixels
// through the language model's and the sampler's dummy runs, and freed when
// profile_run returns. The peak it measures (gpu_worker.py l.222-280) is
// the largest of the encoder call and what stays beside the language
// model's run.

// vllmMMLimit is limit_mm_per_prompt's default for each modality in V1
// (config/multimodal.py l.106-114).
const vllmMMLimit = 999

// vllmMaxVideoFrames is Qwen2-VL's _MAX_FRAMES_PER_VIDEO (model_executor/
// models/qwen2_vl.py l.82), which Qwen2.5-VL reuses.
const vllmMaxVideoFrames = 14

// VLLMMMProfile is what vLLM's profile run gives a vision-language model's
// encoder.
type VLLMMMProfile struct {
	Modality      string `json:"modality"`        // "image" or "video": the one with the most tokens an item
	TokensPerItem int    `json:"tokens_per_item"` // in the language model's sequence
	Items         int    `json:"items"`           // dummy items in the one encoder call
	Budget        int    `json:"encoder_budget"`  // tokens: max(max_num_batched_tokens, tokens per item)
	ImageSize     int    `json:"image_size"`      // the dummy image's side (pixels), a video frame's or a tile's
	Frames        int    `json:"frames,omitempty"`
	Tiles         int    `json:"tiles,omitempty"` // the tiles an image is cut into, the global one included (Llama 4)
	// Encoder is the encoder call's peak above the weights; Held what
	// stays allocated through the language model's dummy run (the pixels
	// and the outputs, each at least the budget's length).
	Encoder Bytes `json:"encoder"`
	Held    Bytes `json:"held"`
}

// mmProfile is vLLM's multimodal profile of in's vision-language model
// (nil when it has none or it is skipped).
func (v VLLM) mmProfile(in Inference, m Model) (*VLLMMMProfile, error) {
	if m.Vision == nil || in.towerOff {
		return nil, nil // no tower built: no multimodal item to profile
	}
	w := m.visionWrapperOf()
	if w != nil && !v.towerData(m) && (v.mmLimit("image") > 0 || w.video != noVideo && v.mmLimit("video") > 0) {
		// The encoder is built, skipped profile or not: its weights split
		// over the ranks.
		if err := checkTowerTP(m, v.TP); err != nil {
			return nil, err
		}
	}
	if v.SkipMMProfiling {
		return nil, nil
	}
	im := m.Vision.Tower.Image
	if w == nil || im == nil || im.Patch < 1 {
		return nil, nil
	}
	if w.tiles > 0 {
		return v.tiledProfile(in, m, *w)
	}
	p := &VLLMMMProfile{Modality: "image", ImageSize: v.dummyImageSize(*w, *im)}
	dummy := *m.Vision
	tower := dummy.Tower
	img := *im
	img.Size = p.ImageSize
	tower.Image = &img
	dummy.Tower = tower
	perImage := dummy.ImageTokens()
	if perImage < 1 {
		return nil, nil // no image tokens: nothing reaches the encoder
	}
	images, video := v.mmLimit("image"), 0
	if w.video != noVideo {
		video = v.mmLimit("video")
	}
	if images == 0 && video == 0 {
		return nil, nil // text-only: the encoder is neither built nor profiled
	}
	p.TokensPerItem, p.Frames = perImage, 0
	groups := 1 // temporal groups an item: images of the dummy's size
	if video > 0 {
		vid := v.dummyVideo(*w, img, p.ImageSize, perImage)
		if images == 0 || vid.tokens > perImage {
			p.Modality, p.Frames, p.TokensPerItem, groups = "video", vid.frames, vid.tokens, vid.groups
			p.ImageSize, img.Size = vid.side, vid.side // the tower's images are the frames
		}
	}
	p.Budget = max(v.MaxNumBatchedTokens, p.TokensPerItem)
	limit := images
	if p.Modality == "video" {
		limit = video
	}
	perPrompt := max(1, min(limit, v.MaxModelLen/p.TokensPerItem))
	p.Items = max(1, min(p.Budget/p.TokensPerItem, v.MaxNumSeqs*perPrompt))
	return p, v.mmBytes(in, m, dummy, p, groups)
}

// dummyImageSize is the side of the largest image the processor passes:
// the square within max_pixels (the launch's, else the processor's), cut
// to a multiple of patch × merge (smart_resize); a tower of a fixed size
// takes its own.
func (v VLLM) dummyImageSize(w visionWrapper, im Image) int {
	pixels := w.maxPixels
	if v.MaxPixels > 0 {
		pixels = v.MaxPixels
	}
	if pixels <= 0 {
		return im.Size
	}
	f := im.Patch * max(1, im.Merge)
	return max(f, int(math.Sqrt(float64(pixels)))/f*f)
}

// tiledProfile is the profile of a model whose processor cuts images
// into tiles (Llama 4, model_executor/models/mllama4.py). The dummy image
// is max_num_tiles tiles tall and one wide (get_image_size_with_most_
// features, l.561-566), which the processor cuts into its 16 × 1 tiles
// and a global tile (patches_per_image, l.605-628). The tower runs each
// tile as an image; vLLM counts an item by its placeholder's length
// (get_mm_max_contiguous_tokens, multimodal/registry.py l.124-149,
// profiling.py l.266-283): the replacement _prompt_split_image writes
// (processing_llama4.py l.111-136, transformers 4.57.6), an image start,
// each tile's patch tokens and row separator, the global tile's image
// token and patches, an image end. The output is the patches alone.
func (v VLLM) tiledProfile(in Inference, m Model, w visionWrapper) (*VLLMMMProfile, error) {
	im := *m.Vision.Tower.Image
	perTile := m.Vision.ImageTokens()
	images := v.mmLimit("image")
	if perTile < 1 || images == 0 {
		return nil, nil // no image tokens, or text-only: nothing reaches the encoder
	}
	rows := w.tiles // the dummy's tiles: rows × 1
	tiles, tokens := rows, 1+perTile+1+1
	if rows > 1 {
		tiles++ // the global tile
		tokens += rows * (perTile + 1)
	}
	p := &VLLMMMProfile{Modality: "image", ImageSize: im.Size, Tiles: tiles, TokensPerItem: tokens}
	p.Budget = max(v.MaxNumBatchedTokens, p.TokensPerItem)
	perPrompt := max(1, min(images, v.MaxModelLen/p.TokensPerItem))
	p.Items = max(1, min(p.Budget/p.TokensPerItem, v.MaxNumSeqs*perPrompt))
	return p, v.mmBytes(in, m, *m.Vision, p, tiles)
}

// vllmTextOnlySkipsTower lists the model classes that build no vision
// tower or projector when limit_mm_per_prompt allows none of their
// modalities (vLLM 0.11.0 model_executor/models/: llava.py l.538-555,
// mistral3.py l.440-458, mllama4.py l.738-752, qwen2_5_vl.py l.1011-1021,
// qwen3_vl.py l.1129-1139, qwen3_vl_moe.py l.322-332); Gemma 3's
// (gemma3_mm.py l.501) builds its tower regardless.
var vllmTextOnlySkipsTower = map[string]bool{llavaModelType: true, mistral3ModelType: true,
	llama4ModelType: true, qwen25VLModelType: true, qwen3VLModelType: true, qwen3VLMoeModelType: true,
	kimiK25ModelType: true}

// vllmModalities are the limit_mm_per_prompt keys a model takes: image and
// video, audio with an audio tower; Kimi-K2.5's one "vision_chunk"
// (0.33 kimi_k25.py:174-176, get_supported_mm_limits), under which
// _mark_tower_model puts its tower and projector (l.349-373; interfaces.py
// l.376-395: skipped when every modality's limit is 0).
func vllmModalities(m Model) []string {
	if m.Vision != nil && m.Vision.Family == kimiK25ModelType {
		return []string{"vision_chunk"}
	}
	if m.Audio != nil {
		return []string{"image", "video", "audio"}
	}
	return []string{"image", "video"}
}

// textOnly reports whether vLLM loads m without its vision tower: every
// modality's limit is 0 and the model class then skips it.
func (v VLLM) textOnly(m Model) bool {
	if m.Vision == nil || !vllmTextOnlySkipsTower[m.Vision.Family] {
		return false
	}
	if m.Vision.Family == kimiK25ModelType {
		return v.mmLimit("vision_chunk") == 0
	}
	if v.mmLimit("image") > 0 {
		return false
	}
	w := m.visionWrapperOf()
	return w == nil || w.video == noVideo || v.mmLimit("video") == 0
}

// vllmCutsTower reports whether vLLM builds m's vision tower only up to
// its deepest feature layer and without the post-norm: LLaVA's and
// Mistral 3's init_vision_tower_for_llava (llava.py l.417-486, with
// require_post_norm=False at l.538-543; mistral3.py l.440-445), so the
// blocks past the feature layer (unusedPart) are never loaded.
func vllmCutsTower(m Model) bool {
	return m.Vision != nil && (m.Vision.Family == llavaModelType || m.Vision.Family == mistral3ModelType)
}

// mmLimit is limit_mm_per_prompt for modality.
func (v VLLM) mmLimit(modality string) int {
	if n, ok := v.LimitMMPerPrompt[modality]; ok {
		return n
	}
	return vllmMMLimit
}

// videoKind is how a processor makes the dummy video of vLLM's profile.
type videoKind uint8

const (
	noVideo videoKind = iota
	// qwen2Video: Qwen2-VL's processing info, which Qwen2.5-VL reuses:
	// frames of the largest image, as many as max_model_len holds, at most
	// 14 (qwen2_vl.py l.956-1009; qwenVideoFrames).
	qwen2Video
	// qwen3Video: Qwen3-VL's: up to 24,576 frames, resized together by the
	// video processor within its max pixels, each token counted 12.5 times
	// for the timestamp text around it (qwen3_vl.py l.91, 591-673,
	// 740-788; qwen3DummyVideo).
	qwen3Video
)

// dummyVideo is the profile's dummy video: its frames, temporal groups,
// frame side and the tokens vLLM counts for it.
type dummyVideo struct{ frames, groups, side, tokens int }

// dummyVideo is the video w's processor makes for the profile, its
// largest image side pixels square (perImage tokens).
func (v VLLM) dummyVideo(w visionWrapper, im Image, side, perImage int) dummyVideo {
	if w.video == qwen3Video {
		return qwen3DummyVideo(v.MaxModelLen, side, im, w.videoMinPixels, w.videoMaxPixels)
	}
	frames, g := qwenVideoFrames(v.MaxModelLen, perImage, im.TemporalPatch)
	return dummyVideo{frames: frames, groups: g, side: side, tokens: g * perImage}
}

// vllmQwen3MaxFrames is Qwen3-VL's _MAX_FRAMES_PER_VIDEO (qwen3_vl.py
// l.91).
const vllmQwen3MaxFrames = 24576

// qwen3DummyVideo is Qwen3-VL's dummy video for the profile of a
// max_model_len context: _get_max_video_frames (from two frames, l.644-648;
// qwen2_vl.py l.974-995) adds frames while the next count's tokens fit,
// capped at 24,576 (get_num_frames_with_most_features, l.650-656); the
// video processor resizes the largest image (side²) for that many frames
// (_get_vision_info, l.591-641), and get_max_video_tokens counts its tokens
// × 12.5, the "<t seconds>" text and the markers around each
// (l.658-673).
func qwen3DummyVideo(maxModelLen, side int, im Image, minPx, maxPx int) dummyVideo {
	temporal, factor := max(1, im.TemporalPatch), im.Patch*max(1, im.Merge)
	tokens := func(frames int) (int, int, int) {
		s := qwen3VideoSide(frames, side, temporal, factor, minPx, maxPx)
		groups := max((frames+frames%temporal)/temporal, 1)
		per := (s / im.Patch) * (s / im.Patch) / max(1, im.Merge*im.Merge)
		return groups * per, groups, s
	}
	n := 2
	for n < vllmQwen3MaxFrames {
		if t, _, _ := tokens(n + 1); t > maxModelLen {
			break
		}
		n++
	}
	soft, groups, s := tokens(n)
	return dummyVideo{frames: n, groups: groups, side: s, tokens: int(float64(soft) * 12.5)}
}

// qwen3VideoSide is the side transformers' Qwen3-VL video smart_resize
// gives frames frames of a side² image (video_processing_qwen3_vl.py
// l.34-64, transformers 4.57.6): the side rounded to the factor, scaled
// down to keep frames × side² within maxPx (at least one factor) or up to
// reach minPx. Python's round is half to even.
func qwen3VideoSide(frames, side, temporal, factor, minPx, maxPx int) int {
	f := float64(factor)
	h := int64(math.RoundToEven(float64(side)/f)) * int64(factor)
	t := int64(math.RoundToEven(float64(frames)/float64(temporal))) * int64(temporal)
	all := float64(frames) * float64(side) * float64(side)
	switch {
	case maxPx > 0 && t*h*h > int64(maxPx):
		beta := math.Sqrt(all / float64(maxPx))
		return max(factor, int(math.Floor(float64(side)/beta/f))*factor)
	case t*h*h < int64(minPx):
		beta := math.Sqrt(float64(minPx) / all)
		return int(math.Ceil(float64(side)*beta/f)) * factor
	}
	return int(h)
}

// qwenVideoFrames is the dummy video of Qwen2-VL's processing info
// (qwen2_vl.py l.956-1009): the most frames whose tokens fit max_model_len
// (frames padded to the temporal patch, each pair one temporal group of a
// whole image's tokens), at most vllmMaxVideoFrames, at least one; it
// returns the frames and the temporal groups.
func qwenVideoFrames(maxModelLen, perImage, temporal int) (frames, groups int) {
	temporal = max(1, temporal)
	groupsOf := func(f int) int { return max((f+f%temporal)/temporal, 1) }
	frames = 1
	for frames < vllmMaxVideoFrames && groupsOf(frames+1)*perImage <= maxModelLen {
		frames++
	}
	frames = max(1, min(frames, vllmMaxVideoFrames))
	return frames, groupsOf(frames)
}

// mmBytes fills p's encoder peak and what it holds: the tower's no-grad
// pass over the items' images at the dummy size, as the engine builds it
// (its flash attention), less the token embeddings the engine's image side
// runs beside it and vLLM's encoder call does not; held, the fp32 pixels
// and the outputs, each padded to the budget.
func (v VLLM) mmBytes(in Inference, m Model, dummy Vision, p *VLLMMMProfile, groups int) error {
	mm := m
	mm.Vision = &dummy
	per := dummy.ImageTokens()
	e := in.UnquantizedDType
	if !e.IsFloat() {
		e = BF16
	}
	items, batch := p.Items, p.Items*groups
	switch {
	case v.towerData(m) && p.Tiles > 0:
		// Data-parallel over tiles: the flat batch of tiles is padded and
		// cut into equal shares (run_dp_sharded_vision_model, vision.py
		// l.133-163).
		batch = (batch + v.TP - 1) / max(1, v.TP)
		items = (batch + groups - 1) / groups
	case v.towerData(m):
		// Data-parallel: the items are shared out, each rank running whole
		// towers on its share (the busiest: ⌈items/tp⌉ of equal ones;
		// vision.py l.166-234, 235-300).
		items = (p.Items + v.TP - 1) / max(1, v.TP)
		batch = items * groups
	}
	tr := Training{Model: mm, SeqLen: per, MicroBatch: batch, Images: 1, WeightsDType: e, ComputeDType: e,
		Trainable: "frozen", Optimizer: "none", Attention: "flash2", Dropout: new(float64), Parallel: Parallel{TP: max(1, v.TP)}}
	tr.servingEngine = true
	if vllmTowerOf(m).split && !v.towerData(m) {
		tr.towerTP = max(1, v.TP) // vision_tp.go
	}
	r, err := tr.resolve()
	if err != nil {
		return fmt.Errorf("vllm: the multimodal profile (%d %s items of %d tokens): %w", p.Items, p.Modality, p.TokensPerItem, err)
	}
	r.frozen = true
	side := buildEdges(&r).Embed.NoGradPeak
	text := e.Size(mulI64(int64(batch)*int64(per), int64(m.Hidden)))
	p.Encoder = max(0, side-text)
	im := dummy.Tower.Image
	side2 := int64(im.Size / im.Patch)
	patches := int64(p.Items*groups) * side2 * side2 // the class token and registers have no pixels
	px := FP32
	if w := m.visionWrapperOf(); w != nil && w.pixels != DTypeUnset {
		px = w.pixels
	}
	pixels := px.Size(mulI64(patches, int64(im.Channels*max(1, im.TemporalPatch)*im.Patch*im.Patch)))
	// Each output row is the language model's width, and Qwen3-VL's carry
	// the deepstack features beside (qwen3_vl.py l.1164-1165, 1395).
	width := int64(m.Hidden) * int64(1+im.Deepstack.Len())
	rows := int64(max(p.TokensPerItem, p.Budget))
	p.Held = addBytes(pixels, e.Size(mulI64(int64(p.Items)*rows, width)))
	return nil
}

// note says what the profile ran and what it takes.
func (p VLLMMMProfile) note() string {
	what := fmt.Sprintf("%d %s item(s) of %d tokens", p.Items, p.Modality, p.TokensPerItem)
	switch {
	case p.Frames > 0:
		what = fmt.Sprintf("%d video of %d frames at %d×%d (%d tokens)", p.Items, p.Frames, p.ImageSize, p.ImageSize, p.TokensPerItem)
	case p.Tiles > 0:
		what = fmt.Sprintf("%d image(s) of %d tiles of %d×%d, %d tokens each", p.Items, p.Tiles, p.ImageSize, p.ImageSize, p.TokensPerItem)
	case p.Items > 0:
		what += fmt.Sprintf(" at %d×%d", p.ImageSize, p.ImageSize)
	}
	return fmt.Sprintf("vLLM profiles the vision encoder before sizing the KV cache: %s in one call (encoder budget %d tokens), "+
		"its peak %s GiB, and %s GiB of pixels and outputs (padded to the budget) held through the language model's dummy run; "+
		"--limit-mm-per-prompt, --mm-processor-kwargs max_pixels or --skip-mm-profiling change it (the tower's activations are transformers' ops with flash attention)",
		what, p.Budget, formatGiB(p.Encoder), formatGiB(p.Held))
}
