package vram

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Speculative decoding in vLLM (--speculative-config), as vLLM 0.33.0
// builds it (paths inside the release's vllm package; the older releases'
// rules are in their rows of vllmSpecReleases):
//
//   - "mtp" (and the per-model names config/speculative.py:38-67 lists,
//     which __post_init__ maps to "mtp", l.1246-1251) takes the draft from
//     the served checkpoint itself (model = the target's, l.1252-1268, its
//     quantization too): hf_config_override (l.710-1170) rewrites the
//     target's config to the family's MTP architecture with n_predict =
//     the checkpoint's MTP layer count (num_nextn_predict_layers, or
//     mtp_num_hidden_layers for Qwen3.5, l.989-1010; MiMo-V2-Flash's
//     first layer only, l.834-847 and mimo_v2_mtp.py:51-54). The draft
//     builds those n_predict layers — each one of the target's decoder
//     layers with enorm, hnorm, eh_proj [hidden, 2·hidden] and a final
//     norm (deepseek_mtp.py:76-171) — and reuses them round robin for
//     num_speculative_tokens steps (spec_step_idx % num_mtp_layers,
//     l.217). Its embedding and output layer are the target's: the MTP
//     classes declare no has_own_embed_tokens / has_own_lm_head, so
//     load_eagle_model shares both and drops the draft's copies
//     (v1/worker/gpu/spec_decode/eagle/utils.py:17-34, 72-130). Its
//     attention layers register in the same forward context, so their
//     KV cache specs — the target's own spec, MLA for DeepSeek — join
//     the pool (v1/worker/gpu/spec_decode/speculator.py:184-199,
//     model_runner.py:608-620).
//   - "eagle", "eagle3" and "draft_model" load the model "model" names:
//     an EAGLE head shares the target's embedding unless its checkpoint
//     carries its own (eagle/utils.py:17-34, models/utils.py:1190-1198);
//     a draft model (standalone_ar/speculator.py:101-129) is loaded whole,
//     unquantized unless told (quant_config=None). Their attention layers
//     join the pool; a layer of another page size sits in the same group
//     when all the layers are full attention
//     (UniformTypeKVCacheSpecs, v1/kv_cache_interface.py:1291-1372,
//     kv_cache_planning.py:1139-1148), the group's page the sum of its
//     layers' pages.
//   - "ngram" and "suffix" load no model and add no cache layer.
//
// The proposer's buffers (Model Runner V2: spec_decode/speculator.py:
// 117-175, target_dependent_ar/speculator.py:33-47,
// multi_module_mtp/speculator.py:13-71, standalone_ar/speculator.py:
// 40-64, ngram/speculator.py:157-208; the runner's draft-token table,
// states.py:75-80) are allocated when the runner is built, before the
// memory profile, and so come off the KV cache. The profile run runs the
// drafter's dummy forward after the target's, over the same tokens
// (model_runner.py:947-985, called from profile_run l.1022-1049).
// Recurrent layers keep num_speculative_tokens more state blocks a
// request (layers/mamba/abstract.py:72-91, kv_cache_interface.py:
// 1135-1141). CUDA graphs are captured for uniform decode batches of
// 1 + num_speculative_tokens tokens a request (config/vllm.py:695-713,
// 2398-2606).

// SpeculativeConfig is --speculative-config, with the fields vLLM's JSON
// names: method, num_speculative_tokens and model. Model is a catalog
// name, a model's fields, {"hf_config": …} or {"checkpoint": …}, as a
// plan's top-level "model" takes them: the draft for "eagle", "eagle3" and
// "draft_model" (a plan reads it into VLLM.Draft). For "mtp" it is left
// out: the draft is the served checkpoint's own MTP layers.
type SpeculativeConfig struct {
	Method               string   `json:"method,omitempty"`
	NumSpeculativeTokens int      `json:"num_speculative_tokens,omitempty"`
	Model                ModelRef `json:"model,omitempty"`
}

// ModelRef is a model as a plan names it (DecodeModel reads it), kept as
// written: a catalog name or hub id, the model's fields, {"hf_config": …}
// or {"checkpoint": …}.
type ModelRef []byte

// MarshalJSON writes the model as it was given.
func (r ModelRef) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// UnmarshalJSON keeps the model as written.
func (r *ModelRef) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// JSONWant says what the field takes, for a plan's errors.
func (ModelRef) JSONWant() string {
	return "a model: a catalog name, the model's fields, {\"hf_config\": …} or {\"checkpoint\": …}"
}

// modelName is Model as a string ("" for an object or none).
func (s SpeculativeConfig) modelName() string {
	var name string
	if raw := bytes.TrimSpace(s.Model); len(raw) > 0 && raw[0] == '"' {
		_ = json.Unmarshal(raw, &name)
	}
	return name
}

// vllmSpecRules is one release's speculative decoding, as the carve
// models it.
type vllmSpecRules struct {
	// methods are vLLM's SpeculativeMethod names besides the per-model MTP
	// names; mtpNames those it maps to "mtp".
	methods, mtpNames []string
	// modelled are the methods the carve models for the release.
	modelled []string
	// refused are vLLM's own refusals of a method, in its words.
	refused map[string]string
	// unmapped is vLLM's refusal of "mtp" for a family it has no MTP
	// draft for.
	unmapped string
	// v2: Model Runner V2's speculators and their buffers; else Model
	// Runner V1's EagleProposer (v1/spec_decode/eagle.py).
	v2 bool
	// v1Runner are the methods Model Runner V2 does not run, for which
	// the release runs Model Runner V1 and its sampler (no V2 tables).
	v1Runner []string
	// statePages: recurrent layers keep num_speculative_tokens more state
	// blocks a request.
	statePages bool
	// mapsUnlisted: the release maps vllmMTPUnlisted's families to their
	// MTP drafts.
	mapsUnlisted bool
	source       string
}

