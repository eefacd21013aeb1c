package vram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Speculative decoding in SGLang (launch_server's --speculative-* flags),
// as the two modelled releases size it (paths inside the release's sglang
// package; /work/notes/sglang-spec.md has the reading):
//
//   - EAGLE (NEXTN is its alias: 0.5.23 arg_groups/speculative_hook.py:
//     109-116, 0.5.3 server_args.py:1050-1051), EAGLE3 and STANDALONE run a
//     draft model in a worker of its own: for DeepSeek-V3 and GLM-4.5 with
//     no --speculative-draft-model-path SGLang takes the served checkpoint
//     (speculative_hook.py:1118-1148; server_args.py:1074-1086) rewritten to
//     its NextN architecture (configs/model_config.py:1032-1036, 1063-1065;
//     0.5.3 l.217-227), one decoder layer beside an embedding and an output
//     layer of its own, which SGLang swaps for the target's once the draft's
//     pool is made (set_embed_and_head). The draft's KV pool is the draft's
//     own layers (num_nextn_predict_layers for an MTP draft, layer_setup.py:
//     202-228; 0.5.3 model_runner.py:376-398) over as many token slots as
//     the target's pool: draft and target share the token indices.
//   - 0.5.23 loads the draft's weights before the target's pool is sized
//     (managers/scheduler.py:1128-1137, 1078-1110), so they — the NextN
//     draft's own embedding and output layer still held — come off the
//     budget ("If using speculative decoding, draft weights are now
//     counted", mem_cache/kv_cache_configurator.py:3042-3058), and it
//     prices the draft's layers into the token's cell at the target's
//     per-layer size: cell + int(cell × draft layers / target layers)
//     (model_executor/pool_configurator.py:259-314). No term of the
//     default fraction is the draft's (arg_groups/memory_hook.py:281-343
//     runs before the speculative hook, pipeline.py:216-218, 304-306).
//   - 0.5.3 sizes the target's pool first, from the target's weights and
//     cell alone, then gives it max_running_requests × (steps × topk +
//     draft tokens) + 100 token slots more than the budget holds
//     (model_runner.py:1444-1465); the draft's weights and its pool, built
//     after, come out of what mem_fraction_static keeps free, for which the
//     default fraction keeps 2 GiB more back (6 GiB for STANDALONE,
//     server_args.py:663-669).
//   - NGRAM loads no model and adds no KV layer: its drafts come from a
//     trie on the CPU; its GPU tables are a few per-request rows.
//
// Both releases cap running requests at 48 unless --max-running-requests
// says otherwise (speculative_hook.py:1086-1094, 1294-1302;
// server_args.py:1060-1061, 1131-1132), and capture the draft's decode and
// draft-extend CUDA graphs, whose static inputs (the topk × steps tree) are
// counted here; their graph pools and the attention backends' graph state
// are not.

// SGLangSpeculative is the launch's speculative decoding: launch_server's
// --speculative-algorithm, --speculative-draft-model-path,
// --speculative-num-steps, --speculative-eagle-topk,
// --speculative-num-draft-tokens and (0.5.23)
// --speculative-draft-kv-cache-dtype. DraftModelPath is the draft as a
// plan's "model" takes it (a catalog name, the model's fields,
// {"hf_config": …} or {"checkpoint": …}), read into SGLang.Draft; left out
// for DeepSeek-V3's and GLM-4.5's own MTP layer (EAGLE or NEXTN).
type SGLangSpeculative struct {
	Algorithm         string   `json:"algorithm"`
	DraftModelPath    ModelRef `json:"draft_model_path,omitempty"`
	NumSteps          int      `json:"num_steps,omitempty"`
	EagleTopK         int      `json:"eagle_topk,omitempty"`
	NumDraftTokens    int      `json:"num_draft_tokens,omitempty"`
	DraftKVCacheDType DType    `json:"draft_kv_cache_dtype,omitempty"`
}

// SGLangSpecPool is what speculative decoding adds to SGLang's pool, the
// draft's lines apart from the target's (SGLangKVPool's Weights, Tokens and
// CellSize stay the target's: what its "Load weight end" and "KV Cache is
// allocated" lines print).
type SGLangSpecPool struct {
	// Algorithm is the one SGLang runs (NEXTN is EAGLE); the steps, topk
	// and draft tokens as it resolves them.
	Algorithm      string `json:"algorithm"`
	NumSteps       int    `json:"num_steps"`
	EagleTopK      int    `json:"eagle_topk"`
	NumDraftTokens int    `json:"num_draft_tokens"`
	// MaxRunningRequests is the running cap (48 by default).
	MaxRunningRequests int    `json:"max_running_requests"`
	Draft              string `json:"draft"`
	// Weights are the draft's weights on this GPU once loaded (the
	// target's embedding and output layer shared); WeightsAtSizing what
	// they held when 0.5.23 sized the pool (the draft's own copies
	// still there), 0 where the draft loads after (0.5.3).
	Weights         Bytes `json:"weights"`
	WeightsAtSizing Bytes `json:"weights_at_sizing,omitempty"`
	// KVLayers and CellSize are the draft's pool: its layers and its bytes
	// a token; CellInBudget is what 0.5.23 adds to the target's cell for
	// them (the target's per-layer size); KVTokens the pool's token slots
	// (the target's), KVBytes its size.
	KVLayers     int   `json:"kv_layers"`
	CellSize     Bytes `json:"cell"`
	CellInBudget Bytes `json:"cell_in_budget,omitempty"`
	KVTokens     int64 `json:"kv_tokens"`
	KVBytes      Bytes `json:"kv_bytes"`
	// HeadroomTokens are the slots 0.5.3 gives the target's pool past
	// its budget.
	HeadroomTokens int64 `json:"headroom_tokens,omitempty"`
	// GraphBS is the draft CUDA graphs' largest batch; Buffers their static
	// inputs (NGRAM: its tables).
	GraphBS int   `json:"graph_bs,omitempty"`
	Buffers Bytes `json:"buffers"`
	// DefaultReserve is what the default fraction keeps back for the draft
	// (0.5.3); OutsideBudget what the speculative parts take beyond the
	// pool's budget, out of what the fraction keeps free.
	DefaultReserve Bytes    `json:"default_reserve,omitempty"`
	OutsideBudget  Bytes    `json:"outside_budget"`
	Notes          []string `json:"notes,omitempty"`
}

// sglangSpecRules is one release's speculative decoding, as the carve
// models it.
type sglangSpecRules struct {
	// algorithms are --speculative-algorithm's names; modelled those the
	// carve sizes; upper: the release upper-cases the name given.
	algorithms, modelled []string
	upper                bool
	// autoDraft are the families whose own checkpoint SGLang takes as the
	// draft when none is given.
	autoDraft []string
	// shortDefaults are the families auto_choose_speculative_params gives
	// 3 steps, topk 1 and 4 draft tokens; elseDefault the others' (Llama:
	// 5, 4, 8 in both).
	shortDefaults []string
	elseDefault   [3]int
	// reserveMiB is what the default fraction keeps back for a draft, by
	// algorithm.
	reserveMiB map[string]float64
	// headroom: the target's pool gets headroom slots past its budget and
	// the draft loads after it (0.5.3); else the draft loads first and
	// shares the cell (0.5.23).
	headroom bool
	// draftKVDType: --speculative-draft-kv-cache-dtype exists.
	draftKVDType bool
	source       string
}

var (
	// sglangSpecNone is a release whose speculative decoding was not
	// read (0.4.x): a plan with it is refused.
	sglangSpecNone = sglangSpecRules{}
	sglangSpec053  = sglangSpecRules{
		algorithms:    []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"},
		modelled:      []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"},
		autoDraft:     []string{deepseekV3ModelType, deepseekV32ModelType, glm4MoeModelType},
		shortDefaults: []string{deepseekV3ModelType, deepseekV32ModelType, deepseekV2ModelType, gptOssModelType},
		elseDefault:   [3]int{5, 4, 8},
		reserveMiB:    map[string]float64{"EAGLE": 2048, "EAGLE3": 2048, "NEXTN": 2048, "STANDALONE": 6144},
		headroom:      true,
		source:        "sglang 0.5.3: srt/server_args.py:294-311 (fields), 542-684 (default fraction; 663-669 the draft's 2 or 6 GiB), 686-714 (capture sizes), 1049-1161 (EAGLE family, NGRAM), 2042-2046 (choices), 3301-3335 (auto params); srt/model_executor/model_runner.py:376-398, 1257-1298, 1444-1465 (headroom); srt/speculative/eagle_worker.py:100-169; eagle_draft_cuda_graph_runner.py:63-102; eagle_draft_extend_cuda_graph_runner.py:57-148; ngram_worker.py:42, 68-95",
	}
	sglangSpec0523 = sglangSpecRules{
		algorithms: []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO"},
		modelled:   []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"},
		upper:      true,
		autoDraft: []string{deepseekV32ModelType, deepseekV3ModelType, deepseekV4ModelType, glm4MoeModelType, glm4MoeLiteModelType,
			glmMoeDsaModelType},
		shortDefaults: []string{deepseekV32ModelType, deepseekV3ModelType, deepseekV2ModelType, gptOssModelType, glm4MoeModelType,
			glm4MoeLiteModelType, glmMoeDsaModelType, mimoV2FlashModelType},
		elseDefault:  [3]int{3, 1, 4},
		draftKVDType: true,
		source:       "sglang 0.5.23: srt/arg_groups/fields/spec.py:31-69, 151-164; srt/arg_groups/speculative_hook.py:109-143, 1072-1174, 1254-1331, 1430-1461; srt/arg_groups/pipeline.py:216-218, 304-306; srt/managers/scheduler.py:1078-1137; srt/mem_cache/kv_cache_configurator.py:470-476, 2990-3060, 3119-3134; srt/model_executor/pool_configurator.py:259-314, 637-647; srt/model_executor/model_runner_components/spec_aux_hidden_state.py:146-183; srt/speculative/eagle_worker_v2.py:177-262, 336-379; eagle_draft_cuda_graph_runner.py:157-230; eagle_draft_extend_cuda_graph_runner.py:150-212; ngram_worker.py:77-83, 174-203",
	}
)

// sglangNextN are the families whose checkpoint's MTP layer the carve sizes
// as an EAGLE/NEXTN draft, with the architecture SGLang rewrites it to.
var sglangNextN = map[string]string{
	deepseekV3ModelType: "DeepseekV3ForCausalLMNextN",
	glm4MoeModelType:    "Glm4MoeForCausalLMNextN",
}

// sglangSpec is a launch's speculative decoding, resolved.
type sglangSpec struct {
	given, algorithm         string // as given (upper-cased by 0.5.23), as run
	steps, topk, draftTokens int
	running                  int    // max_running_requests
	nextn                    string // the NextN architecture: the checkpoint's own MTP layer
	draft                    *Model
	kvDType                  DType
	rules                    sglangSpecRules
}

// modelName is DraftModelPath as a string ("" for an object or none).
func (c SGLangSpeculative) modelName() string {
	var name string
	if raw := bytes.TrimSpace(c.DraftModelPath); len(raw) > 0 && raw[0] == '"' {
		_ = json.Unmarshal(raw, &name)
	}
	return name
}

// algorithmName is --speculative-algorithm as the release reads it.
func (c SGLangSpeculative) algorithmName(r sglangSpecRules, version string) (string, error) {
	a := strings.TrimSpace(c.Algorithm)
	if r.upper {
		a = strings.ToUpper(a)
	}
	if !slices.Contains(r.algorithms, a) {
		if !r.upper {
			return "", fmt.Errorf("sglang: speculative.algorithm: launch_server: error: argument --speculative-algorithm: invalid choice: %q (choose from %s) (SGLang %s server_args.py:2042-2046)", c.Algorithm, quoted(r.algorithms), version)
		}
		return "", fmt.Errorf("sglang: speculative.algorithm %q is not one of SGLang %s's built-in algorithms (%s)", c.Algorithm, version, strings.Join(r.algorithms, ", "))
	}
	if !slices.Contains(r.modelled, a) {
		return "", fmt.Errorf("sglang: speculative.algorithm %s is not modelled for SGLang %s (modelled: %s; %s)", a, version, strings.Join(r.modelled, ", "), r.source)
	}
	return a, nil
}

func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}

