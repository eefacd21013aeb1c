// Package vram predicts where GPU memory goes in training and inference, and
// whether a run fits.
//
//	plan := vram.Training{Model: vram.MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 4, Precision: "bf16"}
//	est, err := plan.Estimate()      // err names the field and the rule for an invalid plan
//	fmt.Print(est.Peak)              // what is live at the peak, by category, in one unit
//	fmt.Println(est.PeakAt.Where())  // "iteration 2, backward, block 3"
//
// A plan may also come from the config a user already has — axolotl,
// LLaMA-Factory, torchtune, torchtitan, TrainingArguments/TRL, Megatron-LM,
// DeepSpeed, accelerate, or a vllm serve / SGLang / llama-server launch
// (package vram/importer):
//
//	imp, err := importer.Read("qlora.yml", importer.Options{GPU: "RTX-4090"})
//	est, err := imp.Plan.Training.Estimate()
//	fmt.Println(imp.Mapped, imp.NotModelled) // what each field became; what is left out
//
// # Layers
//
// Packages depend downward only; the compiler holds them to it. Inside
// this package the lines are groups of files, listed from the top:
//
//	examples/… (the CLIs), charts, notebooks     what users run and read
//	vram/importer                                 the configs users have → plans
//	vram/snapshot, vram/gpu, vram/hub             a run's snapshot, this machine's GPUs, the Hub
//	vram/answer                                   the answer about a plan (plan -json, the MCP server), its JSON schemas
//	vram: searches                                search.go (layouts) search_serving.go (vLLM launches) search_flags.go comm.go (step bound)
//	vram: verdicts and advice                     budget.go plan.go advice*.go compare.go whatif.go
//	vram: post-training                           posttraining*.go posttrain_*.go
//	vram: serving engines                         inference.go serving.go vllm*.go sglang*.go tgi.go llamacpp*.go (cache, builds, --fit) ollama*.go (releases, up-front estimate, placement) gguf.go throughput.go
//	vram: the training step                       estimate.go training.go program.go step*.go blockrun.go tally.go timeline.go replay.go allocator.go sanity.go,
//	                                              a file per mechanism (fsdp2*.go deepspeed.go megatron.go offload.go nvme.go activation_offload.go kbitprep.go …),
//	                                              outside PyTorch: nccl.go (NCCL's buffers by communicator, part and release)
//	                                              GEMM workspaces: torch_releases.go (cuBLAS, hipBLAS(Lt) by part and torch release)
//	vram: models and their ops                    model.go family.go family_<model_type>.go layout.go tensors.go hfconfig.go presets.go release.go quant.go,
//	                                              the ops of a block (activations.go attention.go mla.go moe.go mamba*.go deltanet*.go vision*.go …)
//	vram: sizes and words                         bytes.go dtype.go checked.go breakdown.go suggest.go names.go planwords.go
//	vram/fileio, vram/internal/…                  bounded reads; YAML, TOML, a Python subset, strict JSON
//
// Inside the package a few files reach up a line: a family's block is
// built for the resolved training plan (training.go's resolved), the
// multimodal towers share vLLM's video helpers (vllm_mm.go), the replay and
// the released formats read Inference, post-training is judged with
// budget.go's Budget.
//
// Where new work goes: a model family is family_<model_type>.go (see
// Adding a family); a mechanism of training is a rule in its own file (see
// Adding a mechanism); an importer is vram/importer/<framework>.go; a
// reader of a new text format is a package under vram/internal with its
// fuzz test and budget. pools.go holds the storage estimates reuse for
// speed, and sanity.go the step program's opt-in invariant pass.
//
// # Sizes
//
// Bytes is an int64 count of bytes with IEC (KiB … PiB) and SI (KB … PB)
// constants; ParseBytes reads "80GB" and "80 GiB" (which differ). DType is an
// element format; Quant adds the block scales of nf4, fp4, int4 (GPTQ/AWQ)
// and int8 weights. Counts never wrap around or saturate: validation bounds
// every size field, and checked arithmetic turns anything that would pass
// int64 into an error.
//
// # Models
//
// Model describes a transformer: decoder-only, encoder-only, encoder-decoder
// (T5), mixture of experts (routed, shared, interleaved, every-expert), GQA,
// MQA, MLA, local/global layers, q/k norms, soft-capping, sinks. Its Family
// is a Hugging Face model_type (Families lists them). Tensors lists every
// parameter with its Hugging Face name and shape, so ParamCount is exact (gpt2
// 124,439,808; Llama-2-7b 6,738,415,616). Read one from a config.json with
// FromHFConfig, take one from the catalog with FromPreset (a mistyped name
// becomes an estimate error), LookupPreset or MustPreset, or open a local
// checkpoint folder with OpenCheckpoint (config.json and safetensors
// headers, matched tensor by tensor; quantized checkpoints keep their stored
// sizes).
//
// A vision-language model (LLaVA, Qwen2.5-VL) is its language model with Model.Vision
// set: the wrapper family, the vision tower (a Model of an image-encoder
// family) and how features are chosen. Its sequences count each image's
// tokens (Vision.ImageTokens); Training.Images and Inference.Images say how
// many images a sequence holds, Training.VisionTower whether the tower
// trains. vision.go composes the three parts; the wrapper's file declares
// its names and projector (visionWrapper). Model.Audio adds an audio tower
// (a Model of an audio-tower family: conformer blocks, Model.Conformer, or
// a log-mel encoder, Model.MelBins) and its projector to such a model where
// the wrapper declares one (Gemma 4's small releases, Qwen3-Omni):
// audio.go lists their parameters and buffers, and the weights count them;
// their forward is not modelled, so plans run the text and the images.
// Model.Speech adds a speech generator after the language model (Qwen3-Omni's
// talker, code predictor and vocoder, stages of families of their own,
// Model.Codec): speech.go lists their parameters and buffers, which the
// checkpoint stores and transformers loads; the serving engines load none of
// them, and their forward is not modelled.
//
// # Post-training
//
// PostTraining plans one step of GRPO, RLOO, PPO or DPO as TRL, verl,
// OpenRLHF or Unsloth runs it: the policy's Training step, the rollout
// engine (vLLM, SGLang or generate) colocated on the same GPUs or on its
// own, and the phases between them:
//
//	pt := vram.PostTraining{Algorithm: "grpo", Framework: "trl", PromptLen: 512, CompletionLen: 1024,
//		Policy: vram.Training{Model: vram.MustPreset("qwen2.5-7b"), MicroBatch: 4}, Rollout: &vram.Rollout{Engine: "vllm"}}
//	est, err := pt.Estimate(gpu)        // est.Phases: allocated, reserved, engine, device-used and host per phase
//	n, err := pt.MaxCompletionLen(vram.Budget{GPU: gpu, Headroom: vram.DefaultHeadroom})
//
// # Adding a family
//
// A family is one file, family_<model_type>.go, whose init registers a
// family value: the transformers modeling file it follows; fromConfig and
// toConfig (config.json keys to Model fields and back); tensors (the
// state-dict names and shapes, composed from layout.go's pieces:
// standardDecoder, attnQKVO, mlpGated, routedExperts, stackedExperts, …);
// buffers; defaults for zero fields; dropout; check (rules of its own); the
// attention implementations transformers offers it; a recipe — what its
// modeling code does that changes memory, per transformers release (fused
// projections, the rotary embedding's dtype, a softmax without upcast, norms
// that weigh in fp32, a Python loop over experts or batched experts, …); and
// presets citing each checkpoint's config.json. A hybrid with recurrent
// layers fills one of Model.SSM (Mamba-2; mamba.go), Model.Mamba (Mamba-1;
// mamba1.go), Model.ShortConv (shortconv.go), Model.DeltaNet
// (deltanet.go), Model.KDA (kda.go: parameters only so far) or
// Model.Lightning (lightning.go: parameters and buffers only so far), sets
// the family's matching flag, and builds those layers
// with recurrentBlock and the mixer's builder; Model.AttentionLayer says
// which layers keep K and V, and Model.stateElems what the serving engines
// keep per sequence. A vision-language model is a wrapper family (its
// visionWrapper: names, projector, project) over a tower family (towerOnly,
// with its towerEmbed; a tower without one is refused as not modelled)
// and a decoder family; readWrapped and writeWrapped read and write its
// config. Sparse attention's indexers are Model.IndexHeads (DeepSeek Sparse
// Attention; dsa.go, its training step dsa_indexer5.go) and
// Model.BlockSparse (MiniMax-M3's; blocksparse.go: parameters and the
// cached key's size only so far). A family only transformers 5 has sets
// only5 and, until its tiny models traced at 5.23 hold under its recipe
// (examples/measure/trace5-grid.json, TestTransformers5Traces), a
// servingOnly reason: its training is modelled from the generated
// transformers5_traced.json, not by a switch in its file. An encoder-decoder other than T5 (whose pieces
// are encdec.go's) declares its own block builder and seq2seq hooks: the
// encoder's embedding, what runs between the stacks, the masks and the
// decoder's final norm (family_whisper.go). Nothing else in the package
// may name the family (TestFamilyNamesStayHome). To check it: add a tiny
// model to examples/measure/trace-grid.json and the presets' inventories
// (make truth), and go test ./vram holds the engine to them — inventories
// exactly, traces within 2 %.
//
// # Adding a mechanism
//
// A mechanism (a sharding scheme, an offload, a recompute policy, a
// pipeline schedule) is a rule in a file of its own — fsdp2.go, deepspeed.go,
// megatron.go, offload.go, activation_offload.go, zerobubble.go — with the
// framework source it follows cited beside each formula. Its settings are
// Training or Parallel fields, validated in resolve with the field's name in
// every error; a framework's defaults for it go in that framework's
// declaration. The rule speaks to the step compiler (program.go, step.go):
// it allocates bytes of a category (c.alloc, c.allocOn with a stream and
// per-tensor pieces), frees them (c.free) and marks the moments it adds
// (c.mark), called from the phase it acts in (step_forward.go,
// step_backward.go, step_optimizer.go). The compiled step is evaluated twice,
// by the timeline (tally.go: bytes by category, the allocated peak) and by the
// allocator replay (replay.go: each allocation on its stream, reserved
// memory); a block's own tensors are expanded by blockrun.go for both.
// TestReplayMatchesTimeline and the estimates golden hold the replay's most
// requested bytes to the timeline's peak plus the cuBLAS workspace, to the
// byte; a mechanism's own tests compare it with the framework's measured
// traces (examples/measure).
//
// # What is counted
//
// Training.Estimate builds, for one block, the inventory of activation
// tensors the forward pass creates — op by op, with size, dtype and whether
// autograd saves it (see activations.go for the rules) — and replays it layer
// by layer through a first and a steady-state iteration: forward, loss,
// backward (gradients appear, activations are freed, checkpointed blocks are
// recomputed), optimizer step (states are created on the first step,
// foreach/fused temporaries) and zero_grad. The result, a Timeline, gives the
// allocated peak (what torch.cuda.max_memory_allocated reports), its
// composition (Breakdown) and where it happens. Parameters, gradients,
// optimizer states and master weights are sized per tensor, sharded by ZeRO /
// FSDP stage, tensor, pipeline, context and expert parallelism.
//
// A Mamba model's mixers (Model.SSM, Model.Mamba) are built op by op as
// transformers' torch path runs them, and generation keeps a fixed state
// per sequence (InferenceEstimate.State) instead of a KV cache; vLLM keeps
// it in pages of its block pool (VLLMKVCache.PerRequestFor splits a
// request into the attention layers' KV and the state).
//
// Inference.Estimate covers weights in any format, the KV cache (GQA/MQA,
// MLA, sliding windows, paged blocks, fp8) and the prefill and decode peaks.
//
// RuleOfThumb is the source article's quick working-set formula (100 GB for
// a 7B model), for comparison with the precise estimate.
//
// # Plans
//
// ReadPlan reads a JSON plan file (see Plan): a model by catalog name,
// inline, from a config.json or from a checkpoint folder, plus a training or
// inference run. Training.Transformers names the transformers release the
// run uses (default the pinned one, Transformers); behaviours that belong to
// releases follow it, and TrainingEstimate.Notes says where the run differs
// from what the plan asks (an attention implementation a family lacks,
// checkpointing a release ignores). Of the 5.x releases 5.23.0 is modelled
// for the families whose step its traces (testdata/trace5) found unchanged
// or modelled by release-keyed rules, with a note citing the trace; the
// others are refused with the measured difference (transformers5.go); a
// later 5.x release is modelled as 5.23.0, with a note, an earlier one
// refused.
//
// # Comparing plans and speed
//
// ComparePlans puts candidate plans side by side on target GPUs: the three
// peaks (allocated, reserved, device-used), a verdict per GPU, and which plan
// to run where and why. ThroughputBound (Training and Inference) is a
// roofline: the most tokens a second a plan can reach on a catalog GPU, from
// its FLOPs (counted as MFU counts them) at the datasheet peak of its matmul
// precision and its least memory traffic at the GPU's bandwidth; Limit says
// which one is the wall.
//
// A training plan a program asks about again — a report and then its
// verdict, a what-if's unchanged base, a comparison judging one plan on
// several GPUs — gets its Estimate and Replay from a cache keyed by the
// plan's whole value (a change in any field, in place or not, is a new
// plan); ForgetAnswers empties it.
//
// # Sources
//
// Each formula cites its source where it is implemented: the ZeRO paper
// (Rajbhandari et al. 2020) for model-state sharding; Korthikanti et al. 2022
// for activations under tensor/sequence parallelism and recomputation (the
// tests reproduce its Table 2 exactly); the PyTorch (FSDP2, DTensor,
// Inductor's partitioner, the caching allocator, pipelining), transformers,
// litgpt, torchtune, torchtitan, torchao, Megatron-LM, bitsandbytes and
// DeepSpeed code paths for what each framework really allocates.
package vram