// mtpNames33 are vLLM 0.33's MTPModelTypes (config/speculative.py:38-67).
var mtpNames33 = []string{"deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp",
	"ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp",
	"bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp",
	"hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp"}

// mtpNames34 are vLLM 0.34's MTPModelTypes (config/speculative.py:53-83):
// 0.33's and nemotron3_5_transcribe_mtp.
var mtpNames34 = append(slices.Clone(mtpNames33), "nemotron3_5_transcribe_mtp")

// draftModelRefused is 0.11.0's and 0.14.1's refusal of a separate draft
// model (engine/arg_utils.py:1485-1489 in 0.11.0, l.1792-1797 in 0.14.1).
const draftModelRefused = "NotImplementedError: Draft model speculative decoding is not supported yet. Please consider using other speculative decoding methods such as ngram, medusa, eagle, or mtp."

var (
	spec0092 = vllmSpecRules{
		methods: []string{"ngram", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model", "deepseek_mtp"},
		source:  "vllm 0.9.2: config.py:2434-2435 (SpeculativeMethod); its proposers' memory was not read: no method is modelled for 0.9.2",
	}
	spec0110 = vllmSpecRules{
		methods:  []string{"ngram", "medusa", "eagle", "eagle3", "mtp", "draft_model"},
		modelled: []string{"ngram", "eagle", "eagle3"},
		refused:  map[string]string{"draft_model": draftModelRefused},
		source:   "vllm 0.11.0: engine/arg_utils.py:1477-1489 (draft_model refused); v1/worker/gpu_model_runner.py:280-294 (ngram on the CPU, EagleProposer), 4112-4118 (no Mamba beside a draft but Qwen3-Next's); v1/spec_decode/eagle.py:63-118 (the proposer's buffers). Its config/speculative.py, which maps a family to its MTP draft, was not among the sources read: mtp is not modelled for 0.11.0",
	}
	spec0141 = vllmSpecRules{
		methods: []string{"ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3"},
		mtpNames: []string{"deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp", "exaone_moe_mtp", "qwen3_next_mtp", "longcat_flash_mtp", "mtp",
			"pangu_ultra_moe_mtp"},
		modelled: []string{"mtp", "eagle", "eagle3", "ngram", "suffix"},
		refused:  map[string]string{"draft_model": draftModelRefused},
		unmapped: "NotImplementedError: Speculative decoding with draft model is not supported yet. Please consider using other speculative decoding methods such as ngram, medusa, eagle, or mtp.",
		source:   "vllm 0.14.1: config/speculative.py:31-50 (methods), 170-245 (the MTP drafts), 253-258 (MTP names → mtp), 353-394 (detection; a family without an MTP draft refused), 430-440 (n_predict); engine/arg_utils.py:1785-1797 (draft_model refused); v1/worker/gpu_model_runner.py:438-452 (ngram and suffix on the CPU, EagleProposer); v1/spec_decode/eagle.py:74-160 (the proposer's buffers), 1057-1160 (embedding and lm_head shared)",
	}
	// spec0340 is 0.33's but for suffix decoding, which runs on Model
	// Runner V2 (V1 is removed) with a GPU corpus and hash tables
	// (suffix_decoding_corpus_tokens, 1 << 20 by default), not modelled.
	spec0340 = vllmSpecRules{
		methods:      []string{"ngram", "draft_model", "suffix", "eagle", "eagle3", "extract_hidden_states", "dflash", "ngram_gpu", "dspark"},
		mtpNames:     mtpNames34,
		modelled:     []string{"mtp", "eagle", "eagle3", "draft_model", "ngram", "ngram_gpu"},
		unmapped:     "vLLM 0.34.0's hf_config_override maps no MTP draft for it (config/speculative.py:800-1160)",
		v2:           true,
		statePages:   true,
		mapsUnlisted: true,
		source:       "vllm 0.34.0: config/speculative.py:53-97 (methods; custom_class replaced by registered methods, v1/worker/gpu/spec_decode/speculator_config.py:336-338), 455 (num_speculative_tokens > 0), 800-1160 (the MTP drafts), 1370-1392 (method detection); v1/worker/gpu/spec_decode/speculator.py:151-245, autoregressive/speculator.py:23-33, target_dependent_ar/speculator.py:30-40, multi_module_mtp/speculator.py:28-70, standalone_ar/speculator.py:41-58, 85-101, ngram/speculator.py:151-205 (the buffers, as 0.33's); suffix/speculator.py:500-600, suffix/config.py:14-40 (suffix on the GPU, not modelled); v1/worker/gpu/states.py:76; platforms/interface.py:1480-1493 (Model Runner V1 removed); model_executor/layers/mamba/abstract.py:79-95",
	}
	spec0330 = vllmSpecRules{
		methods:      []string{"ngram", "draft_model", "suffix", "custom_class", "eagle", "eagle3", "extract_hidden_states", "dflash", "ngram_gpu", "dspark"},
		mtpNames:     mtpNames33,
		modelled:     []string{"mtp", "eagle", "eagle3", "draft_model", "ngram", "ngram_gpu", "suffix"},
		unmapped:     "NotImplementedError: Unsupported speculative method: 'mtp'",
		v2:           true,
		v1Runner:     []string{"suffix", "custom_class"},
		statePages:   true,
		mapsUnlisted: true,
		source:       "vllm 0.33.0: config/speculative.py:38-83 (methods), 413 (num_speculative_tokens > 0), 710-1170 (the MTP drafts), 1236-1294 (method and model defaults), 1440-1501 (detection), 1582-1618 (n_predict), 1726-1738 (suffix: 24 tokens), 1946-1951; config/vllm.py:612-675, 695-713, 2341-2376, 2398-2606, 3053-3082 (suffix on Model Runner V1); v1/worker/gpu/spec_decode/__init__.py:14-94, speculator.py:110-185, target_dependent_ar/speculator.py:33-60, multi_module_mtp/speculator.py:13-71, standalone_ar/speculator.py:38-64, 101-129, ngram/speculator.py:157-208, eagle/utils.py:17-130; v1/worker/gpu/states.py:75-80; v1/worker/gpu/model_runner.py:298-305, 385-432, 839-985, 1022-1049; model_executor/layers/mamba/abstract.py:72-91",
	}
)

// vllmMTPDraft is a family whose checkpoints carry MTP layers that vLLM
// loads as the draft for "mtp".
type vllmMTPDraft struct {
	arch string // the draft's architecture
	// releases are the modelled releases that map the family to it.
	releases []string
	// first: vLLM builds the first MTP layer only, whatever the checkpoint
	// holds.
	first bool
	// sliding: the MTP layer's attention is a sliding-window layer.
	sliding bool
	source  string
}

// vllmMTPDrafts are the families the carve sizes an MTP draft for: their
// MTP layers are listed with the checkpoint's stored-only tensors
// (storedOnly).
var vllmMTPDrafts = map[string]vllmMTPDraft{
	deepseekV3ModelType: {arch: "DeepSeekMTPModel", releases: []string{"0.14.1", "0.33.0", "0.34.0"},
		source: "0.33.0 config/speculative.py:748-762, models/deepseek_mtp.py:147-171; 0.34.0 config/speculative.py:847-861; 0.14.1 config/speculative.py:172-178"},
	deepseekV32ModelType: {arch: "DeepseekV32MTPModel", releases: []string{"0.14.1", "0.33.0", "0.34.0"},
		source: "0.33.0 config/speculative.py:732, 748-762 (the MTP layer's attention has its indexer, deepseek_mtp.py:89-110); 0.34.0 config/speculative.py:847-861; 0.14.1 config/speculative.py:172-178"},
	glmMoeDsaModelType: {arch: "DeepseekV32MTPModel", releases: []string{"0.33.0", "0.34.0"},
		source: "0.33.0 config/speculative.py:732, 748-762; 0.34.0 l.847-861"},
	glm4MoeModelType: {arch: "Glm4MoeMTPModel", releases: []string{"0.14.1", "0.33.0", "0.34.0"},
		source: "0.33.0 config/speculative.py:849-857, models/glm4_moe_mtp.py:136-160; 0.34.0 config/speculative.py:947-955; 0.14.1 config/speculative.py:198-206"},
	glm4MoeLiteModelType: {arch: "Glm4MoeLiteMTPModel", releases: []string{"0.33.0", "0.34.0"},
		source: "0.33.0 config/speculative.py:859-868; 0.34.0 l.957-966"},
	mimoV2FlashModelType: {arch: "MiMoV2MTPModel", releases: []string{"0.33.0", "0.34.0"}, first: true, sliding: true,
		source: "0.33.0 config/speculative.py:834-847 (n_predict 1), models/mimo_v2_mtp.py:51-54 (only the first MTP layer), 86-96 (its sliding-window attention); 0.34.0 config/speculative.py:929-945, mimo_v2_mtp.py unchanged"},
	qwen35TextModelType: {arch: "Qwen3_5MTP", releases: []string{"0.33.0", "0.34.0"},
		source: "0.33.0 config/speculative.py:989-1010 (mtp_num_hidden_layers), models/qwen3_5_mtp.py:82-124; 0.34.0 config/speculative.py:1104-1123"},
	qwen35MoeTextModelType: {arch: "Qwen3_5MoeMTP", releases: []string{"0.33.0", "0.34.0"},
		source: "0.33.0 config/speculative.py:989-1010 (mtp_num_hidden_layers), models/qwen3_5_mtp.py:82-124; 0.34.0 config/speculative.py:1104-1123"},
}

// vllmMTPUnlisted are families vLLM maps to an MTP draft whose MTP layers
// the carve does not list (vllmSpecRules.mapsUnlisted: 0.33 and 0.34).
var vllmMTPUnlisted = map[string]string{
	nemotronHModelType:  "config/speculative.py:895-906 in 0.33.0, l.1016-1023 in 0.34.0 (NemotronHMTPModel); the carve does not list the checkpoint's mtp.* layers",
	ernie45MoeModelType: "config/speculative.py:880-886 in 0.33.0, l.978-984 in 0.34.0 (ErnieMTPModel); the carve does not list its MTP layers",
	exaoneMoeModelType:  "config/speculative.py:975-979 in 0.33.0, l.1091-1096 in 0.34.0 (ExaoneMoeMTP); the carve does not list its MTP layer",
	qwen3NextModelType:  "config/speculative.py:908-914 in 0.33.0, l.1025-1031 in 0.34.0 (Qwen3NextMTP); the carve does not list its MTP layers",
}

// method is the method vLLM runs: as given, a model's MTP name as "mtp"
// (config/speculative.py:1246-1251), none as "ngram" for the model
// "ngram" and else "draft_model" (l.1241-1244), and a draft_model named
// like an EAGLE head that head (l.1440-1448).
func (s SpeculativeConfig) method(r vllmSpecRules) string {
	name, method := s.modelName(), s.Method
	switch {
	case method == "" && (name == "ngram" || name == "[ngram]"), method == "[ngram]":
		return "ngram"
	case method == "":
		method = "draft_model"
	case slices.Contains(r.mtpNames, method):
		return "mtp"
	}
	if lower := strings.ToLower(name); method == "draft_model" && len(s.Model) > 0 {
		switch {
		case strings.Contains(lower, "eagle-"):
			return "eagle"
		case strings.Contains(lower, "eagle3"):
			return "eagle3"
		}
	}
	return method
}

// vllmSpec is a launch's speculative decoding, resolved.
type vllmSpec struct {
	method string
	k      int // num_speculative_tokens
	// nPredict is the MTP layers the draft builds (mtp).
	nPredict int
	mtp      vllmMTPDraft
	// draft is the separate draft model (eagle, eagle3, draft_model).
	draft *Model
	rules vllmSpecRules
}

// loadsModel: the method loads a model (its weights and attention layers).
func (s *vllmSpec) loadsModel() bool {
	return s != nil && (s.method == "mtp" || s.draft != nil)
}

// spec resolves the launch's speculative decoding as the release's
// SpeculativeConfig does (nil without one), refusing what vLLM refuses
// in its words and what the carve does not model.
func (v VLLM) spec(m Model, rel vllmRelease) (*vllmSpec, error) {
	s := v.Speculative
	if s == nil {
		if v.Draft != nil {
			return nil, fmt.Errorf(`vllm: a draft model (VLLM.Draft) needs speculative_config: its method (eagle, eagle3 or draft_model) and num_speculative_tokens`)
		}
		return nil, nil
	}
	r := rel.spec
	name, method := s.modelName(), s.method(r)
	if !slices.Contains(r.methods, method) && !(method == "mtp" && len(r.mtpNames) > 0) {
		return nil, fmt.Errorf("vllm: speculative_config.method %q is not one of vLLM %s's methods (%s, or a model's MTP name)", s.Method, rel.Version, strings.Join(r.methods, ", "))
	}
	if why, ok := r.refused[method]; ok {
		return nil, fmt.Errorf("vllm: speculative_config method %s: %s (vLLM %s; %s)", method, why, rel.Version, r.source)
	}
	if !slices.Contains(r.modelled, method) {
		return nil, fmt.Errorf("vllm: speculative_config method %s is not modelled for vLLM %s (modelled: %s; %s)", method, rel.Version, strings.Join(r.modelled, ", "), r.source)
	}
	k := s.NumSpeculativeTokens
	switch {
	case k < 0:
		return nil, fmt.Errorf("vllm: speculative_config.num_speculative_tokens must be greater than 0 (Field(gt=0), config/speculative.py:413), got %d", k)
	case k > maxSpeculativeTokens:
		return nil, fmt.Errorf("vllm: speculative_config.num_speculative_tokens %d: the carve takes at most %d", k, maxSpeculativeTokens)
	case k == 0 && method == "suffix":
		k = 24 // suffix_decoding_max_tree_depth, l.1732-1738
	case k == 0 && len(s.Model) > 0 && method != "ngram":
		return nil, fmt.Errorf("vllm: speculative_config.num_speculative_tokens: ValueError: A speculative model was provided, but `num_speculative_tokens` was not provided (config/speculative.py:1614-1618)")
	case k == 0:
		return nil, fmt.Errorf("vllm: speculative_config.num_speculative_tokens: ValueError: num_speculative_tokens must be provided with speculative model unless the draft model config contains an n_predict parameter. (config/speculative.py:1946-1951)")
	}
	sp := &vllmSpec{method: method, k: k, rules: r}
	switch method {
	case "mtp":
		if len(s.Model) > 0 || v.Draft != nil {
			return nil, fmt.Errorf("vllm: speculative_config.model with method mtp: the carve takes the draft from the served checkpoint's own MTP layers, as vLLM does when model is left out (config/speculative.py:1252-1268); leave model out")
		}
		if err := sp.mtpDraft(m, rel); err != nil {
			return nil, err
		}
	case "eagle", "eagle3", "draft_model":
		if v.Draft == nil {
			return nil, fmt.Errorf(`vllm: speculative_config.model: method %s loads a draft model: give it as a catalog name or the model's fields (a hub id such as "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" is read only through {"checkpoint": …} or hf://)`, method)
		}
		d := v.Draft.Normalize()
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("vllm: speculative_config.model: %w", err)
		}
		if method == "draft_model" && d.Vocab != m.Vocab {
			// verify_equal_vocab_size_if_draft_model, l.2040-2056.
			return nil, fmt.Errorf("vllm: speculative_config.model: ValueError: Target and draft model should have the same vocabulary size. Target model vocab_size=%d. Draft model vocab_size=%d. Using models with different tokenizers can cause out-of-bounds errors during speculative decoding.", m.Vocab, d.Vocab)
		}
		if d.recurrent() || d.Compressed != nil || d.Encoder() || d.EncoderDecoder() {
			return nil, fmt.Errorf("vllm: speculative_config.model: a %q draft is not modelled (the carve pools a draft's attention layers only)", d.Family)
		}
		sp.draft = &d
	default: // ngram, ngram_gpu, suffix: no model
		if len(s.Model) > 0 && name != method && name != "[ngram]" || v.Draft != nil {
			return nil, fmt.Errorf("vllm: speculative_config.model: method %s loads no model; leave model out", method)
		}
	}
	if v.PP > 1 && sp.loadsModel() {
		return nil, fmt.Errorf("vllm: speculative_config with pipeline_parallel_size %d: vLLM puts the draft on the last stage (model_runner.py:298-305), which the carve, one stage's, does not model", v.PP)
	}
	if m.Compressed != nil && sp.loadsModel() {
		return nil, fmt.Errorf("vllm: DeepSeek-V4's cache is modelled without a draft (its MTP layer adds a sliding-window layer to the compressed groups, config/speculative.py:763-775)")
	}
	if m.recurrent() {
		switch {
		case rel.Version == "0.11.0" && m.Family != qwen3NextModelType:
			return nil, fmt.Errorf("vllm: %q keeps recurrent state: NotImplementedError: Mamba with speculative decoding is not supported yet. (vLLM 0.11.0 v1/worker/gpu_model_runner.py:4112-4118)", m.Family)
		case !r.statePages:
			return nil, fmt.Errorf("vllm: %q keeps recurrent state: speculative decoding beside it is modelled for vLLM 0.33 only (its extra state blocks, layers/mamba/abstract.py:72-91)", m.Family)
		case sp.draft != nil:
			return nil, fmt.Errorf("vllm: %q keeps recurrent state: a separate draft model beside it is not modelled (its layers would change the hybrid's page alignment); its own MTP layers (method mtp) and n-gram methods are", m.Family)
		}
	}
	if la := sp.lookahead(); la > 0 && v.MaxNumBatchedTokens > 0 && v.MaxNumBatchedTokens <= la {
		return nil, fmt.Errorf("vllm: ValueError: VllmConfig does not have enough slots to schedule a token and support the speculative decoding settings. Got max_num_batched_tokens=%d and num_lookahead_tokens=%d. (config/vllm.py:2370-2376)", v.MaxNumBatchedTokens, la)
	}
	return sp, nil
}