// spec resolves the launch's speculative decoding as the release's
// server args do (nil without one), refusing what SGLang refuses and what
// the carve does not model, naming the field.
func (s SGLang) spec(m Model, rel sglangRelease) (*sglangSpec, error) {
	c := s.Speculative
	if c == nil {
		if s.Draft != nil {
			return nil, errors.New("sglang: a draft model (SGLang.Draft) needs speculative.algorithm (EAGLE, EAGLE3 or STANDALONE)")
		}
		return nil, nil
	}
	r := rel.spec
	if len(r.algorithms) == 0 {
		return nil, fmt.Errorf("sglang: speculative decoding under SGLang %s is not modelled (its rules are read from 0.5.3 on)", rel.Version)
	}
	a, err := c.algorithmName(r, rel.Version)
	if err != nil {
		return nil, err
	}
	sp := &sglangSpec{given: a, algorithm: a, running: s.MaxRunningRequests, kvDType: s.KVCacheDType, rules: r}
	if a == "NEXTN" {
		sp.algorithm = "EAGLE"
	}
	if sp.running == 0 {
		sp.running = 48
	}
	if err := sp.draftKVDType(c, rel); err != nil {
		return nil, err
	}
	if err := sp.checkTarget(m, rel); err != nil {
		return nil, err
	}
	if sp.algorithm == "NGRAM" {
		return sp, sp.ngram(s, c)
	}
	if err := sp.draftOf(s, m, rel); err != nil {
		return nil, err
	}
	return sp, sp.params(c, m, rel.Version)
}

