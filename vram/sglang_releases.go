package vram

import "fmt"

// SGLang's releases as data (versions.go): what each modelled release does
// that the pool's sizing reads, with the release's files and lines (paths
// inside the sglang package of its wheel).

// sglangRelease is one modelled SGLang release.
type sglangRelease struct {
	releaseRow
	// fraction is how the release picks the default
	// --mem-fraction-static; vlm how a multimodal model changes it
	// (sglang_defaults.go).
	fraction sglangFractionRule
	vlm      sglangVLMRule
	// mmOffByDefault: Gemma 3 and Llama 4 run text-only unless
	// --enable-multimodal (0.4.5.post1 and later).
	mmOffByDefault bool
	// fallback is the default fraction without a GPU reading.
	fallback float64
	// smallChunk, smallBS and smallBSBig are chunked_prefill_size and the
	// decode CUDA-graph batch (TP < 4, TP ≥ 4) on a GPU of 20 to 35 GiB.
	smallChunk, smallBS, smallBSBig int
	// prefillGraphs: prefill CUDA graphs are captured by default (CUDA),
	// and the default fraction keeps 8 MiB a capture size back for them
	// (1.5 GiB with an MLA backend).
	prefillGraphs bool
	// mmReservation comes off a multimodal model's KV budget
	// (SGLANG_VLM_CACHE_SIZE_MB).
	mmReservation Bytes
	// autoMambaSlots: a hybrid's state slots default to a share of the
	// budget (mamba_full_memory_ratio 0.9: 0.9/1.9 of it), the radix
	// cache kept on; else to max_running_requests or 512, the radix cache
	// off.
	autoMambaSlots bool
	// stateKinds are the kinds of recurrent layer the release pools
	// (stateKind; nil: Qwen3-Next's Gated DeltaNet and Falcon-H1's
	// parallel Mamba-2 only).
	stateKinds map[string]bool
	// indexerInCell: a DeepSeek Sparse Attention model's cell counts each
	// layer's indexer key (0.5.23 pool_configurator.py:691-700); 0.5.3's
	// counts the latents only (model_runner.py:1274-1279), and its pool
	// then allocates the index keys beside the tokens it sized.
	indexerInCell bool
	// modeloptCC is ModelOpt's minimum compute capability, FP8 and NVFP4
	// (srt/layers/quantization/modelopt_quant.py get_min_capability).
	modeloptCC [2]int
	// compressedPool: the release runs DeepSeek-V4 (DeepseekV4ForCausalLM)
	// in its own pool (sglang_compressed.go).
	compressedPool bool
	// spec is the release's speculative decoding (sglang_spec.go).
	spec sglangSpecRules
	// nccl is the NCCL release the torch the wheel pins pins
	// (serving_nccl.go).
	nccl string
}