// maxSpeculativeTokens bounds num_speculative_tokens.
const maxSpeculativeTokens = 1024

// lookahead is num_lookahead_tokens: the KV slots the drafter writes past
// the target's tokens (config/vllm.py:624-652).
func (s *vllmSpec) lookahead() int {
	if s == nil || s.method == "ngram" || s.method == "ngram_gpu" || s.method == "suffix" {
		return 0
	}
	return s.k
}

// mtpDraft sets the MTP draft of m's family as the release maps it.
func (s *vllmSpec) mtpDraft(m Model, rel vllmRelease) error {
	if rel.Version == "0.11.0" {
		return fmt.Errorf("vllm: speculative_config method mtp is not modelled for vLLM 0.11.0 (%s)", rel.spec.source)
	}
	family := m.Family
	d, ok := vllmMTPDrafts[family]
	if why, listed := vllmMTPUnlisted[family]; listed && rel.spec.mapsUnlisted {
		return fmt.Errorf("vllm: speculative_config method mtp: vLLM %s builds %s's MTP draft (%s), which is not modelled", rel.Version, family, why)
	}
	if m.Compressed != nil {
		return fmt.Errorf("vllm: DeepSeek-V4's cache is modelled without a draft (its MTP layer adds a sliding-window layer to the compressed groups, config/speculative.py:763-775)")
	}
	if !ok || !slices.Contains(d.releases, rel.Version) {
		return fmt.Errorf("vllm: speculative_config method mtp: %s (vLLM %s has no MTP draft for %q: config/speculative.py's hf_config_override leaves its config as it is, and the draft is refused; %s)", rel.spec.unmapped, rel.Version, family, rel.spec.source)
	}
	n := m.MTPLayers
	if n < 1 {
		return fmt.Errorf("vllm: speculative_config method mtp: the checkpoint has no MTP layers (model.mtp_layers, num_nextn_predict_layers, is 0), so vLLM's %s has none to load", d.arch)
	}
	if d.first {
		n = 1
	}
	if s.k > n && s.k%n != 0 {
		// l.1604-1611: MTP modules are reused round robin.
		return fmt.Errorf("vllm: speculative_config.num_speculative_tokens: ValueError: num_speculative_tokens:%d must be divisible by n_predict=%d", s.k, n)
	}
	s.nPredict, s.mtp = n, d
	return nil
}

