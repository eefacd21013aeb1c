package vram

import (
	"fmt"
	"strings"
)

// A vision tower under a serving engine's tensor parallelism. vLLM 0.11.0
// splits the tower's and the projector's weights over the TP ranks by
// default (mm_encoder_tp_mode "weights", config/multimodal.py l.14, 58):
// every rank runs every patch, with its heads (heads / tp) and its share
// of the MLP's width.
//   - Qwen2-VL, Qwen2.5-VL and Qwen3-VL (qwen2_5_vl.py l.225-238, 287-330,
//     503-547; qwen2_vl.py l.220-230, 305-358; qwen3_vl.py l.134-182,
//     210-256): the qkv projection is column-parallel, and split_qkv
//     all-gathers it to full width on every rank (all_gather_interleave,
//     l.248-264: the gathered pieces, then their interleaved cat) before
//     each rank takes its heads' slices; proj and the MLP's down
//     projection are row-parallel (all-reduced to full width); the
//     mergers' first linear is column-parallel, their second row-parallel.
//   - CLIP (LLaVA; clip.py l.111-166, llava.py l.107-117): qkv, fc1 and
//     the projector's linear_1 column-parallel without a gather; out_proj,
//     fc2 and linear_2 row-parallel.
//   - SigLIP (Gemma 3; siglip.py l.163-230) and Pixtral (Mistral 3;
//     pixtral.py l.1013-1115) as CLIP; Gemma 3's projector is a plain
//     parameter, whole on every rank (gemma3_mm.py l.419-456), and Mistral
//     3's patch merger a plain nn.Linear before its split linear_1 and
//     linear_2 (mistral3.py l.70-145).
//   - Llama 4 (mllama4.py): qkv column-parallel without a gather, o_proj
//     and fc2 row-parallel, fc1 column-parallel (l.95-133, 217-283); the
//     patch embedding's linear column-parallel, its output gathered
//     (l.403-430); the vision adapter's fc1 and fc2 as the blocks' MLP
//     (l.170-213); the projector's linear_1 column-parallel, gathered
//     (l.137-157), and split in data mode too, where only the vision
//     model runs whole (l.719, 733-750).
// The residual stream, the norms, the patch embedding and the position
// tables stay whole on every rank. vLLM asserts that the degree divides
// what it splits (layers/linear.py l.622, distributed/utils.py divide).
//
// With --mm-encoder-tp-mode data, a model that supports it
// (supports_encoder_tp_data: the Qwen-VL models, qwen2_5_vl.py l.988,
// 1004; Llama 4, mllama4.py l.719) keeps the whole tower and projector on
// every rank (disable_tp) and shares the images out among the ranks,
// largest first to the least loaded (run_dp_sharded_mrope_vision_model,
// vision.py l.166-300; Llama 4's tiles in equal shares,
// run_dp_sharded_vision_model, l.133-163); the outputs are all-gathered.
// Another model falls back to "weights" with a warning (config/model.py
// l.605-610).
//
// The engine builds the tower with that degree (towerPlan: its blockPlan's
// tp), and the projector divides its inner width by resolved.towerTP.

// vllmTower is how vLLM runs a vision-language family's tower under TP.
type vllmTower struct {
	split bool // weights mode: tower and projector split over the ranks
	data  bool // supports_encoder_tp_data: data mode runs the tower whole
	// wholeProjector: the projector matrices, by name, that vLLM keeps
	// whole on every rank while it splits the rest.
	wholeProjector []string
	// splitOther: the tower's matrices outside its blocks' attention and
	// MLP, by name, that vLLM splits too.
	splitOther []string
	// projectorSplitInData: data mode keeps the projector split.
	projectorSplitInData bool
	// widths lists what vLLM divides by the degree when it splits the
	// tower (nil: the heads, the MLP's width and a merger's width).
	widths func(tower Model) []towerWidth
}

// vllmTowers are the families whose towers vLLM splits, by model_type
// (the sources above); any other tower runs whole.
var vllmTowers = map[string]vllmTower{
	llavaModelType:      {split: true},
	gemma3ModelType:     {split: true, wholeProjector: []string{"mm_input_projection_weight"}},
	mistral3ModelType:   {split: true, wholeProjector: []string{"patch_merger.merging_layer"}},
	qwen25VLModelType:   {split: true, data: true},
	qwen3VLModelType:    {split: true, data: true},
	qwen3VLMoeModelType: {split: true, data: true},
	llama4ModelType: {split: true, data: true, projectorSplitInData: true, widths: llama4TowerWidths,
		splitOther: []string{"patch_embedding.linear", "vision_adapter.mlp.fc1", "vision_adapter.mlp.fc2"}},
}

// llama4TowerWidths: the heads, the blocks' MLP, the patch embedding's
// output and the adapter's inner width (mllama4.py l.95-133, 170-213,
// 217-283, 403-430).
func llama4TowerWidths(tw Model) []towerWidth {
	ws := []towerWidth{{"num_attention_heads", tw.Heads}, {"intermediate_size", tw.FFN}, {"hidden_size", tw.Hidden}}
	if tw.Image != nil {
		ws = append(ws, towerWidth{"projector_input_dim", tw.Image.AdapterDim})
	}
	return ws
}