// sglangReleases are the modelled releases, oldest first.
var sglangReleases = []sglangRelease{
	{
		// 0.4.4.post1 to post3 read the same; post4 lowered the
		// multimodal factor to 0.90.
		releaseRow: releaseRow{Version: "0.4.4", Source: "sglang 0.4.4: srt/server_args.py:203-214 (default fraction by TP degree); srt/model_executor/model_runner.py:242-243 (× 0.95 for a multimodal model, whatever the fraction), 612-637 (pool budget, cell); srt/configs/model_config.py:427-449 (the multimodal architectures); srt/entrypoints/engine.py:357-358 (NCCL_CUMEM_ENABLE=0, NVLS off); the same rules in 0.4.4.post1 to post3"},
		fraction:   fractionByTP, vlm: vlmRunner95,
		fallback:   0.88,
		modeloptCC: [2]int{89, 0}, // modelopt_quant.py:54-55; no NVFP4 config
		spec:       sglangSpecNone,
		nccl:       "2.21.5", // METADATA: torch==2.5.1, which pins nvidia-nccl-cu12==2.21.5
	},
	{
		releaseRow: releaseRow{Version: "0.4.9", Source: "sglang 0.4.9: srt/server_args.py:280-329 (default fraction: reserved memory by GPU size and TP × PP degree, × 0.90 for a multimodal model); srt/configs/model_config.py:103-114 (Gemma 3 and Llama 4 text-only by default); srt/model_executor/model_runner.py:928-963 (pool budget, cell); srt/entrypoints/engine.py:623-624 (NCCL_CUMEM_ENABLE=0, NVLS off)"},
		fraction:   fractionByReserve049, vlm: vlmDefault90, mmOffByDefault: true,
		fallback:   0.88,
		modeloptCC: [2]int{89, 100}, // modelopt_quant.py:80-81, 266-267
		spec:       sglangSpecNone,
		nccl:       "2.26.2", // METADATA: torch==2.7.1, which pins nvidia-nccl-cu12==2.26.2
	},
	{
		releaseRow: releaseRow{Version: "0.5.3", Source: "sglang 0.5.3: srt/server_args.py:542-684 (default fraction, sizes by GPU), 3105-3142 (VLM factor); srt/model_executor/model_runner.py:1257-1298 (pool budget, cell), 357-374 and 1300-1306 (hybrid state: Qwen3-Next, Falcon-H1; 512 slots, radix cache off)"},
		fallback:   0.88, smallChunk: 2048, smallBS: 16, smallBSBig: 80, mmOffByDefault: true,
		modeloptCC: [2]int{89, 100}, // modelopt_quant.py:123-124, 539-540
		spec:       sglangSpec053,
		nccl:       "2.27.3", // METADATA: torch==2.8.0, which pins nvidia-nccl-cu12==2.27.3
	},
	{
		releaseRow: releaseRow{Version: "0.5.23", Source: "sglang 0.5.23: srt/arg_groups/memory_hook.py:89-188 (sizes by GPU), 281-343 (default fraction; 0.95 without a GPU), 357-414 (graph reserve: 8 MiB a prefill capture size, MLA 1.5 GiB); srt/arg_groups/cuda_graph_hook.py:136-255 (prefill graphs off for unlisted multimodal models), 480-497 (prefill capture sizes); srt/model_executor/cuda_graph_config.py:119-123 (prefill graphs on, CUDA); srt/mem_cache/kv_cache_configurator.py:202-223 (100 MiB VLM cache), 2990-3060 (budget), 3229-3409 (state slots: mamba_full_memory_ratio 0.9); srt/configs/hybrid_arch.py:55-137 (hybrids pooled); srt/model_executor/pool_configurator.py:691-700 (DSA indexer keys in the cell)"},
		fallback:   0.95, smallChunk: 4096, smallBS: 48, smallBSBig: 160, prefillGraphs: true, mmReservation: 100 * MiB, autoMambaSlots: true, indexerInCell: true, mmOffByDefault: true,
		compressedPool: true,           // srt/models/deepseek_v4.py:4633, srt/mem_cache/deepseek_v4_memory_pool.py:943
		modeloptCC:     [2]int{89, 80}, // modelopt_quant.py:462-463, 1549-1550
		// KDA: models/kimi_linear.py:1017 (KimiLinearForCausalLM), its
		// state in the MambaPool (configs/mamba_utils.py:299-369).
		stateKinds: map[string]bool{"Gated DeltaNet": true, "Mamba-2": true, "short convolution": true, "KDA": true},
		spec:       sglangSpec0523,
		nccl:       "2.30.7", // METADATA: torch==2.14.1, which pins nvidia-nccl-cu13==2.30.7
	},
}

// CurrentSGLang is the SGLang release a plan that names none is modelled
// with.
var CurrentSGLang = sglangReleases[len(sglangReleases)-1].Version

// release resolves the launch's release (SGLang.Version).
func (s SGLang) release() (sglangRelease, Modelled, error) {
	return resolveRelease("sglang", s.Version, sglangReleases)
}

// prefillCaptureSizes are the prefill CUDA-graph sizes up to maxBS (0.5.23
// srt/arg_groups/cuda_graph_hook.py:480-497).
func prefillCaptureSizes(maxBS int) int {
	n := 0
	for _, r := range [][3]int{{4, 32, 4}, {48, 256, 16}, {288, 512, 32}, {576, 1024, 64}, {1280, 4096, 256}, {4608, maxBS, 512}} {
		for v := r[0]; v <= r[1] && v <= maxBS; v += r[2] {
			n++
		}
	}
	return n
}