// multiModule: several MTP modules chained (use_multi_module_mtp,
// config/speculative.py:2188-2194).
func (s *vllmSpec) multiModule() bool {
	return s.method == "mtp" && min(s.nPredict, s.k) > 1
}

// kvLayers are the draft's attention layers in the pool, by kind, and
// their page (0: the target's).
func (v VLLM) specKinds(s *vllmSpec, m Model) ([]VLLMGroup, Bytes) {
	switch {
	case s == nil:
		return nil, 0
	case s.method == "mtp":
		k := VLLMGroup{Kind: "full", Layers: s.nPredict}
		if s.mtp.sliding && m.SlidingWindow > 0 && !v.DisableHybridKVCache {
			k = VLLMGroup{Kind: "sliding_window", Span: m.SlidingWindow, Layers: s.nPredict}
		}
		return []VLLMGroup{k}, 0
	case s.draft != nil:
		return v.layerKinds(*s.draft, s.draft.Layers), v.pageBytes(*s.draft)
	}
	return nil, 0
}

// mergeKinds adds the draft's kinds to the target's: a kind the target has
// gains the layers, a new one goes before the recurrent state.
func mergeKinds(kinds, draft []VLLMGroup) []VLLMGroup {
	out := slices.Clone(kinds)
	for _, d := range draft {
		i := slices.IndexFunc(out, func(k VLLMGroup) bool { return k.Kind == d.Kind && k.Span == d.Span })
		switch {
		case i >= 0:
			out[i].Layers += d.Layers
		case len(out) > 0 && out[len(out)-1].Kind == "mamba":
			out = slices.Insert(out, len(out)-1, d)
		default:
			out = append(out, d)
		}
	}
	return out
}