// draftKVDType is the draft pool's dtype: --speculative-draft-kv-cache-dtype
// (0.5.23), else the target's.
func (sp *sglangSpec) draftKVDType(c *SGLangSpeculative, rel sglangRelease) error {
	d := c.DraftKVCacheDType
	switch {
	case d == DTypeUnset:
		return nil
	case !sp.rules.draftKVDType:
		return fmt.Errorf("sglang: speculative.draft_kv_cache_dtype: SGLang %s has no --speculative-draft-kv-cache-dtype (the draft's pool takes --kv-cache-dtype); it came later (0.5.23 arg_groups/fields/spec.py:151-164)", rel.Version)
	case d != BF16 && d != FP8E4M3 && d != FP8E5M2:
		return fmt.Errorf("sglang: speculative.draft_kv_cache_dtype %s: SGLang takes auto, fp8_e5m2, fp8_e4m3, bf16 or bfloat16 (arg_groups/fields/spec.py:151-164)", d)
	}
	sp.kvDType = d
	return nil
}

// checkTarget refuses the served models whose pools the carve does not
// model beside a draft.
func (sp *sglangSpec) checkTarget(m Model, rel sglangRelease) error {
	switch {
	case sp.algorithm == "NGRAM":
		return nil
	case m.recurrent():
		return fmt.Errorf("sglang: speculative.algorithm %s beside %q's recurrent state is not modelled (SGLang keeps state slots for each draft token, 0.5.23 mem_cache/kv_cache_configurator.py:3294-3366)", sp.given, m.Family)
	case m.Compressed != nil:
		return fmt.Errorf("sglang: speculative.algorithm %s on DeepSeek-V4's compressed pool is not modelled (its draft keeps the full and sliding-window pools only, kv_cache_configurator.py:546-557)", sp.given)
	case m.IndexHeadDim > 0:
		return fmt.Errorf("sglang: speculative.algorithm %s on a DeepSeek Sparse Attention model (%q) is not modelled: 0.5.23 adds the draft's indexer keys to the cell and pages the pool by 64 (pool_configurator.py:282-309, arg_groups/model_overrides/deepseek_v2.py:163-172); 0.5.3 rewrites no DeepseekV32ForCausalLM to a NextN draft (configs/model_config.py:217-224)", sp.given, m.Family)
	case m.Family == mimoV2FlashModelType:
		return fmt.Errorf("sglang: speculative.algorithm %s on MiMo-V2-Flash is not modelled: 0.5.23 turns on multi-layer EAGLE for it (arg_groups/model_overrides/mimo_v2.py:19-25), one draft runner and pool per step (speculative/multi_layer_eagle_worker_v2.py:120-207), beside its sliding-window pool", sp.given)
	}
	return nil
}

