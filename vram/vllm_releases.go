package vram

import "fmt"

// vLLM's releases as data (versions.go): what each modelled release does
// that the carve reads, each rule with the release's own file and line
// (paths inside the vllm package of the release's wheel). A release the
// table lacks is modelled by the newest row before it, with a note.

// vllmRelease is one modelled vLLM release.
type vllmRelease struct {
	releaseRow
	// utilization is CacheConfig.gpu_memory_utilization's default (0.34:
	// resolved_gpu_memory_utilization's, 1.0 with the extensible KV
	// cache).
	utilization float64
	// blockSize is the block size a launch naming none gets on CUDA: 16
	// to 0.33, CacheConfig.DEFAULT_BLOCK_SIZE 64 in 0.34, which
	// FlashAttention keeps (any multiple of 16).
	blockSize int
	// extensibleKV: the KV cache is sized from the memory measured after
	// warmup and CUDA-graph capture (enable_extensible_kv_cache, on by
	// default on CUDA): the memory left on the device less what vLLM
	// keeps free for the profile's transient peak and a margin
	// (VLLMCarve.measuredKV), and no refusal of a utilization above the
	// free memory.
	extensibleKV bool
	// ceilRequested: the memory vLLM may use is ceil(total × utilization)
	// (0.11 multiplies in floats and truncates when it subtracts).
	ceilRequested bool
	// graphsInBudget: the profile estimates the CUDA graphs' pool before
	// the KV cache is sized and subtracts it
	// (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by default); else the
	// graphs are captured after the cache, beside the requested memory.
	graphsInBudget bool
	// wideGraphTokens: on compute capability 10.x the CUDA graphs are
	// captured on vLLM's prefill grid up to this many tokens (at most
	// max_num_batched_tokens) and its decode grid up to max_num_seqs
	// requests (wideCaptureSizes; 0.34: 8192); 0: the shared sizes, up to
	// 1024 tokens there (captureSizes).
	wideGraphTokens int
	// hugeGPUTokens: `vllm serve` on a GPU of 160 GiB or more defaults to
	// 16384 batched tokens (0: the ≥ 70 GiB rule alone).
	hugeGPUTokens int
	// capBatchedBySeqs: a defaulted max_num_batched_tokens is capped at
	// max_num_seqs × max_model_len.
	capBatchedBySeqs bool
	// gb10SmallTier: `vllm serve` keeps the DGX Spark's GB10 (compute
	// capability 12.1) on the small GPUs' batch defaults, whatever its
	// memory.
	gb10SmallTier bool
	// modeloptCC is ModelOpt's minimum compute capability, FP8 and NVFP4
	// (ModelOptFp8Config and ModelOptNvFp4Config.get_min_capability).
	modeloptCC [2]int
	// hopperMXFP4 is the MXFP4 expert backend on compute capability 9.x.
	hopperMXFP4 string
	// flashInferSampler: FlashInfer is installed with vLLM, and its
	// top-k/top-p sampler runs by default.
	flashInferSampler bool
	// runnerV2: Model Runner V2 (the default), whose sampler keeps
	// per-request vocabulary tables on the GPU for good.
	runnerV2 bool
	// inFlightBatches is how many scheduler batches a sliding-window or
	// chunked-local layer keeps room for (max_concurrent_batches: 2 with
	// async scheduling).
	inFlightBatches int
	// alignState: prefix caching (on by default for hybrids) keeps the
	// recurrent state at block boundaries (mamba_cache_mode "align"), a
	// request taking two pages a layer and one more where the layer
	// exports prefill checkpoints (statePagesFor); else one page.
	alignState bool
	// mlaHybridAlign is the attention block size's alignment for a hybrid
	// with latent attention (0: the 16-token rule every hybrid follows).
	mlaHybridAlign int
	// hybridAlignBlock: a hybrid's attention block size is aligned to the
	// launch's block size where that is above the kernels' 16 (0.33
	// platforms/interface.py:1068-1075; 0.14.1 aligns to 16 whatever the
	// block size, model_executor/models/config.py:389-401).
	hybridAlignBlock bool
	// groupLargest: a hybrid's group size is its largest kind's layer
	// count when that is under 1.5 × the smallest's (0.33; 0.14.1 does
	// so under 1.25 ×, which this flag does not tell apart).
	groupLargest bool
	// nullBlock: the capacity check first sets one block aside (the block
	// pool's null block).
	nullBlock bool
	// tokensByConcurrency: the log's "KV cache size: N tokens" is
	// int(max concurrency × max_model_len).
	tokensByConcurrency bool
	// autoMaxModelLen: --max-model-len auto (or -1) picks the longest
	// length one request of which fits.
	autoMaxModelLen bool
	// spec is the release's speculative decoding (vllm_spec.go), with its
	// own sources.
	spec vllmSpecRules
	// nccl is the NCCL release the torch the wheel pins pins; with
	// profileTorchComm the profile's logits all-gather creates torch's TP
	// communicator (serving_nccl.go).
	nccl             string
	profileTorchComm bool
	// groupsInProfile: the init snapshot precedes the parallel groups, so
	// their PyNcclCommunicator and custom all-reduce count in the
	// profile's non-torch increase (serving_nccl.go).
	groupsInProfile bool
	// ncclCuMemOff: vLLM sets NCCL_CUMEM_ENABLE=0, and NCCL connects every
	// algorithm at init (servingNCCLRelease).
	ncclCuMemOff bool
}