// specWeights are the draft's weights on one GPU: the MTP layers vLLM
// loads from the checkpoint, less the embedding and output layer it
// shares with the target; or the draft model's, an EAGLE head's
// embedding shared where its shape is the target's.
func (s *vllmSpec) weights(rin Inference, m Model, in Inference) (Bytes, error) {
	switch {
	case s == nil:
		return 0, nil
	case s.method == "mtp":
		return mtpLayerBytes(rin, m, s.nPredict), nil // mtp_draft.go
	case s.draft != nil:
		din := Inference{Model: *s.draft, Batch: 1, PromptTokens: 1, TP: in.TP, PP: 1, Cache: "paged",
			runtime: in.runtime, cc: in.cc, mxfp4: in.mxfp4}
		rd, dm, err := din.resolve()
		if err != nil {
			return 0, fmt.Errorf("vllm: speculative_config.model: %w", err)
		}
		b := rd.weightBytes(dm)
		if s.sharesEmbedding(m) {
			for _, t := range dm.tensors() {
				if t.Role == "embedding" && !t.head {
					b -= rd.tensorBytes(t)
				}
			}
		}
		return b, nil
	}
	return 0, nil
}

// sharesEmbedding: an EAGLE head of the target's vocabulary and width
// takes the target's embedding (eagle/utils.py:17-34, 45-69: shared unless
// its checkpoint carries embed_tokens, models/utils.py:1190-1198, which
// the carve takes EAGLE checkpoints not to).
func (s *vllmSpec) sharesEmbedding(m Model) bool {
	d := s.draft
	return (s.method == "eagle" || s.method == "eagle3") && d != nil && !d.TiedEmbeddings && d.Vocab == m.Vocab && d.Hidden == m.Hidden
}