// draftOf sets the draft of an EAGLE, EAGLE3 or STANDALONE launch: the
// checkpoint's own MTP layer for the families SGLang takes it from (EAGLE
// only), else the draft model given.
func (sp *sglangSpec) draftOf(s SGLang, m Model, rel sglangRelease) error {
	c := s.Speculative
	auto := slices.Contains(sp.rules.autoDraft, m.Family)
	given := s.Draft != nil || len(bytes.TrimSpace(c.DraftModelPath)) > 0
	switch {
	case auto && !given && sp.algorithm == "EAGLE":
		arch, ok := sglangNextN[m.Family]
		if !ok {
			return fmt.Errorf("sglang: speculative.algorithm %s on %q: SGLang %s takes the draft from the checkpoint's own MTP layer, whose tensors the carve does not list; not modelled", sp.given, m.Family, rel.Version)
		}
		if m.MTPLayers < 1 {
			return fmt.Errorf("sglang: speculative.algorithm %s: the checkpoint has no MTP layer (model.mtp_layers, num_nextn_predict_layers, is 0), which SGLang's %s draft is built from", sp.given, arch)
		}
		sp.nextn = arch
		return nil
	case auto && given && sp.algorithm == "EAGLE":
		return fmt.Errorf("sglang: speculative.draft_model_path on %q: SGLang takes the checkpoint's own MTP layer when it is left out (it warns \"DeepSeek MTP does not require setting speculative_draft_model_path\"); a NextN checkpoint of its own is not modelled: leave draft_model_path out", m.Family)
	case !given:
		return fmt.Errorf("sglang: speculative.draft_model_path: %s loads a draft model; give it as a catalog name or the model's fields (SGLang takes the served checkpoint itself only for EAGLE/NEXTN on %s)", sp.given, strings.Join(sp.rules.autoDraft, ", "))
	case s.Draft == nil:
		return fmt.Errorf(`sglang: speculative.draft_model_path: the draft is read into SGLang.Draft from a plan; give it as a catalog name or the model's fields (a hub id such as "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" is read only through {"checkpoint": …} or hf://)`)
	}
	d := s.Draft.Normalize()
	if err := d.Validate(); err != nil {
		return fmt.Errorf("sglang: speculative.draft_model_path: %w", err)
	}
	if d.recurrent() || d.Compressed != nil || d.Encoder() || d.EncoderDecoder() || d.IndexHeadDim > 0 || d.Vision != nil {
		return fmt.Errorf("sglang: speculative.draft_model_path: a %q draft is not modelled (the carve pools a text draft's attention layers only)", d.Family)
	}
	sp.draft = &d
	return nil
}