// sglangArchitectures are the families some SGLang releases do not run
// (served_architectures.go): since is the first release whose
// srt/models/*.py has an EntryClass naming the architecture (the registry
// imports every module there and keys it by its EntryClass,
// srt/models/registry.py), read in each wheel, 0.4.4 to 0.5.23, the first
// found by bisecting the releases between them, post releases included
// (each release at or after it has the class; 0.5.0 has only release
// candidates on PyPI, so a class first in 0.5.0rc0 counts from 0.5.1);
// source is the module and line of the EntryClass there. never: no
// release read, 0.5.23 included, has a class for it. From 0.4.7 a release
// without the class loads the checkpoint through its Transformers
// fallback when transformers has the model and it is backend-compatible
// (model_impl auto; 0.5.3 model_loader/utils.py:82-104, 27-79; 0.5.23
// model_loader/utils.py:198-240, 111-195), a different implementation,
// which the pool's sizing does not model; before it, it refuses the
// model (srt/models/registry.py:33 in 0.4.4).
var sglangArchitectures = map[string]servedArchitecture{
	gemma3ModelType:           {since: "0.4.4.post2", names: "Gemma3ForConditionalGeneration", source: "srt/models/gemma3_mm.py:460; none in 0.4.4.post1"},
	gemma3TextModelType:       {since: "0.4.4.post2", names: "Gemma3ForCausalLM", source: "srt/models/gemma3_causal.py:683; none in 0.4.4.post1"},
	llama4ModelType:           {since: "0.4.5", names: "Llama4ForConditionalGeneration", source: "srt/models/mllama4.py:154; none in 0.4.4.post4"},
	llama4TextModelType:       {since: "0.4.5", names: "Llama4ForCausalLM", source: "srt/models/llama4.py:420; none in 0.4.4.post4"},
	qwen3ModelType:            {since: "0.4.5.post2", names: "Qwen3ForCausalLM", source: "srt/models/qwen3.py:335; none in 0.4.5.post1"},
	qwen3MoeModelType:         {since: "0.4.5.post2", names: "Qwen3MoeForCausalLM", source: "srt/models/qwen3_moe.py:423; none in 0.4.5.post1"},
	llavaModelType:            {since: "0.4.6.post4", names: "LlavaForConditionalGeneration", source: "srt/models/llava.py:824; none in 0.4.6.post3"},
	mistral3ModelType:         {since: "0.4.6.post5", names: "Mistral3ForConditionalGeneration", source: "srt/models/mistral.py:93; none in 0.4.6.post4"},
	gemma3nModelType:          {since: "0.4.8.post1", names: "Gemma3nForConditionalGeneration", source: "srt/models/gemma3n_mm.py:511; none in 0.4.8"},
	gemma3nTextModelType:      {since: "0.4.8.post1", names: "Gemma3nForCausalLM", source: "srt/models/gemma3n_causal.py:1008; none in 0.4.8"},
	hunyuanV1MoeModelType:     {since: "0.4.8.post1", names: "HunYuanMoEV1ForCausalLM", source: "srt/models/hunyuan.py:771; none in 0.4.8"},
	phiModelType:              {since: "0.4.9.post3", names: "PhiForCausalLM", source: "srt/models/phi.py:321; none in 0.4.9.post2"},
	glm4MoeModelType:          {since: "0.4.9.post5", names: "Glm4MoeForCausalLM", source: "srt/models/glm4_moe.py:1035; none in 0.4.9.post4"},
	gptOssModelType:           {since: "0.5.1", names: "GptOssForCausalLM", source: "srt/models/gpt_oss.py:1134, first in 0.5.0rc0; none in 0.4.10.post2"},
	ernie45MoeModelType:       {since: "0.5.1", names: "Ernie4_5_MoeForCausalLM", source: "srt/models/ernie4.py:426, first in 0.5.0rc0; none in 0.4.10.post2"},
	optModelType:              {since: "0.5.2", names: "OPTForCausalLM", source: "srt/models/opt.py:637; none in 0.5.1.post3"},
	qwen3NextModelType:        {since: "0.5.2", names: "Qwen3NextForCausalLM", source: "srt/models/qwen3_next.py:1039; none in 0.5.1.post3"},
	starcoder2ModelType:       {since: "0.5.3", names: "Starcoder2ForCausalLM", source: "srt/models/starcoder2.py:357; none in 0.5.2"},
	falconH1ModelType:         {since: "0.5.3", names: "FalconH1ForCausalLM", source: "srt/models/falcon_h1.py:576; none in 0.5.2"},
	qwen3VLModelType:          {since: "0.5.3", names: "Qwen3VLForConditionalGeneration", source: "srt/models/qwen3_vl.py:787; none in 0.5.2"},
	qwen3VLMoeModelType:       {since: "0.5.3", names: "Qwen3VLMoeForConditionalGeneration", source: "srt/models/qwen3_vl_moe.py:471; none in 0.5.2"},
	deepseekV32ModelType:      {since: "0.5.3", names: "DeepseekV32ForCausalLM", source: "srt/models/deepseek_v2.py:3421; none in 0.5.2"},
	nemotronHModelType:        {since: "0.5.3.post1", names: "NemotronHForCausalLM", source: "srt/models/nemotron_h.py:514; none in 0.5.3"},
	qwen3OmniMoeModelType:     {since: "0.5.4", names: "Qwen3OmniMoeForConditionalGeneration", source: "srt/models/qwen3_omni_moe.py:661; none in 0.5.3.post3"},
	minimaxM2ModelType:        {since: "0.5.4.post1", names: "MiniMaxM2ForCausalLM", source: "srt/models/minimax_m2.py:922; none in 0.5.4"},
	kimiLinearModelType:       {since: "0.5.4.post2", names: "KimiLinearForCausalLM", source: "srt/models/kimi_linear.py:678; none in 0.5.4.post1"},
	mimoV2FlashModelType:      {since: "0.5.7", names: "MiMoV2FlashForCausalLM", source: "srt/models/mimo_v2_flash.py:986; none in 0.5.6.post2"},
	glm4MoeLiteModelType:      {since: "0.5.8", names: "Glm4MoeLiteForCausalLM", source: "srt/models/glm4_moe_lite.py:808; none in 0.5.7"},
	exaone4ModelType:          {since: "0.5.9", names: "Exaone4ForCausalLM", source: "srt/models/exaone4.py:719; none in 0.5.8.post1"},
	exaoneMoeModelType:        {since: "0.5.9", names: "ExaoneMoEForCausalLM", source: "srt/models/exaone_moe.py:881; none in 0.5.8.post1"},
	glmMoeDsaModelType:        {since: "0.5.9", names: "GlmMoeDsaForCausalLM", source: "srt/models/glm4_moe.py:1288; none in 0.5.8.post1"},
	gptjModelType:             {since: "0.5.9", names: "GPTJForCausalLM", source: "srt/models/gpt_j.py:326; none in 0.5.8.post1"},
	graniteMoeHybridModelType: {since: "0.5.9", names: "GraniteMoeHybridForCausalLM", source: "srt/models/granitemoehybrid.py:737; none in 0.5.8.post1"},
	kimiK25ModelType:          {since: "0.5.9", names: "KimiK25ForConditionalGeneration", source: "srt/models/kimi_k25.py:776; none in 0.5.8.post1"},
	lfm2ModelType:             {since: "0.5.9", names: "Lfm2ForCausalLM", source: "srt/models/lfm2.py:554; none in 0.5.8.post1"},
	qwen35ModelType:           {since: "0.5.9", names: "Qwen3_5ForConditionalGeneration", source: "srt/models/qwen3_5.py:1345; none in 0.5.8.post1"},
	qwen35MoeModelType:        {since: "0.5.9", names: "Qwen3_5MoeForConditionalGeneration", source: "srt/models/qwen3_5.py:1345; none in 0.5.8.post1"},
	gemma4ModelType:           {since: "0.5.11", names: "Gemma4ForConditionalGeneration", source: "srt/models/gemma4_mm.py:878; none in 0.5.10.post1"},
	gemma4TextModelType:       {since: "0.5.11", names: "Gemma4ForCausalLM", source: "srt/models/gemma4_causal.py:1009; none in 0.5.10.post1"},
	minimaxM3VLModelType:      {since: "0.5.16", names: "MiniMaxM3SparseForConditionalGeneration", source: "srt/models/minimax_m3_vl.py:372; none in 0.5.15.post1"},
	qwen35TextModelType:       {since: "0.5.17", names: "Qwen3_5ForCausalLM", source: "srt/models/qwen3_5_text.py:208; none in 0.5.16"},
	qwen35MoeTextModelType:    {since: "0.5.17", names: "Qwen3_5MoeForCausalLM", source: "srt/models/qwen3_5_text.py:208; none in 0.5.16"},
	mamba2ModelType:           {since: "0.5.20", names: "Mamba2ForCausalLM", source: "srt/models/mamba2.py:262; none in 0.5.19"},
	bambaModelType:            {never: true, names: "BambaForCausalLM"},
	falconModelType:           {never: true, names: "FalconForCausalLM"},
	gptNeoxModelType:          {never: true, names: "GPTNeoXForCausalLM"},
	jambaModelType:            {never: true, names: "JambaForCausalLM"},
	lfm3ModelType:             {never: true, names: "Lfm3ForCausalLM"},
	minimaxModelType:          {never: true, names: "MiniMaxText01ForCausalLM and MiniMaxForCausalLM"},
	mistral4ModelType:         {never: true, names: "Mistral4ForCausalLM"},
	olmo3ModelType:            {never: true, names: "Olmo3ForCausalLM"},
	olmoHybridModelType:       {never: true, names: "OlmoHybridForCausalLM"},
	seedOssModelType:          {never: true, names: "SeedOssForCausalLM"},
	smollm3ModelType:          {never: true, names: "SmolLM3ForCausalLM"},
}