// hidden is the proposer's hidden width: the draft's
// (draft_model_config.get_hidden_size()).
func (s *vllmSpec) hidden(m Model) int64 {
	if s.draft != nil {
		return int64(s.draft.Hidden)
	}
	return int64(m.Hidden)
}

// buffers are the proposer's persistent GPU buffers, allocated when the
// model runner is built (before the profile), in the model dtype (2
// bytes) where not an index: max_num_batched_tokens T, max_num_seqs R,
// num_speculative_tokens K, hidden width H.
func (s *vllmSpec) buffers(v VLLM, m Model) Bytes {
	if s == nil {
		return 0
	}
	t, r, k, h := int64(v.MaxNumBatchedTokens), int64(v.MaxNumSeqs), int64(s.k), s.hidden(m)
	if !s.rules.v2 {
		if s.method == "ngram" || s.method == "suffix" {
			return 0 // proposed on the CPU
		}
		// v1/spec_decode/eagle.py (0.14.1 l.116-160, 0.11.0 l.88-118):
		// input_ids int32 and positions int64 [T], hidden_states and
		// inputs_embeds [T, H], arange int32 [max(R + 1, T)],
		// backup_next_token_ids int32 [R].
		return Bytes(t*(4+8) + 2*t*h*2 + 4*max(r+1, t) + 4*r)
	}
	switch s.method {
	case "suffix":
		return 0 // Model Runner V1, its proposer on the CPU
	case "ngram", "ngram_gpu":
		// ngram/speculator.py:186-208: scratch int64 [R, cdiv(L, block_l)],
		// drafts int64 [R, K]; the runner's draft_tokens int64 [R, K].
		blockL := int64(256)
		switch L := int64(max(v.MaxModelLen, 1)); {
		case L < 64:
			blockL = 16
		case L < 256:
			blockL = 64
		case L < 1024:
			blockL = 128
		}
		return Bytes(8*r*cdiv64(int64(max(v.MaxModelLen, 1)), blockL) + 8*r*k + 8*r*k)
	}
	// DraftModelSpeculator (speculator.py:145-175): InputBuffers
	// (input_batch.py:23-39: input_ids int32, positions int64, is_padding
	// bool [T]; query_start_loc [R + 1], seq_lens and dcp_local_seq_lens
	// [R], int32), idx_mapping int64, temperature fp32, seeds int64 [R],
	// draft_tokens int64 and their confidence fp32 [R, K]; the runner's
	// draft_tokens int64 [R, K] (states.py:75-80).
	b := t*(4+8+1) + 4*(r+1) + 8*r + 8*r + 4*r + 8*r + 8*r*k + 4*r*k + 8*r*k
	switch {
	case s.method == "draft_model":
		// standalone_ar/speculator.py:47-64: last_token_indices int64
		// [R], arange int32 [R + 1], expanded input_ids int32 and
		// positions int64 [T + R].
		b += 8*r + 4*(r+1) + (4+8)*(t+r)
	case s.multiModule():
		// multi_module_mtp/speculator.py:13-71: hidden_states [T, H],
		// last_token_indices [R], the K − 1 steps' input-id overrides and
		// cached ids int64 and cached target hidden states [R, K − 1, H].
		b += 2*t*h + 8*r + 8*r*(k-1)*2 + 2*r*(k-1)*h
	default:
		// target_dependent_ar/speculator.py:33-47: hidden_states [T, H],
		// last_token_indices and sample_src_positions int64 [R].
		b += 2*t*h + 8*r + 8*r
	}
	return Bytes(b)
}