// vllmTowerOf is how vLLM runs m's tower (the zero value without one).
func vllmTowerOf(m Model) vllmTower {
	if m.Vision == nil {
		return vllmTower{}
	}
	return vllmTowers[m.Vision.Family]
}

// towerShard is the degree a tower's blocks split their heads and MLP over
// (the tower plan's tp: 1 outside a serving engine that splits it).
func towerShard(p blockPlan) int64 { return max(1, p.tp) }

// projectorShard is the degree the wrapper's projector splits its inner
// width over, in the language model's builder.
func (r *resolved) projectorShard() int64 { return int64(max(1, r.towerTP)) }

// qkvAllGather is split_qkv's all-gather of a column-parallel fused qkv
// (this rank's heads, qkv) to the full width 3·h on every rank: the
// gathered pieces, then their interleaved cat, whose slices the rank
// keeps (qwen2_5_vl.py l.248-264, 311-330).
func qkvAllGather(b *actBuilder, qkv *actT, h int64) *actT {
	g := b.op("attn.qkv.all_gather", b.size(3*h, qkv.dtype), qkv.dtype, list(qkv))
	return b.op("attn.qkv.interleave", b.size(3*h, qkv.dtype), qkv.dtype, list(g))
}

// towerWidth is a width of the tower that vLLM splits, by its config name.
type towerWidth struct {
	what string
	n    int
}

// checkTowerTP says where tp does not divide what vLLM splits of m's
// tower and projector (it fails to load the model there).
func checkTowerTP(m Model, tp int) error {
	v, vt := m.Vision, vllmTowerOf(m)
	if tp <= 1 || v == nil || !vt.split {
		return nil
	}
	tw := v.Tower
	checks := []towerWidth{{"num_heads", tw.Heads}, {"intermediate_size", tw.FFN}}
	if im := tw.Image; im != nil && im.Merge > 1 && len(vt.wholeProjector) == 0 {
		checks = append(checks, towerWidth{"merger width (hidden_size × spatial_merge_size²)", tw.Hidden * im.Merge * im.Merge})
	}
	if vt.widths != nil {
		checks = vt.widths(tw)
	}
	for _, c := range checks {
		if c.n%tp != 0 {
			return fmt.Errorf("vllm: tensor_parallel_size = %d does not divide the vision tower's %s = %d, which vLLM splits over the ranks by default (--mm-encoder-tp-mode weights; it asserts the division when it loads the model)", tp, c.what, c.n)
		}
	}
	return nil
}

// towerData reports whether vLLM runs m's tower data-parallel: asked for,
// over more than one rank, and supported by the model.
func (v VLLM) towerData(m Model) bool {
	return v.MMEncoderTPMode == "data" && v.TP > 1 && vllmTowerOf(m).data
}

// towerModeNote says how the carve runs the tower of m under TP: whole on
// every rank (data), or data asked for where vLLM falls back to weights.
func (v VLLM) towerModeNote(m Model) string {
	w := m.visionWrapperOf()
	switch {
	case w == nil || v.TP <= 1 || v.MMEncoderTPMode != "data":
		return ""
	case v.towerData(m) && w.tiles > 0:
		return fmt.Sprintf("vLLM's --mm-encoder-tp-mode data: every rank holds the whole vision tower (the projector stays split) and encodes an equal share of the images' tiles (⌈tiles / %d⌉ of them)", v.TP)
	case v.towerData(m):
		return fmt.Sprintf("vLLM's --mm-encoder-tp-mode data: every rank holds the whole vision tower and projector and encodes its share of the images (the profile's busiest rank, ⌈items / %d⌉ of them)", v.TP)
	}
	return "vLLM's --mm-encoder-tp-mode data: this model does not support it (supports_encoder_tp_data), so vLLM falls back to weights, which the carve follows"
}

// splitsProjector reports whether t, a matrix of the wrapper's projector
// (the Qwen-VL mergers, LLaVA's linear_1 and linear_2, whose role is
// "other" and which Tensor.IsLinear leaves whole), is split over vLLM's
// TP ranks in weights mode, as its tower is.
func (in Inference) splitsProjector(t Tensor) bool {
	if t.part != projectorPart || len(t.Shape) != 2 || in.runtime != runVLLM || in.TP <= 1 {
		return false
	}
	vt := vllmTowerOf(in.Model)
	if !vt.split || in.towerWhole && !vt.projectorSplitInData {
		return false
	}
	for _, whole := range vt.wholeProjector {
		if strings.Contains(t.Name, whole) {
			return false
		}
	}
	return true
}

// splitsTowerMatrix reports whether t is one of the tower's matrices
// outside its blocks' attention and MLP that vLLM splits in weights mode
// (vllmTower.splitOther).
func (in Inference) splitsTowerMatrix(t Tensor) bool {
	if t.part != towerPart || len(t.Shape) != 2 || in.runtime != runVLLM || in.towerWhole || in.TP <= 1 {
		return false
	}
	for _, name := range vllmTowerOf(in.Model).splitOther {
		if strings.Contains(t.Name, name) {
			return true
		}
	}
	return false
}