// vllmReleases are the modelled releases, oldest first.
var vllmReleases = []vllmRelease{
	{
		// 0.9.2 has no MXFP4 method (model_executor/layers/quantization/
		// has no mxfp4.py) nor gpt-oss (vllmArchitectures); hopperMXFP4
		// is 0.10.1's, which resolves to this row and runs it. 0.10.1 was
		// read against every rule of this row and keeps each (the
		// Source's last clause). It differs in two settings the row does
		// not default, where the carve follows 0.10.1 and 0.9.2 does
		// otherwise: a max_num_batched_tokens below the default
		// max_num_seqs caps it (0.10.1 engine/arg_utils.py:1709-1712;
		// 0.9.2 raises, config.py:2314-2318), and
		// VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE (0.10.1
		// config/__init__.py:3667-3684), which 0.9.2 lacks with the
		// chunked-local spec: its Llama 4 local layers are full attention
		// (v1/worker/gpu_model_runner.py:2636-2650).
		releaseRow:  releaseRow{Version: "0.9.2", Source: "vllm 0.9.2: config.py:1494 (gpu_memory_utilization 0.9); v1/worker/gpu_worker.py:140-142 (requested = total × utilization, taken before the parallel groups, l.158), 223-224 (available = requested − weights − torch peak − non-torch; no CUDA-graph estimate, envs.py has no VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS), utils/__init__.py:2407-2480 (memory_profiling: non-torch increase from the init snapshot); env_override.py:16-32 (NCCL_CUMEM_ENABLE=0); engine/arg_utils.py:1620-1650 (8192 tokens, 1024 sequences at ≥ 70 GiB but an A100, else 2048 and 256; no cap by max_num_seqs); v1/sample/ops/topk_topp_sampler.py:14-19, 33-48 (FlashInfer's sampler when installed, which the wheel's METADATA does not require); v1/kv_cache_interface.py:139-148 (window − 1 + one batch); v1/core/kv_cache_utils.py:826 (group size: the smallest kind), 538-560 (capacity check, no null block), 714, 871 (tokens log); vllm 0.10.1 the same: config/cache.py:43; v1/worker/gpu_worker.py:174-176 before 191-194, 257-258; utils/__init__.py:2598-2720 (memory_profiling unchanged); env_override.py:16-32; engine/arg_utils.py:1638-1656; v1/sample/ops/topk_topp_sampler.py:31-58 (flashinfer-python an extra, METADATA:96); v1/kv_cache_interface.py:163-179; v1/core/kv_cache_utils.py:966, 661-705, 847, 1011; model_executor/layers/quantization/mxfp4.py:123-134 (Marlin on 9.x: torch==2.7.1, METADATA:75, is before 2.8.0), modelopt.py:83-84, 550-551; distributed/device_communicators/pynccl.py:100-106, cuda_communicator.py (no all_gather of its own); torch 2.7.1 pins nvidia-nccl-cu12==2.26.2"},
		utilization: 0.9, hopperMXFP4: "marlin", inFlightBatches: 1,
		blockSize:        16,             // as 0.14.1 sets it (not re-read in 0.9.2)
		modeloptCC:       [2]int{89, 80}, // model_executor/layers/quantization/modelopt.py:61-62, 204-205
		spec:             spec0092,
		nccl:             "2.26.2", // METADATA:72: torch==2.7.0, which pins nvidia-nccl-cu12==2.26.2
		profileTorchComm: true, groupsInProfile: true, ncclCuMemOff: true,
	},
	{
		releaseRow:  releaseRow{Version: "0.11.0", Source: "vllm 0.11.0: config/cache.py:43 (gpu_memory_utilization 0.9); v1/worker/gpu_worker.py:182-184 (requested = total × utilization), 279-280 (available = requested − weights − torch peak − non-torch), 341-344 (graphs captured after the cache); engine/arg_utils.py:1605-1680 (batch defaults); model_executor/layers/quantization/mxfp4.py:59-107 (Marlin without triton_kernels); v1/kv_cache_interface.py:196-239 (sliding window + one batch, one state page); v1/core/kv_cache_utils.py:974 (group size: the smallest kind), 1080-1092 (tokens log)"},
		utilization: 0.9, hopperMXFP4: "marlin", inFlightBatches: 1,
		blockSize:        16,             // as 0.14.1 sets it (not re-read in 0.11.0)
		modeloptCC:       [2]int{89, 80}, // model_executor/layers/quantization/modelopt.py:85-86, 643-644
		spec:             spec0110,
		nccl:             "2.27.3", // METADATA: torch==2.8.0, which pins nvidia-nccl-cu12==2.27.3
		profileTorchComm: true,
	},
	{
		// 0.14.1 differs from both rows in three ways the fields do not
		// hold (see TestVLLM0141): the group size is the largest kind's
		// under 1.25 × the smallest's (kv_cache_utils.py:1036), where
		// groupLargest is 0.33's 1.5; a hybrid's capacity check counts
		// only its first group's blocks (l.1339-1351); Triton's MXFP4
		// path keeps the checkpoint's block scales beside the swizzled
		// ones (mxfp4.py:746-790).
		releaseRow:  releaseRow{Version: "0.14.1", Source: "vllm 0.14.1: config/cache.py:50 (gpu_memory_utilization 0.9); v1/worker/utils.py:258-260 (requested = ceil(total × utilization)); v1/worker/gpu_worker.py:341-343 (available = requested − weights − torch peak − non-torch; no CUDA-graph estimate, envs.py has no VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS), 453-455 (graphs captured after the cache); engine/arg_utils.py:1846-1865 (8192 tokens, 1024 sequences at ≥ 70 GiB but an A100; no 160 GiB rule); model_executor/layers/quantization/mxfp4.py:113-166 (Triton on 9.x: VLLM_USE_FLASHINFER_MOE_MXFP4_BF16 off, envs.py:1251-1252; triton_kernels vendored, utils/import_utils.py:420-427); v1/sample/ops/topk_topp_sampler.py:29-57 (FlashInfer installed, flashinfer-python==0.5.3 in the wheel's METADATA, but its sampler only with VLLM_USE_FLASHINFER_SAMPLER=1); envs.py:1601-1602, v1/worker/gpu_worker.py:107, 247-261 (Model Runner V1: VLLM_USE_V2_MODEL_RUNNER=0); v1/kv_cache_interface.py:248-270 (window − 1 + one batch), 292-294 (state: cdiv(max_model_len, mamba_block_size) pages, mamba_block_size = max_model_len without prefix caching, model_executor/models/config.py:351-352, which hybrids lack by default, config/model.py:1651-1656); v1/core/kv_cache_utils.py:1033-1042 (group size: the largest kind's under 1.25 × the smallest's), 1511-1522, 609-643 (capacity check on all the memory, no null block), 1284-1305 (tokens log: blocks per group × block size), 1389-1448, 1504-1509 and engine/arg_utils.py:2121-2137 (--max-model-len auto or -1); engine/arg_utils.py:2010-2015 (default batched tokens ≤ max_num_seqs × max_model_len)"},
		utilization: 0.9, ceilRequested: true, hopperMXFP4: "triton", inFlightBatches: 1, groupLargest: true,
		mlaHybridAlign:  64, // model_executor/models/config.py:389-393 (128 only with the CUTLASS_MLA backend named)
		autoMaxModelLen: true, capBatchedBySeqs: true,
		blockSize:        16,             // platforms/cuda.py:160-161
		modeloptCC:       [2]int{89, 75}, // model_executor/layers/quantization/modelopt.py:372-373, 1033-1034
		spec:             spec0141,
		nccl:             "2.27.5", // METADATA: torch==2.9.1, which pins nvidia-nccl-cu12==2.27.5
		profileTorchComm: true,
	},
	{
		releaseRow:  releaseRow{Version: "0.33.0", Source: "vllm 0.33.0: config/cache.py:215 (gpu_memory_utilization 0.92); v1/worker/utils.py:724-725 (ceil); v1/worker/gpu_worker.py:707-724, 747-757 (the CUDA-graph estimate subtracted), 1012-1068 (--kv-cache-memory suggestion); envs.py:2216-2221 (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1); engine/arg_utils.py:2973 (16384 tokens at ≥ 160 GiB), 2960-2989 (GB10 on the small tier), 3218-3224 (default batched tokens ≤ max_num_seqs × max_model_len); fused_moe/oracle/mxfp4.py:402-435 (Triton on 9.x); config/vllm.py:730-763 (Model Runner V2), 588-609 (two batches in flight); v1/worker/gpu/sample/penalties.py:43-50 (output_bin_counts); v1/kv_cache_interface.py:901-965, 1135-1141 (windows, align-mode state pages); v1/core/kv_cache_planning.py:519-533 (group size), 1532-1548 (null block, auto max_model_len); v1/core/kv_cache_utils.py:1128 (tokens log)"},
		utilization: 0.92, ceilRequested: true, graphsInBudget: true, hugeGPUTokens: 16384, hopperMXFP4: "triton",
		flashInferSampler: true, runnerV2: true, inFlightBatches: 2, alignState: true, groupLargest: true, nullBlock: true,
		mlaHybridAlign:      128, // platforms/interface.py:1083-1088
		tokensByConcurrency: true, autoMaxModelLen: true, capBatchedBySeqs: true, gb10SmallTier: true,
		blockSize:        16, // config/cache.py:185 (CacheConfig.DEFAULT_BLOCK_SIZE)
		hybridAlignBlock: true,
		modeloptCC:       [2]int{80, 75}, // model_executor/layers/quantization/modelopt.py:449-450, 772-773
		spec:             spec0330,
		nccl:             "2.30.7", // METADATA: torch==2.14.0, which pins nvidia-nccl-cu13==2.30.7
		profileTorchComm: false,
	},
	{
		// 0.34.0 keeps 0.33's rules but four: the default block size is
		// 64; the KV cache is sized after warmup and capture from the
		// memory measured then (extensibleKV), gpu_memory_utilization
		// resolving to 1.0; on compute capability 10.x the CUDA graphs
		// reach 8192 tokens (wideGraphTokens); Model Runner V1 is gone, so
		// suffix decoding runs on V2's GPU speculator (spec0340).
		releaseRow:      releaseRow{Version: "0.34.0", Source: "vllm 0.34.0: config/cache.py:185 (DEFAULT_BLOCK_SIZE 64), 216, 494-501 (gpu_memory_utilization None: 1.0 with the extensible KV cache, else 0.92), 395-406, config/vllm.py:3180-3262 (enable_extensible_kv_cache on for CUDA unless kv_cache_memory_bytes or num_gpu_blocks_override is set); platforms/interface.py:760-791 (the default block size kept by FlashAttention), 1078-1100 (hybrid alignment: the block size, 128 with latent attention); v1/worker/utils.py:742-743 (ceil), 783-797 (no refusal with the extensible cache); v1/worker/gpu_worker.py:745-780 (the profile: capacity = requested − non-KV − CUDA-graph estimate; peak activation = transient + estimate), 936-955, 1060-1103 (warmup, the transient peak, capture), 1225-1237 (measured after capture); v1/worker/extensible_kv_cache.py:64-65 (margin max(1 GiB, 0.75 × transient)), 592-618 (measure_kv_cache_bytes), 621-700; v1/core/kv_cache_planning.py:1827-1861 (capacity check on the measured blocks less the null block), 1864-1906 (auto max_model_len refitted), 1635-1645, 566-578 (group size); envs.py:2355-2357 (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1); config/vllm.py:2558-2731, config/compilation.py:54-127 (on compute capability 10.x graphs on the prefill grid up to 8192 tokens and the decode grid up to max_num_seqs), v1/worker/gpu/cudagraph_utils.py:985-1108 (the estimate); engine/arg_utils.py:3010 (16384 tokens at ≥ 160 GiB), 2997-3026 (GB10 on the small tier), 3255-3261 (default batched tokens ≤ max_num_seqs × max_model_len); fused_moe/oracle/mxfp4.py:421-457 (Triton on 9.x); platforms/interface.py:1480-1493 (Model Runner V1 removed), config/vllm.py:560-577 (two batches in flight); v1/worker/gpu/sample/penalties.py:43-50, structured_outputs.py:26-28 (V2's tables), sample/sampler.py:91-93 (FlashInfer's sampler; flashinfer-python==0.7.3, METADATA); v1/kv_cache_interface.py:915-967, 1168-1174 (windows, align-mode state pages), model_executor/layers/mamba/mamba_mixer2.py:1098, gdn/qwen_gdn_linear_attn.py:910 (prefill checkpoints); multimodal/encoder_budget.py, profiling.py, models/kimi_k25.py unchanged; model_executor/models/config.py:1094-1118 (align mode with prefix caching); v1/core/kv_cache_utils.py:1141-1149 (tokens log); distributed/device_communicators/cuda_communicator.py:487-524 (the logits gathered through the PyNcclCommunicator), v1/worker/gpu_worker.py:506-549 (init snapshot after the groups)"},
		wideGraphTokens: 8192, // config/vllm.py:2602-2611, 2631-2638
		utilization:     1.0, blockSize: 64, extensibleKV: true, ceilRequested: true, graphsInBudget: true, hugeGPUTokens: 16384, hopperMXFP4: "triton",
		flashInferSampler: true, runnerV2: true, inFlightBatches: 2, alignState: true, groupLargest: true, nullBlock: true,
		mlaHybridAlign:      128, // platforms/interface.py:1095-1100
		tokensByConcurrency: true, autoMaxModelLen: true, capBatchedBySeqs: true, gb10SmallTier: true, hybridAlignBlock: true,
		modeloptCC:       [2]int{80, 75}, // model_executor/layers/quantization/modelopt.py:453-454, 795-796
		spec:             spec0340,
		nccl:             "2.30.7", // METADATA: torch==2.14.0, as 0.33's
		profileTorchComm: false,
	},
}