// VLLMSpeculative is what speculative decoding adds to a vLLM launch,
// each part inside the carve's own figures: the draft's weights in
// Weights, its attention layers in the KV cache's layers, its buffers
// beside the weights, the drafter's dummy forward in the profile run.
type VLLMSpeculative struct {
	Method               string `json:"method"`
	NumSpeculativeTokens int    `json:"num_speculative_tokens"`
	// Draft says what the draft is: the checkpoint's MTP layers, a
	// model, or none (n-gram or suffix lookup).
	Draft string `json:"draft"`
	// Weights are the draft's weights on this GPU (part of Weights).
	Weights Bytes `json:"weights"`
	// KVLayers are the draft's attention layers in the pool (part of
	// KVCache.Layers); KVPageBytes their page where it is not the
	// target's.
	KVLayers    int   `json:"kv_layers"`
	KVPageBytes Bytes `json:"kv_page_bytes,omitempty"`
	// Buffers are the proposer's persistent buffers, taken before the
	// KV cache is sized.
	Buffers Bytes `json:"buffers"`
	// DraftForward is the drafter's dummy forward in the profile run,
	// with the target's hidden states it reads (0 where the carve takes
	// the target's forward to cover it).
	DraftForward Bytes    `json:"draft_forward,omitempty"`
	Notes        []string `json:"notes,omitempty"`
}

// describe fills the answer's speculative part from s.
func (s *vllmSpec) describe(m Model) *VLLMSpeculative {
	out := &VLLMSpeculative{Method: s.method, NumSpeculativeTokens: s.k}
	switch {
	case s.method == "mtp":
		out.Draft = fmt.Sprintf("the checkpoint's own %d MTP layer(s) (%s)", s.nPredict, s.mtp.arch)
		out.Notes = append(out.Notes, fmt.Sprintf("mtp: vLLM builds %s from the served checkpoint: %d MTP layer(s), each one of the model's decoder layers with enorm, hnorm and eh_proj, used round robin for %d speculative token(s); their embedding and output layer are the model's (shared, not loaded again); each MTP layer's attention joins the KV cache pool (%s)",
			s.mtp.arch, s.nPredict, s.k, s.mtp.source))
		if m.MTPLayers > s.nPredict {
			out.Notes = append(out.Notes, fmt.Sprintf("the checkpoint stores %d MTP layers; vLLM loads only the first (the rest are not counted)", m.MTPLayers))
		}
		out.Notes = append(out.Notes, "the MTP layer's dummy forward in the profile run is one decoder layer over the same tokens, which the model's forward peak is taken to cover")
	case s.draft != nil:
		out.Draft = orDefault(s.draft.Name, s.draft.Family+" draft")
		switch s.method {
		case "draft_model":
			out.Notes = append(out.Notes, "draft_model: vLLM loads the draft model whole, unquantized unless speculative_config names a quantization (standalone_ar/speculator.py:101-129), on the target's tensor-parallel ranks (draft_tensor_parallel_size defaults to the target's, config/speculative.py:1849-1870)")
		default:
			share := "its embedding is counted (its shape is not the target's)"
			if s.sharesEmbedding(m) {
				share = "its embedding is the target's (shared, as vLLM does when the head's checkpoint carries no embed_tokens)"
			}
			out.Notes = append(out.Notes, fmt.Sprintf("%s: the head is counted as the model given for it (%d layer(s)); %s, its output layer its own (an EAGLE checkpoint without lm_head shares the target's, less than counted here); EAGLE-3's fc over the target's three hidden states and its first layer's 2·hidden-wide qkv are not in a plain model's layout", s.method, s.draft.Layers, share))
		}
	default:
		out.Draft = "none: the proposals come from the tokens already seen"
		if s.method == "suffix" {
			out.Notes = append(out.Notes, "suffix: the suffix trees live on the CPU (Arctic Inference, which vLLM requires installed); Model Runner V2 does not run suffix decoding, so vLLM runs Model Runner V1 and its sampler keeps no V2 tables (config/vllm.py:3066-3068)")
		} else {
			out.Notes = append(out.Notes, fmt.Sprintf("%s: no draft model and no KV layers; the proposer's only GPU memory is its buffers", s.method))
		}
	}
	return out
}