// params resolves steps, topk and draft tokens: auto_choose_speculative_params
// when steps are left out, draft tokens = steps + 1 at topk 1.
func (sp *sglangSpec) params(c *SGLangSpeculative, m Model, version string) error {
	where := "0.5.23 arg_groups/speculative_hook.py:1159-1174, 1254-1266"
	if sp.rules.headroom {
		where = "0.5.3 server_args.py:1088-1116"
	}
	// The carve's bounds: a tree of at most 64 steps of topk 64, 1,024
	// tokens verified a step.
	for _, f := range []struct {
		name  string
		v, hi int
	}{{"num_steps", c.NumSteps, 64}, {"eagle_topk", c.EagleTopK, 64}, {"num_draft_tokens", c.NumDraftTokens, 1024}} {
		if f.v < 0 || f.v > f.hi {
			return fmt.Errorf("sglang: speculative.%s must be in [1, %d], got %d", f.name, f.hi, f.v)
		}
	}
	sp.steps, sp.topk, sp.draftTokens = c.NumSteps, c.EagleTopK, c.NumDraftTokens
	switch {
	case sp.steps == 0 && (sp.topk > 0 || sp.draftTokens > 0):
		return fmt.Errorf("sglang: speculative.num_steps: left out, SGLang %s picks steps, topk and draft tokens together and asserts eagle_topk and num_draft_tokens are left out too (AssertionError, %s)", version, where)
	case sp.steps == 0:
		d := sp.rules.autoParams(sp.algorithm, m)
		sp.steps, sp.topk, sp.draftTokens = d[0], d[1], d[2]
	case sp.topk == 0:
		return fmt.Errorf("sglang: speculative.eagle_topk: given num_steps, SGLang %s reads speculative_eagle_topk as given and fails on None (TypeError comparing it with 1, %s); give it", version, where)
	}
	switch {
	case sp.topk == 1:
		sp.draftTokens = sp.steps + 1 // "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1"
	case sp.draftTokens == 0:
		return fmt.Errorf("sglang: speculative.num_draft_tokens: with eagle_topk %d SGLang %s takes it as given; give it (the tree's tokens verified a step)", sp.topk, version)
	}
	return nil
}