// checkArchitecture refuses a family the release the plan names (asked;
// empty: the row's) has no class for: SGLang would load it through its
// Transformers fallback, which is not modelled.
func (rel sglangRelease) checkArchitecture(m Model, asked string) error {
	family := servedFamily(m)
	a, ok := sglangArchitectures[family]
	if !ok {
		return nil
	}
	asked = orDefault(asked, rel.Version)
	support, err := a.support("sglang", asked)
	switch {
	case err != nil:
		return err
	case support != archNotYet:
		return nil
	case releaseBefore("sglang", asked, sglangTransformersFallback):
		first := " (no release read has it)"
		if !a.never {
			first = fmt.Sprintf(", which SGLang %s first has: %s", a.since, a.source)
		}
		return fmt.Errorf("sglang: SGLang %s has no class for %s (no %s in its srt/models%s) and no Transformers fallback (from %s): it stops with \"Model architectures [...] are not supported for now\" (srt/models/registry.py)", asked, family, a.names, first, sglangTransformersFallback)
	case a.never:
		return fmt.Errorf("sglang: SGLang %s has no class for %s (no %s in any release's srt/models, 0.4.4 to 0.5.23): it would load the checkpoint through its Transformers fallback (model_impl auto, srt/model_loader/utils.py), another implementation; not modelled", asked, family, a.names)
	}
	return fmt.Errorf("sglang: SGLang %s has no class for %s (no %s in its srt/models, which SGLang %s first has: %s): it would load the checkpoint through its Transformers fallback (model_impl auto, srt/model_loader/utils.py), another implementation; not modelled", asked, family, a.names, a.since, a.source)
}

// sglangTransformersFallback is the first release with the Transformers
// fallback (srt/models/transformers.py:291's TransformersForCausalLM; none in
// 0.4.6.post5).
const sglangTransformersFallback = "0.4.7"