// CurrentVLLM is the vLLM release a plan that names none is modelled with.
var CurrentVLLM = vllmReleases[len(vllmReleases)-1].Version

// vllmRelease resolves the launch's release (VLLM.Version).
func (v VLLM) release() (vllmRelease, Modelled, error) {
	return resolveRelease("vllm", v.Version, vllmReleases)
}

// statePagesFor is the pages of recurrent state a request takes in each
// of m's recurrent layers: one, or in align mode two (0.33
// v1/kv_cache_interface.py:1135-1141) and one more for the layers that
// export prefill checkpoints — Mamba-2 mixers
// (layers/mamba/mamba_mixer2.py:1108-1118) and Gated DeltaNet
// (gdn/qwen_gdn_linear_attn.py:739-750) — not short convolutions, Mamba-1
// or KDA (abstract.py:65-70: no alignment, no checkpoint block).
func (rel vllmRelease) statePagesFor(m Model) int {
	switch {
	case !rel.alignState:
		return 1
	case m.SSM != nil || m.DeltaNet != nil:
		return 3
	}
	return 2
}

// vllmArchitectures are the families some vLLM releases do not run
// (served_architectures.go): since is the first release whose
// model_executor/models/registry.py (its _TEXT_GENERATION_MODELS,
// _MULTIMODAL_MODELS, … dicts) has the architecture, read in each
// release's wheel, 0.9.2 to 0.34.0, the first registering release found by
// bisecting the releases between two modelled rows (each registry at or
// after it has the architecture); until is the last that ran it (0.34.0's
// _PREVIOUSLY_SUPPORTED_MODELS, l.883-939, which adds Keye and Keye-VL 1.5,
// no family here). A release without the architecture may
// still load a checkpoint through its Transformers fallback (0.9.2
// model_loader/utils.py:209-219), another implementation, which the carve
// does not model.
var vllmArchitectures = map[string]servedArchitecture{
	exaone4ModelType:       {since: "0.10.0", names: "Exaone4ForCausalLM", source: "0.10.0 l.61, _TEXT_GENERATION_MODELS; none in 0.9.2"},
	glm4MoeModelType:       {since: "0.10.0", names: "Glm4MoeForCausalLM", source: "0.10.0 l.71, _TEXT_GENERATION_MODELS; none in 0.9.2"},
	gemma3nTextModelType:   {since: "0.10.1", names: "Gemma3nForCausalLM", source: "0.10.1 l.72, _TEXT_GENERATION_MODELS; none in 0.10.0"},
	gptOssModelType:        {since: "0.10.1", names: "GptOssForCausalLM", source: "0.10.1 l.76, _TEXT_GENERATION_MODELS; none in 0.10.0"},
	llama4TextModelType:    {since: "0.10.1", names: "Llama4ForCausalLM", source: "0.10.1 l.97, _TEXT_GENERATION_MODELS; none in 0.10.0"},
	smollm3ModelType:       {since: "0.10.1", names: "SmolLM3ForCausalLM", source: "0.10.1 l.276, _TRANSFORMERS_SUPPORTED_MODELS; none in 0.10.0"},
	lfm2ModelType:          {since: "0.10.2", names: "Lfm2ForCausalLM", source: "0.10.2 l.101, _TEXT_GENERATION_MODELS; none in 0.10.1.1"},
	qwen3NextModelType:     {since: "0.10.2", names: "Qwen3NextForCausalLM", source: "0.10.2 l.77, _TEXT_GENERATION_MODELS; none in 0.10.1.1"},
	seedOssModelType:       {since: "0.10.2", names: "SeedOssForCausalLM", source: "0.10.2 l.138, _TEXT_GENERATION_MODELS; none in 0.10.1.1"},
	deepseekV32ModelType:   {since: "0.11.0", names: "DeepseekV32ForCausalLM", source: "0.11.0 l.73, _TEXT_GENERATION_MODELS; none in 0.10.2"},
	olmo3ModelType:         {since: "0.11.0", names: "Olmo3ForCausalLM", source: "0.11.0 l.132, _TEXT_GENERATION_MODELS; none in 0.10.2"},
	qwen3VLModelType:       {since: "0.11.0", names: "Qwen3VLForConditionalGeneration", source: "0.11.0 l.271, _MULTIMODAL_MODELS; none in 0.10.2"},
	qwen3VLMoeModelType:    {since: "0.11.0", names: "Qwen3VLMoeForConditionalGeneration", source: "0.11.0 l.272, _MULTIMODAL_MODELS; none in 0.10.2"},
	kimiLinearModelType:    {since: "0.11.1", names: "KimiLinearForCausalLM", source: "0.11.1 l.122, _TEXT_GENERATION_MODELS; none in 0.11.0"},
	minimaxM2ModelType:     {since: "0.11.1", names: "MiniMaxM2ForCausalLM", source: "0.11.1 l.137, _TEXT_GENERATION_MODELS; none in 0.11.0"},
	qwen3OmniMoeModelType:  {since: "0.11.1", names: "Qwen3OmniMoeForConditionalGeneration", source: "0.11.1 l.376, _MULTIMODAL_MODELS; none in 0.11.0"},
	exaoneMoeModelType:     {since: "0.14.0", names: "ExaoneMoEForCausalLM", source: "0.14.0 l.101, _TEXT_GENERATION_MODELS; none in 0.13.0"},
	mimoV2FlashModelType:   {since: "0.14.0", names: "MiMoV2FlashForCausalLM", source: "0.14.0 l.162, _TEXT_GENERATION_MODELS; none in 0.13.0"},
	glm4MoeLiteModelType:   {since: "0.15.0", names: "Glm4MoeLiteForCausalLM", source: "0.15.0 l.115, _TEXT_GENERATION_MODELS; none in 0.14.1"},
	kimiK25ModelType:       {since: "0.15.0", names: "KimiK25ForConditionalGeneration", source: "0.15.0 l.362, _MULTIMODAL_MODELS; none in 0.14.1"},
	glmMoeDsaModelType:     {since: "0.16.0", names: "GlmMoeDsaForCausalLM", source: "0.16.0 l.117, _TEXT_GENERATION_MODELS; none in 0.15.1"},
	qwen35ModelType:        {since: "0.17.0", names: "Qwen3_5ForConditionalGeneration", source: "0.17.0 l.496, _MULTIMODAL_MODELS; none in 0.16.0"},
	qwen35MoeModelType:     {since: "0.17.0", names: "Qwen3_5MoeForConditionalGeneration", source: "0.17.0 l.500, _MULTIMODAL_MODELS; none in 0.16.0"},
	olmoHybridModelType:    {since: "0.18.0", names: "OlmoHybridForCausalLM", source: "0.18.0 l.176, _TEXT_GENERATION_MODELS; none in 0.17.1"},
	gemma4ModelType:        {since: "0.19.0", names: "Gemma4ForConditionalGeneration", source: "0.19.0 l.385, _MULTIMODAL_MODELS; none in 0.18.1"},
	gemma4TextModelType:    {since: "0.19.0", names: "Gemma4ForCausalLM", source: "0.19.0 l.114, _TEXT_GENERATION_MODELS; none in 0.18.1"},
	deepseekV4ModelType:    {since: "0.20.0", names: "DeepseekV4ForCausalLM", source: "0.20.0 l.99, _TEXT_GENERATION_MODELS; none in 0.19.1"},
	minimaxM3VLModelType:   {since: "0.24.0", names: "MiniMaxM3SparseForConditionalGeneration", source: "0.24.0 l.486, _MULTIMODAL_MODELS; none in 0.23.0"},
	qwen35MoeTextModelType: {since: "0.27.0", names: "Qwen3_5MoeForCausalLM", source: "0.27.0 l.202, _TEXT_GENERATION_MODELS; none in 0.26.0"},
	qwen35TextModelType:    {since: "0.27.0", names: "Qwen3_5ForCausalLM", source: "0.27.0 l.201, _TEXT_GENERATION_MODELS; none in 0.26.0"},
	minimaxModelType: {until: "0.23.0", names: "MiniMaxText01ForCausalLM and MiniMaxForCausalLM",
		source: "0.33.0 model_executor/models/registry.py:861-864, 1221-1253 (_raise_for_unsupported); a Hugging Face-format checkpoint falls back to the Transformers backend, which refuses its linear-attention layers (model_executor/models/transformers/base.py:631-639)"},
	lfm3ModelType: {since: "0.34.0", names: "Lfm3ForCausalLM",
		source: "0.34.0 l.153, _TEXT_GENERATION_MODELS (model_executor/models/lfm3.py: ShortConv state, per-layer sliding windows, l.166-176, 222, 395-408); none in 0.33.0, whose Transformers backend refuses its short-convolution layers (transformers/base.py:630-639)"},
	mistral4ModelType: {never: true, names: "Mistral4ForCausalLM",
		source: "no registry read, 0.9.2 to 0.34.0, has it (0.34.0's MistralLarge4ForCausalLM, l.181-184, is another architecture); a checkpoint would load through the Transformers backend (model_impl auto), another implementation, which the carve does not model"},
	bambaModelType: {until: "0.23.0", names: "BambaForCausalLM",
		source: "0.33.0 model_executor/models/registry.py:841-895 (_PREVIOUSLY_SUPPORTED_MODELS), 1221-1253; the Transformers backend refuses its Mamba-2 layers (transformers/base.py:631-639)"},
}

// checkArchitecture refuses a family the release the plan names (asked;
// empty: the row's) does not run, in vLLM's words where it has them.
func (rel vllmRelease) checkArchitecture(m Model, asked string) error {
	family := servedFamily(m)
	a, ok := vllmArchitectures[family]
	if !ok {
		return nil
	}
	asked = orDefault(asked, rel.Version)
	support, err := a.support("vllm", asked)
	switch {
	case err != nil:
		return err
	case support == archNotYet && a.never:
		return fmt.Errorf("vllm: vLLM %s does not run %s: its model registry has no %s (%s)", asked, family, a.names, a.source)
	case support == archNotYet:
		return fmt.Errorf("vllm: vLLM %s does not run %s: its model registry has no %s, which vLLM %s first registers (model_executor/models/registry.py: %s)", asked, family, a.names, a.since, a.source)
	case support == archDropped:
		return fmt.Errorf("vllm: ValueError: Model architecture %s was supported in vLLM until v%s, and is not supported anymore. Please use an older version of vLLM if you want to use this model architecture. (vLLM %s; %s)", a.names, a.until, asked, a.source)
	}
	return nil
}