// autoParams are auto_choose_speculative_params' steps, topk and draft
// tokens (0.5.23 speculative_hook.py:1430-1461, 0.5.3 server_args.py:
// 3301-3335), keyed by the target's architecture.
func (r sglangSpecRules) autoParams(algorithm string, m Model) [3]int {
	switch {
	case algorithm == "STANDALONE":
		return [3]int{3, 1, 4}
	case m.Family == llamaModelType && m.Vision == nil:
		return [3]int{5, 4, 8}
	case slices.Contains(r.shortDefaults, m.Family):
		return [3]int{3, 1, 4}
	}
	return r.elseDefault
}

// ngram resolves NGRAM: no model; topk the BFS breadth (10), 12 draft
// tokens unless given, steps their quotient (0.5.23).
func (sp *sglangSpec) ngram(s SGLang, c *SGLangSpeculative) error {
	if s.Draft != nil || len(bytes.TrimSpace(c.DraftModelPath)) > 0 {
		return errors.New("sglang: speculative.draft_model_path: NGRAM loads no model; leave it out")
	}
	if c.NumDraftTokens < 0 || c.NumDraftTokens > 1024 || c.NumSteps < 0 || c.NumSteps > 64 {
		return fmt.Errorf("sglang: speculative.num_draft_tokens (at most 1024) and num_steps (at most 64): got %d and %d", c.NumDraftTokens, c.NumSteps)
	}
	// speculative_ngram_max_bfs_breadth 10; speculative_num_draft_tokens 12
	// (0.5.23 speculative_hook.py:1304-1331, fields/spec.py:256-259; 0.5.3
	// server_args.py:1136-1140 from speculative_ngram_max_match_window_size
	// 12, l.306).
	sp.topk, sp.draftTokens, sp.steps = 10, 12, c.NumSteps
	if c.NumDraftTokens > 0 {
		sp.draftTokens = c.NumDraftTokens
	}
	if sp.steps == 0 && !sp.rules.headroom {
		sp.steps = sp.draftTokens / sp.topk
	}
	return nil
}

// loadsModel: the launch runs a draft model (its weights and KV layers).
func (sp *sglangSpec) loadsModel() bool {
	return sp != nil && (sp.nextn != "" || sp.draft != nil)
}

// decodeDraft reads a plan's sglang.speculative.draft_model_path into
// Draft, as the plan's own "model" is read (DecodeModel; dir is the plan's
// folder).
func (s *SGLang) decodeDraft(dir string) error {
	if s == nil || s.Speculative == nil || len(bytes.TrimSpace(s.Speculative.DraftModelPath)) == 0 {
		return nil
	}
	m, _, _, err := DecodeModel(json.RawMessage(s.Speculative.DraftModelPath), dir)
	if err != nil {
		return fmt.Errorf("sglang.speculative.draft_model_path%s", strings.TrimPrefix(err.Error(), "model"))
	}
	s.Draft = &m
	return nil
}