// draftLayers adds the draft's attention layers to the pool's kinds. A
// draft whose page is the target's joins the target's kinds; one of
// another page pools with full-attention layers only, as vLLM's
// UniformTypeKVCacheSpecs does (v1/kv_cache_interface.py:1347-1372 in
// 0.33.0, l.287-312 in 0.11.0; kv_cache_planning.py:1139-1148): any
// other mix vLLM unifies by raising block sizes or padding pages
// (kv_cache_planning.py:346-409), which the carve does not model.
func (v VLLM) draftLayers(c *VLLMKVCache, s *vllmSpec, m Model) error {
	kinds, page := v.specKinds(s, m)
	if len(kinds) == 0 {
		return nil
	}
	n := 0
	for _, k := range kinds {
		n += k.Layers
	}
	if page > 0 && page != c.PageBytes {
		if len(c.kinds) != 1 || c.kinds[0].Kind != "full" || len(kinds) != 1 || kinds[0].Kind != "full" {
			return fmt.Errorf("vllm: speculative_config.model: the draft's KV page (%v) is not the model's (%v) and their layers are not all full attention: vLLM unifies such pages by raising block sizes or padding (kv_cache_planning.py:346-409), which the carve does not model", page, c.PageBytes)
		}
		c.DraftPageBytes = page
	}
	c.kinds = mergeKinds(c.kinds, kinds)
	c.DraftLayers = n
	c.Layers += n
	return nil
}

// BlockBytes is what one block id costs in all the groups: a page in
// each of the GroupSize pools, a draft's layers at their own page.
func (c VLLMKVCache) BlockBytes() Bytes {
	b := Bytes(int64(c.PageBytes) * int64(c.GroupSize))
	if c.DraftPageBytes > 0 {
		b += Bytes(int64(c.DraftLayers) * int64(c.DraftPageBytes-c.PageBytes))
	}
	return b
}

// queryLen is the uniform decode query length, 1 + num_speculative_tokens
// (config/vllm.py:695-713, 612-617).
func (s *vllmSpec) queryLen() int {
	if s == nil {
		return 1
	}
	return 1 + s.k
}

// profileTokens are the profile run's tokens: max_num_batched_tokens,
// less one correction slot a dummy request for a draft model on Model
// Runner V2 (model_runner.py:871-879: num_extra_query_per_req = 1,
// standalone_ar/speculator.py:38).
func (s *vllmSpec) profileTokens(v VLLM) int {
	t := v.MaxNumBatchedTokens
	if s != nil && s.method == "draft_model" && s.rules.v2 {
		reqs := min(t, v.MaxNumSeqs)
		t = max(1, t-reqs)
	}
	return t
}

// draftBuffers are the proposer's buffers.
func (c VLLMCarve) draftBuffers() Bytes {
	if c.Speculative == nil {
		return 0
	}
	return c.Speculative.Buffers
}

// speculative sets the speculative part of the carve: the draft's
// weights (added to Weights, as "Model loading took" counts them) and the
// proposer's buffers.
func (c *VLLMCarve) speculative(s *vllmSpec, v VLLM, rin, in Inference, m Model) error {
	if s == nil {
		return nil
	}
	w, err := s.weights(rin, m, in)
	if err != nil {
		return err
	}
	sp := s.describe(m)
	sp.Weights, sp.Buffers = w, s.buffers(v, m)
	kinds, page := v.specKinds(s, m)
	for _, k := range kinds {
		sp.KVLayers += k.Layers
	}
	if page > 0 && page != v.pageBytes(m) {
		sp.KVPageBytes = page
	}
	c.Weights = addBytes(c.Weights, w)
	c.Speculative = sp
	return nil
}

// draftForward is the drafter's dummy forward in the profile run, after
// the target's and with the target's hidden states held for it
// (model_runner.py:947-985): for a draft model or EAGLE head, its
// forward over the profile's tokens (the engine's activation peak for
// the draft) and the target's [tokens, hidden] output, which can exceed
// the target's own peak.
func (c *VLLMCarve) draftForward(s *vllmSpec, v VLLM, in Inference, m Model) error {
	if s == nil || s.draft == nil {
		return nil
	}
	t := in.PromptTokens
	din := Inference{Model: *s.draft, Batch: 1, PromptTokens: t, MaxBatchedTokens: t, TP: in.TP, PP: 1, Cache: "paged",
		runtime: in.runtime, cc: in.cc, mxfp4: in.mxfp4}
	est, err := din.Estimate()
	if err != nil {
		return fmt.Errorf("vllm: speculative_config.model: the draft's profile forward: %w", err)
	}
	held := BF16.Size(int64(t) * int64(m.Hidden))
	f := addBytes(est.Peak.Total()-est.Peak.Parameters-est.Peak.KVCache, held)
	c.Speculative.DraftForward = f
	if f > c.Activation {
		c.Activation = f
		c.Speculative.Notes = append(c.Speculative.Notes, fmt.Sprintf("the profile run peaks in the draft's dummy forward, %v: its forward over %d tokens beside the model's %v of hidden states", f, t, held))
	}
	return nil
}

// decodeDraft reads a plan's speculative_config.model into Draft, as the
// plan's own "model" is read (DecodeModel; dir is the plan's folder): a
// catalog name, the model's fields, {"hf_config": …} or
// {"checkpoint": …}. A name vLLM reads itself ("ngram") is left as it is.
func (v *VLLM) decodeDraft(dir string) error {
	if v == nil || v.Speculative == nil || len(bytes.TrimSpace(v.Speculative.Model)) == 0 {
		return nil
	}
	s := v.Speculative
	switch name := s.modelName(); {
	case name == "ngram" || name == "[ngram]" || name == "suffix" || name == "ngram_gpu":
		return nil
	case s.Method == "mtp" || slices.Contains(mtpNames33, s.Method):
		return nil // refused with its reason by the carve
	}
	m, _, _, err := DecodeModel(json.RawMessage(s.Model), dir)
	if err != nil {
		return fmt.Errorf("vllm.speculative_config.%w", err)
	}
	v.Draft = &m
	return nil
}
