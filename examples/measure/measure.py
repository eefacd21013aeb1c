"""VRAM Lab's PyTorch companion: ground truth for the Go engine.

    python examples/measure/measure.py inventory PLAN.json [-o OUT.json]
    python examples/measure/measure.py defaults MODEL_TYPE... [-o OUT.json]
    python examples/measure/measure.py gpu PLAN.json [--steps 3] [--dry-run] [--snapshot F]
    python examples/measure/measure.py snapshot PLAN.json -o F.pickle [--steps 2]
    python examples/measure/measure.py fsdp GRID.json OUTDIR
    python examples/measure/measure.py fsdp1 GRID.json OUTDIR
    python examples/measure/measure.py tp GRID.json OUTDIR
    python examples/measure/measure.py posttrain PLAN.json [-o OUT.json]

It reads the project's JSON plan format (the model goes through
`go run ./examples/plan -hf-config PLAN.json`, so the Go engine and PyTorch
build the same architecture) and builds the model from its config with random
weights: nothing is ever downloaded.

posttrain  a post-training plan's TRL trainer (GRPO with transformers'
           generate, DPO) for two steps on the CPU, each phase's peak of
           live storages (examples/measure/posttrain.py), as JSON.
inventory  every named parameter and buffer with shape and dtype, from the
           model built on the meta device (no memory used), as JSON.
defaults   each model type's config class with nothing set, built on the
           meta device: its parameter count (what a config.json that leaves
           every key out stands for), as JSON.
saved      what autograd saves for backward in one forward pass on the CPU
           (torch.autograd.graph.saved_tensors_hooks, unique storages that
           are not parameters or buffers), per block and outside the blocks:
           measured with the plan's model at 1 and 2 blocks, as JSON. The
           Go engine's activation inventory is checked against these. With
           "compile": true in the plan each block is compiled on its own
           (torch.compile; Inductor runs on the CPU with the system's C++
           compiler) and the hooks see what the compiled blocks save; with
           "float8": "tensorwise" or "rowwise" the linears but the output
           layer are torchao's Float8Linear.
trace      one and two training iterations of the plan under PyTorch's
           MemTracker (torch.distributed._tools.mem_tracker) on the CPU,
           dropout off: the composition of the peak (PARAM, BUFFER, GRAD,
           ACT, TEMP, OPT) of the first and of the second iteration, as JSON;
           and the same two iterations under the tool's live-storage tracker
           (every storage an op creates, until it is freed), which also
           traces what MemTracker refuses (frozen parameters, LoRA).
grid       trace every model of a grid file (examples/measure/trace-grid.json:
           small models of the families traced so far × precision ×
           attention × checkpointing × optimizer) into OUTDIR, one file per
           grid point, named <model>-<precision>-<attention>-<checkpointing>-
           <optimizer>.json; --only MODEL limits it to one model.
gpu        on a CUDA machine: the plan's real training steps with
           max_memory_allocated, max_memory_reserved, NVML device-used and the
           CUDA context measured before the model is built; prints one line
           in the measured-case format (examples/validate/testdata/
           cases-format.md) so it can join the validation set. --dry-run
           checks the plan and builds the model on the CPU without running;
           --device cpu runs the same steps on the CPU (memory reads as 0),
           to test the path on a small plan. On a GPU it also records the
           allocator's history (torch.cuda.memory._record_memory_history, with
           phase markers through _set_memory_metadata where the release has
           it) and writes the snapshot beside the line (--snapshot, default
           <plan>.snapshot.pickle): the file pytorch.org/memory_viz opens and
           vram/snapshot reads.
deep       the end of the forward: every decoder family of the trace grid
           with 16 blocks and a 64-token vocabulary under bf16 autocast,
           traced in a loop that keeps the output and one that keeps only
           the loss (vram/testdata/deep/).
fsdp       FSDP2 (fully_shard per decoder block and on the root) on a fake
           process group of N ranks, one process on the CPU, traced by
           PyTorch's FSDPMemTracker: the composition of the peak of two
           iterations (sharded and unsharded parameters and gradients,
           activations, temporaries, all-gather and reduce-scatter buffers,
           optimizer states) for each point of a grid file
           (examples/measure/fsdp-grid.json: world × precision ×
           reshard_after_forward × checkpointing), one file per point.
fsdp1      FSDP1 (flat parameters) under PEFT LoRA on a fake process
           group: the adapters in their block's unit (use_orig_params=True,
           as under litgpt) or apart (PEFT's fsdp_auto_wrap_policy), with
           and without checkpointing (examples/measure/fsdp1-grid.json):
           which blocks are unsharded as each block's backward starts, which
           flat parameters get a gradient after a synced backward and after
           one inside no_sync(), and what one forward saves.
tp         tensor parallelism through DTensor on a fake process group,
           traced by MemTracker: torchtitan's Llama plan, the logits sharded
           with the loss under loss_parallel() or all-gathered, with and
           without sequence parallelism (examples/measure/tp-grid.json:
           tp degree × loss_parallel × sp), one file per point.
fsdp_tp    FSDP2 on a 2-D (dp, tp) mesh with torchtitan's TP plan, traced
           by FSDPMemTracker on a fake process group
           (examples/measure/fsdp-tp-grid.json: dp × tp × sp ×
           reshard_after_forward), one file per point.
zbv        the zero-bubble schedules' action orders (ZB-V and the
           interleaved ZB-1P) on every rank for a few pipeline sizes, from
           torch.distributed.pipelining itself.
snapshot   the plan's training steps on the CPU with every storage recorded
           as a snapshot trace (alloc, free_requested, free_completed, with
           Python frames and phase markers), written in _dump_snapshot's
           pickle format: a CPU run to put beside the prediction where no GPU
           is at hand (no segments: the CPU has no caching allocator).
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# The Auto class that builds each family as the Go engine counts it.
ENCODERS = {"bert", "vit", "dinov2", "dinov2_with_registers", "clip_vision_model"}
IMAGES = {"vit", "dinov2", "dinov2_with_registers", "clip_vision_model"}
SEQ2SEQ = {"t5", "whisper"}
AUDIO = {"whisper"}
# Families transformers maps to a causal LM only outside AutoModelForCausalLM's
# table (5.23's mistral4: Mistral4ForCausalLM under AutoModelForPreTraining).
PRETRAINING_CAUSAL = {"mistral4"}
MULTIMODAL = {"qwen3_omni_moe"}  # AutoModelForMultimodalLM (5.23: Qwen3OmniMoeForConditionalGeneration)
# gemma3n's vision tower is timm's MobileNetV5 (requirements.txt pins timm).
VISION_LANGUAGE = {"llava", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "gemma3", "gemma3n", "gemma4", "llama4", "mistral3", "minimax_m3_vl", "kimi_k25"}


def write(args, text):
    """Writes a mode's result to -o FILE, or to stdout."""
    if args.o:
        with open(args.o, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def prepared(plan_path, what):
    """The plan tool's output for the plan: from prepared/<plan> next to it
    when there is one (the GPU grid's, for machines without Go), else from
    `go run ./examples/plan`."""
    side = os.path.join(os.path.dirname(os.path.abspath(plan_path)), "prepared", os.path.basename(plan_path))
    if os.path.exists(side):
        with open(side) as f:
            return json.load(f)[what]
    flag = {"hf_config": "-hf-config", "resolved": "-resolved"}[what]
    done = subprocess.run(["go", "run", "./examples/plan", flag, os.path.abspath(plan_path)],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:  # the plan tool names the field and the rule
        msg = "\n".join(l for l in done.stderr.splitlines() if not l.startswith("exit status"))
        raise SystemExit(msg.strip() or f"go run ./examples/plan {flag} {plan_path} failed")
    return json.loads(done.stdout)


def hf_config(plan_path):
    return prepared(plan_path, "hf_config")


def resolved(plan_path):
    return prepared(plan_path, "resolved")


def plan(plan_path):
    try:
        with open(plan_path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"{plan_path}: {e}")


DROPOUTS = ("resid_pdrop", "attn_pdrop", "embd_pdrop", "hidden_dropout_prob", "attention_probs_dropout_prob",
            "attention_dropout", "hidden_dropout", "dropout", "dropout_rate")


def build(cfg_dict, device="meta", dtype=None, attn=None, layers=None, dropout=False):
    """The model transformers builds from an HF config, with random weights.

    attn (for the training measurements) sets the attention implementation,
    seeds the weights and, unless dropout, turns dropout off (CPU dropout
    keeps float masks where CUDA keeps bool); layers overrides the number of
    blocks."""
    import torch
    import transformers

    cfg = dict(cfg_dict)
    model_type = cfg.pop("model_type")
    cfg.pop("_name_or_path", None)
    if layers is not None and model_type in VISION_LANGUAGE:
        cfg["text_config"] = dict(cfg["text_config"], num_hidden_layers=layers)
    elif layers is not None:
        cfg["n_layer" if model_type in ("gpt2", "gpt_bigcode", "gptj") else "num_hidden_layers"] = layers
    if attn is not None and not dropout:
        for k in DROPOUTS:
            cfg[k] = 0.0
    if transformers_major() >= 5:
        cfg = float_fields(transformers.CONFIG_MAPPING[model_type], cfg)
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    cls = transformers.AutoModel if model_type in ENCODERS else transformers.AutoModelForCausalLM
    if model_type in SEQ2SEQ:
        cls = transformers.AutoModelForSpeechSeq2Seq if model_type in AUDIO else transformers.AutoModelForSeq2SeqLM
    if model_type in VISION_LANGUAGE:
        cls = transformers.AutoModelForImageTextToText
    if model_type in MULTIMODAL:
        cls = transformers.AutoModelForMultimodalLM
    if model_type in PRETRAINING_CAUSAL:
        cls = transformers.AutoModelForPreTraining
    if attn == "sdpa":
        # Asked for by name, SDPA on a family without it is refused, as
        # from_pretrained(attn_implementation="sdpa") refuses it
        # (_supports_sdpa false): the plan must say eager.
        from transformers.models.auto.auto_factory import _get_model_class
        if not getattr(_get_model_class(config, cls._model_mapping), "_supports_sdpa", False):
            raise ValueError(f"{model_type} does not support SDPA attention in transformers {transformers.__version__}: the plan must ask for eager")
    if attn is not None:
        config._attn_implementation = attn
        torch.manual_seed(0)
    with torch.device(device):
        model = cls.from_config(config, dtype=dtype) if dtype else cls.from_config(config)
    return model, config


def transformers_major():
    import transformers

    return int(transformers.__version__.split(".")[0])


def float_fields(config_cls, cfg):
    """cfg with an int given for a field transformers 5's strict config
    dataclasses type float (Gemma 2's final_logit_softcapping: float | None)
    written as that float, the same value; anything else is left to the
    config's own validation."""
    import typing

    hints = {}
    for klass in reversed(config_cls.__mro__):  # the class's own annotations win
        hints.update(getattr(klass, "__annotations__", {}))
    out = dict(cfg)
    for k, v in cfg.items():
        h = hints.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and h is not None and not isinstance(h, str):
            args = typing.get_args(h) or (h,)
            if float in args and int not in args:
                out[k] = float(v)
    return out


def batch(config, train, device, dtype):
    """One training batch for the plan: token ids with labels and the all-ones
    attention mask a tokenized batch carries (without it and without a cache,
    transformers looks for packed sequences in the position ids and builds a
    4D mask, masking_utils._preprocess_mask_arguments, which turns off SDPA's
    native GQA), or images for the vision encoders in the model's dtype, or
    Whisper's log-mel frames and target tokens."""
    import torch

    b = int(train["micro_batch"])
    if config.model_type in IMAGES:
        size, ch = config.image_size, config.num_channels
        return {"pixel_values": torch.randn(b, ch, size, size, dtype=dtype, device=device)}
    if config.model_type in ("llava", "gemma3", "llama4", "mistral3"):
        return image_text_batch(config, train, device, dtype, b)
    if config.model_type == "gemma4":
        return gemma4_batch(config, train, device, b)
    if config.model_type == "kimi_k25":
        return kimi_k25_batch(config, train, device, dtype, b)
    if config.model_type in AUDIO:
        # Whisper: log-mel frames, batch × num_mel_bins × seq_len (the
        # plan's frames, 2 × max_source_positions, which the encoder
        # requires) in the model's dtype, as conv1 needs them; the
        # decoder's targets, which the model shifts into decoder inputs.
        t = int(train.get("decoder_seq_len") or config.max_target_positions)
        return {"input_features": torch.randn(b, config.num_mel_bins, int(train["seq_len"]), dtype=dtype, device=device),
                "labels": torch.randint(0, min(1000, config.vocab_size), (b, t), device=device)}
    if config.model_type == "qwen3_omni_moe":
        # Qwen3-Omni trains its thinker (omni_forward): Qwen3-VL's images
        # in the thinker's config, no mm_token_type_ids (its get_rope_index
        # finds the images by their vision-start tokens, 5.23
        # modeling_qwen3_omni_moe.py:290-311).
        return qwen_vl_batch(config.thinker_config, train, device, b, False, specials=5)
    if config.model_type in ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"):
        return qwen_vl_batch(config, train, device, b, config.model_type != "qwen2_5_vl" and transformers_major() >= 5)
    ids = torch.randint(0, min(1000, config.vocab_size), (b, int(train["seq_len"])), device=device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if config.model_type in SEQ2SEQ:
        # The decoder's targets; the model shifts them into decoder inputs.
        t = int(train.get("decoder_seq_len") or train["seq_len"])
        inputs["labels"] = torch.randint(0, min(1000, config.vocab_size), (b, t), device=device)
    elif config.model_type not in ENCODERS:
        inputs["labels"] = ids
    return inputs


def qwen_vl_batch(config, train, device, b, token_types, specials=4):
    """A Qwen-VL model's batch: the processor's output for square images of
    the plan's size: one row of channels × frames × patch² fp32 values per
    patch, the (t, h, w) patch grid of each image, and in each sequence a
    vision-start token before each image's tokens (patches / merge²);
    with token_types each token's modality. The text's tokens are drawn
    below the last specials ids of a small vocabulary (the engine's special
    tokens there)."""
    import torch

    n = int(train.get("images") or 1)
    v = config.vision_config
    g = v.image_size // v.patch_size  # the engine writes the plan's size into the config
    per = g * g // v.spatial_merge_size ** 2
    vocab = min(1000, config.text_config.vocab_size)
    ids = torch.randint(0, vocab - specials, (b, int(train["seq_len"])), device=device)
    for i in range(n):
        at = 1 + i * (per + 1)
        ids[:, at] = config.vision_start_token_id
        ids[:, at + 1:at + 1 + per] = config.image_token_id
    labels = ids.clone()
    labels[ids == config.image_token_id] = -100
    row = v.in_channels * v.temporal_patch_size * v.patch_size ** 2
    out = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
           "pixel_values": torch.randn(b * n * g * g, row, device=device),
           "image_grid_thw": torch.tensor([[1, g, g]] * (b * n), device=device)}
    if token_types:
        # transformers 5's processor returns each token's modality (0
        # text, 1 image: processing_utils.py create_mm_token_type_ids),
        # which Qwen3-VL's M-RoPE then requires (5.23
        # modeling_qwen3_vl.py:1092-1096).
        out["mm_token_type_ids"] = (ids == config.image_token_id).int()
    return out


def image_text_batch(config, train, device, dtype, b):
    """A vision-language model's batch as its processor makes it for square
    images of the tower's size: each sequence's image tokens after its first
    token (labels ignore them), the pixels — fp32 from the processor, or in
    the model's dtype where the tower does not cast them (Llama 4, Mistral
    3) — and what the model reads beside them: Gemma 3's token_type_ids (its
    image tokens attend both ways), Mistral 3's image sizes. Tokens an
    image: LLaVA's image_seq_length, Gemma 3's mm_tokens_per_image, Llama
    4's (size / patch)² × pixel_shuffle_ratio², Mistral 3's (size / patch /
    spatial_merge_size)²."""
    import torch

    t, v = config.model_type, config.vision_config
    n = int(train.get("images") or 1)
    per = {"llava": lambda: config.image_seq_length,
           "gemma3": lambda: config.mm_tokens_per_image,
           "llama4": lambda: int((v.image_size // v.patch_size) ** 2 * v.pixel_shuffle_ratio ** 2),
           "mistral3": lambda: (v.image_size // v.patch_size // config.spatial_merge_size) ** 2}[t]()
    vocab = min(1000, config.text_config.vocab_size)
    ids = torch.randint(0, vocab, (b, int(train["seq_len"])), device=device)
    ids[ids == config.image_token_index] = 0
    ids[:, 1:1 + n * per] = config.image_token_index
    labels = ids.clone()
    labels[ids == config.image_token_index] = -100
    pixel_dtype = dtype if t in ("llama4", "mistral3") else torch.float32
    out = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
           "pixel_values": torch.randn(b * n, v.num_channels, v.image_size, v.image_size, dtype=pixel_dtype, device=device)}
    if t == "gemma3":
        out["token_type_ids"] = (ids == config.image_token_index).long()
    if t == "mistral3":
        out["image_sizes"] = torch.tensor([[v.image_size, v.image_size]] * (b * n), device=device)
    return out


def kimi_k25_batch(config, train, device, dtype, b):
    """Kimi-K2.5's batch as Kimi_K25Processor makes it (5.23
    processing_kimi_k25.py, image_processing_kimi_k25.py) for square images
    of the plan's size, which its resize keeps (within max_patches): each
    image patchified to grid_h × grid_w patches of 3 × patch × patch values
    (patchify, l.124-149: the Conv2d reads them as small images), its
    image_grid_thw row [1, grid_h, grid_w] (l.148-156), and in each
    sequence one image token a merged patch (grid_thw.prod() // merge²,
    replace_image_token l.61-64) after its first token (labels ignore
    them). The pixels are in the model's dtype: the tower's Conv2d reads
    pixel_values as they come (modeling_kimi_k25.py:172, no cast). The
    image token id (163605) lies past a small vocabulary: the model zeroes
    it before the embedding (l.670-673)."""
    import torch

    v = config.vision_config
    n = int(train.get("images") or 1)
    g = v.image_size // v.patch_size  # the engine writes the plan's size into the config
    kh, kw = v.merge_kernel_size
    per = g * g // (kh * kw)
    vocab = min(1000, config.text_config.vocab_size)
    ids = torch.randint(0, vocab, (b, int(train["seq_len"])), device=device)
    ids[:, 1:1 + n * per] = config.image_token_id
    labels = ids.clone()
    labels[ids == config.image_token_id] = -100
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
            "pixel_values": torch.randn(b * n * g * g, 3, v.patch_size, v.patch_size, dtype=dtype, device=device),
            "image_grid_thw": torch.tensor([[1, g, g]] * (b * n), device=device)}


# Gemma4ImageProcessor's budgets of soft tokens an image (5.23
# image_processing_gemma4.py:30, _SUPPORTED_SOFT_TOKENS).
GEMMA4_SOFT_TOKENS = (70, 140, 280, 560, 1120)


def gemma4_batch(config, train, device, b):
    """Gemma 4's batch as Gemma4Processor makes it (5.23
    processing_gemma4.py, image_processing_gemma4.py) for square images of
    the plan's size: Gemma4ImageProcessor itself, with the smallest budget
    of soft tokens (max_soft_tokens) that holds the image, which it keeps
    at its size (aspect-ratio-preserving resize to the largest multiple of
    patch × pooling_kernel_size within the budget, l.33-87), patchifies to
    one row of patch² × 3 values in [0, 1] a patch (fp32) and pads with
    zero rows to budget × pooling_kernel_size² patches, their (x, y)
    positions -1 (l.97-111, 216-263); each sequence's image as
    boi, one image token a soft token (patches / pooling_kernel_size²),
    eoi (replace_image_token, l.184-186), after its first token (labels
    ignore the image tokens); and mm_token_type_ids, 1 at image tokens
    (return_mm_token_type_ids, l.92; processing_utils.py
    create_mm_token_type_ids)."""
    import numpy as np
    import torch
    from transformers.models.gemma4.image_processing_gemma4 import Gemma4ImageProcessor

    v = config.vision_config
    n = int(train.get("images") or 1)
    k = v.pooling_kernel_size
    size = v.image_size  # the engine writes the plan's size into the config
    soft = (size // v.patch_size) ** 2 // k ** 2
    budget = min(s for s in GEMMA4_SOFT_TOKENS if s >= soft)
    proc = Gemma4ImageProcessor(patch_size=v.patch_size, pooling_kernel_size=k, max_soft_tokens=budget)
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(b * n)]
    px = proc(images=images, return_tensors="pt")
    if any(t != soft for t in px["num_soft_tokens_per_image"]):
        raise ValueError(f"Gemma4ImageProcessor made {px['num_soft_tokens_per_image']} soft tokens, not {soft}")
    vocab = min(1000, config.text_config.vocab_size)
    specials = (config.image_token_id, config.boi_token_id, config.eoi_token_id, config.video_token_id,
                config.audio_token_id, config.boa_token_id, config.eoa_token_index)
    ids = torch.randint(0, vocab, (b, int(train["seq_len"])), device=device)
    for t in specials:
        ids[ids == t] = 0
    for i in range(n):
        at = 1 + i * (soft + 2)
        ids[:, at] = config.boi_token_id
        ids[:, at + 1:at + 1 + soft] = config.image_token_id
        ids[:, at + 1 + soft] = config.eoi_token_id
    labels = ids.clone()
    labels[ids == config.image_token_id] = -100
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
            "pixel_values": px["pixel_values"].to(device), "image_position_ids": px["image_position_ids"].to(device),
            "mm_token_type_ids": (ids == config.image_token_id).long()}


def for_training(model, train, dropout):
    """The model as the plan trains it: PEFT LoRA adapters (their dropout only
    when dropout), train mode, non-reentrant checkpointing."""
    lora = train.get("lora")
    vl = model.config.model_type in VISION_LANGUAGE or model.config.model_type in MULTIMODAL
    if model.config.model_type == "qwen3_omni_moe":
        # Qwen3-Omni's thinker: the audio tower, which no plan trains, and
        # as the plan says the vision tower up to its mergers.
        inner = model.thinker.model
        inner.audio_tower.requires_grad_(False)
        if train.get("vision_tower", "frozen") == "frozen":
            for part in (inner.visual.patch_embed, inner.visual.blocks, inner.visual.pos_embed):
                part.requires_grad_(False)
    elif vl and train.get("vision_tower", "frozen") == "frozen":
        if model.config.model_type in ("llava", "gemma3", "gemma4", "mistral3", "kimi_k25"):
            model.model.vision_tower.requires_grad_(False)
        elif model.config.model_type == "llama4":
            model.vision_model.requires_grad_(False)
        else:  # the tower up to its mergers, which train with the language model
            model.model.visual.patch_embed.requires_grad_(False)
            model.model.visual.blocks.requires_grad_(False)
            if model.config.model_type in ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"):
                model.model.visual.pos_embed.requires_grad_(False)
    if lora:
        import peft
        targets = lora["targets"] if lora["targets"] != ["all_linear"] else "all-linear"
        if vl:
            # The language model's linears only (the tower and the
            # projector stay as the plan says).
            names = lora["targets"] if lora["targets"] != ["all_linear"] else \
                ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
            targets = r".*language_model.*\.(" + "|".join(names) + ")"
        model = peft.get_peft_model(model, peft.LoraConfig(
            r=lora["rank"], lora_alpha=lora.get("alpha", 2 * lora["rank"]),
            lora_dropout=lora.get("dropout", 0.0) if dropout else 0.0, target_modules=targets))
    model.train()
    kwargs = {"use_reentrant": False}
    if "checkpoint_early_stop" in train:
        # torch.utils.checkpoint's early_stop (the plan's
        # checkpoint_early_stop; torch's default True).
        kwargs["early_stop"] = bool(train["checkpoint_early_stop"])
    if train.get("grad_checkpointing") == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    elif train.get("grad_checkpointing") == "op":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(kwargs, context_fn=op_sac_context))
    return model


def op_sac_context():
    """torchtitan's op-level selective checkpointing policy
    (torchtitan/distributed/activation_checkpoint.py, _apply_op_sac): the
    outputs of every other mm, of the fused attention kernels and of max are
    saved, everything else is recomputed in backward. The CPU's fused SDPA
    kernel joins the CUDA ones so a CPU trace behaves as a GPU run."""
    from collections import defaultdict

    import torch
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    ops = torch.ops.aten
    save = {ops.mm.default, ops._scaled_dot_product_efficient_attention.default,
            ops._scaled_dot_product_flash_attention.default, ops.max.default}
    if hasattr(ops, "_scaled_dot_product_flash_attention_for_cpu"):
        save.add(ops._scaled_dot_product_flash_attention_for_cpu.default)
    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = ("recompute" if ctx.is_recompute else "forward") + "_mm_count"
        if func == ops.mm.default:
            meta[key] += 1
        # Saves odd-numbered mms (1st, 3rd, ...), recomputes the others.
        if func in save and not (func == ops.mm.default and meta[key] % 2 == 0):
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def optimizer(train, params):
    """The plan's optimizer over params (the learning rate does not change
    the memory); foreach, as PyTorch picks on CUDA."""
    import torch

    name = train.get("optimizer", "adamw")
    make = {"adamw": lambda: torch.optim.AdamW(params, lr=1e-4, foreach=True),
            "adam": lambda: torch.optim.Adam(params, lr=1e-4, foreach=True),
            "sgd": lambda: torch.optim.SGD(params, lr=1e-3),
            "sgd_momentum": lambda: torch.optim.SGD(params, lr=1e-3, momentum=0.9)}
    if name not in make:
        raise SystemExit(f"examples/measure runs train.optimizer {', '.join(make)}; the plan says {name!r}")
    return make[name]()


def keeps_output(train):
    """Whether the plan's training loop keeps the model output through
    backward: a plain loop (and litgpt's) does; the HF Trainer, torchtune
    and torchtitan keep only the loss."""
    return train.get("framework", "plain_pytorch") in ("plain_pytorch", "litgpt")


def trained(model):
    """The module a training step calls: the model, or Qwen3-Omni's thinker
    (Qwen3OmniMoeForConditionalGeneration has no forward of its own, only
    generate: 5.23 modeling_qwen3_omni_moe.py:3950-4055)."""
    if model.config.model_type == "qwen3_omni_moe":
        return model.thinker
    return model


def loss_of(out, config):
    """The loss to backpropagate: the LM loss, or for a bare encoder the sum of
    its outputs, so every parameter gets a gradient (the pooler's too), as
    under a task head."""
    if config.model_type in ENCODERS:
        return out.last_hidden_state.float().sum() + out.pooler_output.float().sum()
    return out.loss


def inventory(args):
    import torch
    import transformers

    cfg = hf_config(args.plan)
    model, _ = build(cfg)
    params = [{"name": n, "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", "")}
              for n, p in model.named_parameters()]
    buffers = [{"name": n, "shape": list(b.shape), "dtype": str(b.dtype).replace("torch.", "")}
               for n, b in model.named_buffers()]
    out = {"plan": os.path.basename(args.plan), "hf_config": cfg, "torch": torch.__version__,
           "transformers": transformers.__version__, "class": type(model).__name__,
           "parameters": params, "buffers": buffers,
           "total_parameters": sum(p.numel() for p in model.parameters())}
    write(args, json.dumps(out, separators=(",", ":")) + "\n")


def class_defaults(args):
    """Each model type's config class with nothing set, built on the meta
    device: its parameter count, the number a config.json that leaves every
    key out stands for (the Go tests compare the engine's reading of
    {"model_type": T} with it). A type transformers builds no model of on
    its own (a vision tower's config) is listed with the reason."""
    import torch
    import transformers

    out = {}
    for model_type in args.model_types:
        try:
            model, _ = build({"model_type": model_type})
            out[model_type] = sum(p.numel() for p in model.parameters())
        except Exception as e:  # the reason, first line only
            out[model_type] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    write(args, json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                            "parameters": out}, indent=1, sort_keys=True) + "\n")


def blocks_of(model):
    """The model's repeated blocks: the largest nn.ModuleList it holds
    (decoder layers, encoder layers, GPT-2's h)."""
    import torch

    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    return max(lists, key=len)


def saved_bytes(cfg, layers, attn, dtype, batch, seq, compile_=False, float8=None):
    import torch

    model, config = build(cfg, device="cpu", attn=attn, layers=layers)
    model = model.to(dtype)
    model_type = config.model_type
    model.train()
    if float8:
        # torchao's float8 training on every linear but the output layer,
        # as torchtitan's float8 converter does (torch._scaled_mm runs on
        # the CPU too).
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        head = model.get_output_embeddings()
        convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(float8),
                                   module_filter_fn=lambda m, fqn: m is not head)
    if compile_:
        # Each block compiled on its own, as torchtitan and torchtune do
        # (Inductor's default partitioner decides what it saves).
        for blk in blocks_of(model):
            blk.compile()
    ids = torch.randint(0, min(1000, config.vocab_size), (batch, seq))
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        seen.setdefault(st.data_ptr(), st.nbytes())
        return t

    owned = {p.untyped_storage().data_ptr() for p in model.parameters()}
    owned |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        kw = {"input_ids": ids} if model_type in ENCODERS else {"input_ids": ids, "labels": ids}
        model(**kw)
    return sum(v for k, v in seen.items() if k not in owned)


def saved(args):
    import torch
    import transformers

    p = plan(args.plan)
    train = p["train"]
    cfg = hf_config(args.plan)
    dtype = torch.bfloat16 if train.get("precision") == "bf16" else torch.float32
    attn = {"sdpa": "sdpa", "eager": "eager"}[train.get("attention", "sdpa")]
    b, s = int(train["micro_batch"]), int(train["seq_len"])
    one, two = (saved_bytes(cfg, n, attn, dtype, b, s, bool(train.get("compile")), train.get("float8")) for n in (1, 2))
    out = {"plan": p, "torch": torch.__version__, "transformers": transformers.__version__,
           "per_block": two - one, "outside_blocks": 2 * one - two}
    write(args, json.dumps(out, indent=1) + "\n")


def StorageTracker(model, inputs=()):
    """A live-storage tracker for what MemTracker refuses (frozen parameters,
    as under LoRA). A TorchDispatchMode sees every tensor an op returns; each
    new storage is counted until it is freed, in the category of the phase
    that created it (ACT in the forward pass, TEMP in backward, OPT in the
    optimizer step) or GRAD when it is a parameter's .grad at the peak. The
    parameters and buffers are counted apart, as MemTracker does. `peak` is
    the composition at the most live bytes since the last reset."""
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    def ptr(t):
        return t.untyped_storage().data_ptr()

    owned = {ptr(q): q.untyped_storage().nbytes() for q in model.parameters()}
    # The batch exists before the tracker starts; a view of it (Qwen2.5-VL's
    # pixel rows) is not a new storage.
    batch_storages = {ptr(t) for t in inputs}
    bufs = {ptr(b): b.untyped_storage().nbytes() for b in model.buffers()}
    base = {"PARAM": sum(owned.values()), "BUFFER": sum(bufs.values())}

    class Tracker(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.live = {}  # data_ptr -> (bytes, category)
            self.current = "ACT"
            self.reset()

        def reset(self):
            self.total, self.peak = -1, None

        def phase(self, name):
            self.current = {"forward": "ACT", "backward": "TEMP", "optimizer": "OPT"}[name]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                    continue
                st = t.untyped_storage()
                k = st.data_ptr()
                if k in self.live or k in owned or k in bufs or k in batch_storages or st.nbytes() == 0:
                    continue
                self.live[k] = (st.nbytes(), self.current)
                weakref.finalize(st, self.live.pop, k, None)
            total = sum(b for b, _ in self.live.values())
            if total > self.total:
                self.total = total
                grads = {ptr(q.grad) for q in model.parameters() if q.grad is not None}
                peak = dict(base, GRAD=0, ACT=0, TEMP=0, OPT=0)
                for k, (b, cat) in self.live.items():
                    peak["GRAD" if k in grads else cat] += b
                peak["Total"] = sum(peak.values())
                self.peak = peak
            return out

    return Tracker()


def trace(args):
    import torch
    import transformers

    p = plan(args.plan)
    train = p["train"]
    cfg = hf_config(args.plan)
    precision = train.get("precision", "fp32")

    def setup():
        """A fresh model, optimizer and batch for one traced run."""
        torch.manual_seed(0)
        model, config = build(cfg, device="cpu", attn=train.get("attention", "sdpa"))
        if precision == "bf16":
            model = model.to(torch.bfloat16)
        model = for_training(model, train, dropout=False)
        params = [q for q in model.parameters() if q.requires_grad]
        opt = optimizer(train, params)
        inputs = batch(config, train, "cpu", next(model.parameters()).dtype)
        frozen = len(params) < sum(1 for _ in model.parameters())

        keep = keeps_output(train)
        unrouted = []  # per iteration: routed experts the batch sent no token to

        def step(phase):
            phase("forward")
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "amp_bf16"):
                out = trained(model)(**inputs)
                loss = loss_of(out, config)
            if not keep:
                out = None  # the HF Trainer's compute_loss returns only the loss
            phase("backward")
            loss.backward()
            unrouted.append(unrouted_experts(model))
            del out, loss
            phase("optimizer")
            opt.step()
            opt.zero_grad(set_to_none=True)

        return model, opt, step, frozen, [t for t in inputs.values() if isinstance(t, torch.Tensor)], unrouted

    def with_storage():
        model, _, step, frozen, batch_tensors, unrouted = setup()
        tracker, peaks = StorageTracker(model, batch_tensors), []
        with tracker:
            for _ in range(2):
                step(tracker.phase)
                peaks.append(tracker.peak)
                tracker.reset()
        return peaks, frozen, unrouted

    def with_memtracker():
        from torch.distributed._tools.mem_tracker import MemTracker

        model, opt, step, _, batch_tensors, _ = setup()
        mt, peaks = MemTracker(), []
        # The batch as "other" (OTH), which the comparison leaves out.
        mt.track_external(model, opt, *batch_tensors)
        with mt:
            for _ in range(2):
                step(lambda name: None)
                snap = list(mt.get_tracker_snapshot("peak").values())[0]
                peaks.append({str(k).split(".")[-1]: v for k, v in snap.items()})
                mt.reset_mod_stats()
        return peaks

    out = {"plan": p, "torch": torch.__version__, "transformers": transformers.__version__}
    storage, frozen, unrouted = with_storage()
    if any(unrouted):
        # Routed experts the batch sent no token to, per iteration: no
        # autocast weight copies, no gradients, and no optimizer states
        # after the first step (the engine routes every expert its share).
        out["experts_without_tokens"] = unrouted
    if frozen:
        # MemTracker refuses frozen parameters (LoRA): the live-storage
        # tracker's peaks stand in.
        out["iteration1"], out["iteration2"] = storage
    else:
        out["iteration1"], out["iteration2"] = with_memtracker()
    out["storage"] = {"iteration1": storage[0], "iteration2": storage[1]}
    write(args, json.dumps(out, indent=1) + "\n")


def unrouted_experts(model):
    """How many routed experts (modules in a ModuleList named experts) have
    no gradient after a backward: the router sent them no token."""
    import torch

    n = 0
    for name, mod in model.named_modules():
        if name.endswith(".experts") and isinstance(mod, torch.nn.ModuleList):
            for ex in mod:
                ps = [q for q in ex.parameters() if q.requires_grad]
                if ps and all(q.grad is None for q in ps):
                    n += 1
    return n


def grid(args):
    import itertools
    import tempfile

    with open(args.grid) as f:
        g = json.load(f)
    axes = g["grid"]
    keys = ["precision", "attention", "grad_checkpointing", "optimizer"]
    os.makedirs(args.outdir, exist_ok=True)
    for name, model in g["models"].items():
        if args.only and name not in args.only:
            continue
        # A model's own "train" keys (a trainable vision tower, say) join
        # the grid's; its own "grid" axes replace the grid's (gpt-oss has
        # no SDPA attention to trace).
        own = {k: v for k, v in model.items() if k not in ("train", "grid")}
        model_axes = dict(axes, **model.get("grid", {}))
        for point in itertools.product(*(model_axes[k] for k in keys)):
            train = dict(g["train"], **model.get("train", {}), **dict(zip(keys, point)))
            p = {"name": " ".join((name,) + point), "model": dict(own, name=name), "train": train}
            out = os.path.join(args.outdir, "-".join((name,) + point) + ".json")
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
                json.dump(p, tmp)
            try:
                trace(argparse.Namespace(plan=tmp.name, o=out))
            finally:
                os.unlink(tmp.name)
            print("trace", os.path.basename(out), flush=True)


def deep(args):
    """The end of the forward: every family of the trace grid deepened to
    16 blocks (24 for an encoder-decoder, 12 of them decoder) with a
    64-token vocabulary, under bf16 autocast without checkpointing, so
    that what the forward holds (the cache's keys and values, the last
    hidden state) outweighs the logits; traced in a loop that keeps the
    model output through backward (plain_pytorch) and in one that keeps
    only the loss (hf_trainer). Encoders and families without a vocabulary
    are left out. One trace per family and loop in outdir
    (vram/testdata/deep/)."""
    import copy
    import tempfile

    with open(args.grid) as f:
        g = json.load(f)
    os.makedirs(args.outdir, exist_ok=True)
    for name, model in g["models"].items():
        m = copy.deepcopy(model)
        axes = m.pop("grid", {})
        own_train = m.pop("train", {})
        if "vocab" not in m or m.get("family") in ENCODERS:
            continue
        if "amp_bf16" not in axes.get("precision", ["amp_bf16"]):
            continue  # its model cannot train under autocast (Qwen3-VL-MoE's router raises)
        m["vocab"] = 64
        if m.get("decoder_layers"):
            m["layers"], m["decoder_layers"] = 24, 12
        else:
            m["layers"] = 16
        m.pop("params", None)
        attn = "sdpa" if "sdpa" in axes.get("attention", ["sdpa"]) else "eager"
        deep_name = name.replace("-tiny", "-deep")
        for framework, tag in (("plain_pytorch", deep_name), ("hf_trainer", deep_name.replace("-deep", "-deep-trainer", 1))):
            train = dict(g["train"], **own_train, precision="amp_bf16", attention=attn, grad_checkpointing="none",
                         optimizer="adamw", framework=framework)
            p = {"name": f"{tag} amp_bf16 {attn} none adamw", "model": dict(m, name=deep_name), "train": train}
            out = os.path.join(args.outdir, f"{tag}-amp_bf16-{attn}-none-adamw.json")
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
                json.dump(p, tmp)
            try:
                trace(argparse.Namespace(plan=tmp.name, o=out))
            finally:
                os.unlink(tmp.name)
            print("deep", os.path.basename(out), flush=True)


class SnapshotRecorder:
    """Records a CPU run in the format of torch.cuda.memory._snapshot():
    each new storage an op creates is an alloc entry with the Python stack
    (innermost frame first, the recorder's own frames left out), its release
    a free_requested and a free_completed entry; phase() sets the
    user_metadata of the entries that follow, as _set_memory_metadata does
    on a GPU. Identical frames are one object, so the pickle stays small."""

    def __init__(self, max_frames=10):
        import traceback
        import weakref

        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        rec = self
        self.entries, self.live, self.frames, self.phase_name = [], {}, {}, "setup"
        self.t0 = None

        def stack():
            out = []
            for fs in reversed(traceback.extract_stack()):
                if not out and (fs.filename == __file__ and fs.name in ("stack", "entry", "__torch_dispatch__")
                                or "_python_dispatch" in fs.filename):
                    continue  # the recorder itself
                key = (fs.filename, fs.lineno, fs.name)
                f = rec.frames.get(key)
                if f is None:
                    # Paths as a reader can place them, not this machine's.
                    name = fs.filename
                    if "site-packages/" in name:
                        name = "site-packages/" + name.split("site-packages/", 1)[1]
                    elif name.startswith(ROOT + os.sep):
                        name = os.path.relpath(name, ROOT)
                    f = rec.frames[key] = {"filename": name, "line": fs.lineno, "name": fs.name}
                out.append(f)
                if len(out) == max_frames:
                    break
            return out

        def entry(action, addr, size, frames):
            import time
            t = int(time.time() * 1e6)
            rec.entries.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
                                "frames": frames, "user_metadata": rec.phase_name})

        def released(addr, size):
            rec.live.pop(addr, None)
            entry("free_requested", addr, size, [])
            entry("free_completed", addr, size, [])

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in tree_flatten(out)[0]:
                    if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                        continue
                    st = t.untyped_storage()
                    k = st.data_ptr()
                    if k in rec.live or st.nbytes() == 0:
                        continue
                    rec.live[k] = st.nbytes()
                    entry("alloc", k, st.nbytes(), stack())
                    weakref.finalize(st, released, k, st.nbytes())
                return out

        self.mode = Mode()

    def phase(self, name):
        self.phase_name = name

    def snapshot(self):
        return {"segments": [], "device_traces": [list(self.entries)]}


def snapshot(args):
    import pickle

    import torch

    p = plan(args.plan)
    train = p["train"]
    cfg = hf_config(args.plan)
    precision = train.get("precision", "fp32")
    torch.manual_seed(0)
    rec = SnapshotRecorder()
    with rec.mode:
        rec.phase("setup")
        model, config = build(cfg, device="cpu", attn=train.get("attention", "sdpa"))
        if precision == "bf16":
            model = model.to(torch.bfloat16)
        model = for_training(model, train, dropout=False)
        opt = optimizer(train, [q for q in model.parameters() if q.requires_grad])
        for _ in range(args.steps):
            rec.phase("data")
            inputs = batch(config, train, "cpu", next(model.parameters()).dtype)
            rec.phase("forward")
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "amp_bf16"):
                out = trained(model)(**inputs)
                loss = loss_of(out, config)
            if not keeps_output(train):
                out = None  # the HF Trainer's compute_loss returns only the loss
            rec.phase("backward")
            loss.backward()
            del out, loss
            rec.phase("optimizer")
            opt.step()
            opt.zero_grad(set_to_none=True)
            del inputs
    with open(args.o, "wb") as f:
        pickle.dump(rec.snapshot(), f, protocol=4)
    print(f"{args.o}: {len(rec.entries)} trace entries, torch {torch.__version__}")


def gpu(args):
    import torch
    import transformers

    p = plan(args.plan)
    train = p.get("train")
    if train is None:
        raise SystemExit("gpu mode measures training plans: the plan has no \"train\" object")
    cfg = hf_config(args.plan)
    seq, mb = int(train["seq_len"]), int(train["micro_batch"])
    # Pure precisions store the weights in their dtype; amp keeps fp32 weights
    # and runs the forward under autocast.
    precisions = {"fp32": (torch.float32, None), "bf16": (torch.bfloat16, None), "fp16": (torch.float16, None),
                  "amp_bf16": (torch.float32, torch.bfloat16), "amp_fp16": (torch.float32, torch.float16)}
    precision = train.get("precision", "fp32")
    if precision not in precisions:
        raise SystemExit(f"gpu mode runs train.precision {', '.join(precisions)}; the plan says {precision!r}")
    dtype, amp = precisions[precision]
    attn = train.get("attention", "sdpa")
    device = args.device
    if device == "cuda" and not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: use --dry-run to check the plan on the CPU")
    on_gpu = device == "cuda"
    if args.dry_run:
        model, _ = build(cfg, device="cpu", dtype=dtype)
        n = sum(p.numel() for p in model.parameters())
        print(json.dumps({"dry_run": True, "parameters": n, "seq_len": seq, "micro_batch": mb, "dtype": str(dtype),
                          "autocast": str(amp), "attention": attn}))
        return
    try:
        import pynvml  # nvidia-ml-py; without it the NVML numbers are left out
    except ImportError:
        pynvml = None
    dev = torch.cuda.current_device() if on_gpu else None

    def nvml_used():
        if pynvml is None or not on_gpu:
            return None
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(dev)).used

    torch.ones(1, device=device)
    context = nvml_used()
    # The allocator's history, for the snapshot written beside the line.
    record = on_gpu and hasattr(torch.cuda.memory, "_record_memory_history")
    marker = getattr(torch.cuda.memory, "_set_memory_metadata", None) if record else None

    def phase(name):
        if marker is not None:
            marker(name)

    if record:
        torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    phase("setup")
    model, config = build(cfg, device=device, dtype=dtype, attn=attn, dropout=True)
    model = for_training(model, train, dropout=True)
    opt = optimizer(train, [q for q in model.parameters() if q.requires_grad])
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    used_peak = None
    keep = keeps_output(train)
    for _ in range(args.steps):
        phase("data")
        inputs = batch(config, train, device, dtype)
        phase("forward")
        with torch.autocast(device, dtype=amp or torch.bfloat16, enabled=amp is not None):
            out = trained(model)(**inputs)
            loss = loss_of(out, config)
        if not keep:
            del out
        phase("backward")
        loss.backward()
        out = loss = None
        phase("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        used = nvml_used()
        used_peak = None if used is None else max(used_peak or 0, used)
    snap = None
    if record:
        snap = args.snapshot or os.path.splitext(os.path.basename(args.plan))[0] + ".snapshot.pickle"
        torch.cuda.memory._dump_snapshot(snap)
        torch.cuda.memory._record_memory_history(enabled=None)
    gib = 2 ** 30
    allocated = torch.cuda.max_memory_allocated() if on_gpu else 0
    reserved = torch.cuda.max_memory_reserved() if on_gpu else 0
    nvml = (f"NVML used peak {used_peak / gib:.3f} GiB, CUDA context {context / gib:.3f} GiB"
            if used_peak is not None else "NVML not available")
    rs = resolved(args.plan)
    tr = rs["train"]
    tr.pop("model", None)
    q = tr.pop("quantized_base", {}) or {}
    tr["quantized_base"] = q.get("dtype", "none") if q.get("dtype") not in (None, "unset") else "none"
    if q.get("group_size"):
        tr["group_size"] = q["group_size"]
    tr["double_quant"] = bool(q.get("double_quant"))
    case = {"id": "measure_" + os.path.splitext(os.path.basename(args.plan))[0], "source": "examples/measure gpu mode",
            "trust": "A", "kind": "train", "model": rs["model"], "train": rs["train"], "gpu": torch.cuda.get_device_name(dev) if on_gpu else "cpu (a test run)",
            "measured": {"what": "allocated_peak", "gib": round(allocated / gib, 3),
                         "includes_cuda_context": False, "per": "gpu"},
            "inferred": [],
            "notes": (f"reported={allocated} bytes; reserved peak {reserved / gib:.3f} GiB, "
                      f"{nvml}; torch {torch.__version__}, transformers {transformers.__version__}, "
                      f"{args.steps} steps of plan {os.path.basename(args.plan)}"
                      + (f"; memory snapshot {snap}" if snap else ""))}
    print(json.dumps(case))


def grid_hf_config(model, train):
    """The HF config of a grid point's model (the Go engine builds it from
    the plan, so both sides build the same architecture)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"model": model, "train": train}, f)
    try:
        return hf_config(f.name)
    finally:
        os.unlink(f.name)


def tracker_peak(mt, member_names=False):
    """A tracker's peak snapshot of the one device, by category: the enum
    member's name (PARAM, ACT, …, as the trace mode writes MemTracker's) or
    its value (FSDPMemTracker's "Sharded Param", …)."""
    snap = list(mt.get_tracker_snapshot("peak").values())[0]
    if member_names:
        return {str(k).split(".")[-1]: v for k, v in snap.items()}
    return {k if isinstance(k, str) else str(k).split(".")[-1]: v for k, v in snap.items()}


def write_trace(outdir, fname, plan_, peaks):
    """One distributed trace file: the plan and the peaks of two iterations."""
    import torch
    import transformers

    out = {"plan": plan_, "torch": torch.__version__, "transformers": transformers.__version__,
           "iteration1": peaks[0], "iteration2": peaks[1]}
    with open(os.path.join(outdir, fname), "w") as f:
        f.write(json.dumps(out, indent=1) + "\n")


def fsdp(args):
    """FSDP2 traced by PyTorch's FSDPMemTracker on a fake process group.

    One process on the CPU stands for rank 0 of a world of N
    (torch.testing._internal.distributed.fake_pg.FakeStore: collectives
    return at once with their outputs allocated, as on a GPU). The model is
    wrapped as torchtitan and the FSDP2 docs do: fully_shard on every
    decoder block (reshard_after_forward as the plan says), then on the
    root, whose own parameters (embedding, final norm, output layer) form
    the root's group. Mixed precision is MixedPrecisionPolicy(param_dtype=
    bf16, reduce_dtype=fp32): fp32 sharded parameters, gradients and
    optimizer states, bf16 unsharded parameters and compute.

    torch.compile is not a grid axis: the tracker is a TorchDispatchMode,
    and Dynamo skips every frame while one is active
    (torch/_dynamo/convert_frame.py), so compiled blocks would run eagerly
    and trace as eager ones; the saved mode checks compiled blocks instead.
    """
    import itertools

    import torch
    import torch.distributed as dist
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    g = json.load(open(args.grid))
    os.makedirs(args.outdir, exist_ok=True)
    axes = g["grid"]
    for (name, mcfg), world, prec, reshard, ckpt in itertools.product(
            g["models"].items(), axes["world"], axes["precision"], axes["reshard_after_forward"], axes["grad_checkpointing"]):
        train = dict(g["train"], grad_checkpointing=ckpt)
        if prec == "bf16_param":
            # FSDP2's MixedPrecisionPolicy: fp32 storage, bf16 compute.
            train.update(precision="fp32", compute_dtype="bf16")
        else:
            train["precision"] = prec
        p = {"name": f"{name} fsdp2 world {world} {prec} reshard {reshard} {ckpt}",
             "model": dict(mcfg, name=name), "train": train}
        cfg = grid_hf_config(p["model"], {k: v for k, v in train.items() if k != "compute_dtype"})
        p["train"]["parallel"] = {"dp": world, "fsdp": "full_shard", "fsdp_version": 2, "reshard_after_forward": reshard}

        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
        torch.manual_seed(0)
        model, config = build(cfg, device="cpu", attn=train.get("attention", "sdpa"))
        model = for_training(model, train, dropout=False)
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if prec == "bf16_param" else MixedPrecisionPolicy()
        for block in model.model.layers:
            fully_shard(block, reshard_after_forward=reshard, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        opt = optimizer(train, [q for q in model.parameters() if q.requires_grad])
        inputs = batch(config, train, "cpu", torch.float32)
        mt, peaks = FSDPMemTracker(model, opt), []
        mt.track_inputs(tuple(t for t in inputs.values() if isinstance(t, torch.Tensor)))
        with mt:
            for _ in range(2):
                out = model(**inputs)
                loss = loss_of(out, config)
                if not keeps_output(train):
                    out = None
                loss.backward()
                out = loss = None
                opt.step()
                opt.zero_grad(set_to_none=True)
                peaks.append(tracker_peak(mt))
                mt.reset_mod_stats()
        dist.destroy_process_group()
        fname = f"{name}-fsdp2-w{world}-{prec}-{'reshard' if reshard else 'keep'}-{ckpt}.json"
        write_trace(args.outdir, fname, p, peaks)
        print("fsdp", fname, peaks[1].get("Total"))


def fsdp1(args):
    """FSDP1 (FullyShardedDataParallel, flat parameters) under LoRA, on a fake
    process group on the CPU: which decoder blocks are unsharded when each
    block's backward starts, and which flat parameters get a gradient, after
    a synced backward and after one inside no_sync().

    Two wrappings of a tiny Llama with PEFT adapters: "shared" (the adapters
    in their block's unit, use_orig_params=True, as Lightning's
    FSDPStrategy(auto_wrap_policy={Block}) does under litgpt) and "apart"
    (PEFT's fsdp_auto_wrap_policy: each adapter linear a unit of its own,
    use_orig_params=False, as transformers' Trainer applies it to PEFT
    models), × checkpointing none or full (transformers' non-reentrant
    gradient checkpointing, around each block's FSDP unit). A grid point
    that does not run writes its error instead.
    """
    import functools
    import itertools

    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy, _or_policy, lambda_auto_wrap_policy, transformer_auto_wrap_policy
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    g = json.load(open(args.grid))
    os.makedirs(args.outdir, exist_ok=True)
    axes = g["grid"]
    for (name, mcfg), wrap, ckpt in itertools.product(g["models"].items(), axes["wrap"], axes["grad_checkpointing"]):
        world = g["world"]
        train = dict(g["train"], grad_checkpointing=ckpt)
        p = {"name": f"{name} fsdp1 world {world} lora {wrap} {ckpt}", "model": dict(mcfg, name=name),
             "train": dict(train, parallel={"dp": world, "fsdp": "full_shard", "fsdp_version": 1, "fsdp_adapter_units": wrap})}
        cfg = grid_hf_config(p["model"], train)
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
        out = {"plan": p, "torch": torch.__version__}
        try:
            torch.manual_seed(0)
            model, config = build(cfg, device="cpu", attn=train.get("attention", "sdpa"))
            model = for_training(model, train, dropout=False)
            adapters = [sum(q.numel() for q in m.parameters() if q.requires_grad)
                        for m in model.modules() if isinstance(m, LlamaDecoderLayer)]
            if wrap == "shared":
                policy, orig = ModuleWrapPolicy({LlamaDecoderLayer}), True
            else:
                # peft.utils.other.fsdp_auto_wrap_policy
                def trainable_leaf(m):
                    w = getattr(m, "weight", None)
                    return len(list(m.named_children())) == 0 and w is not None and w.requires_grad
                policy = functools.partial(_or_policy, policies=[
                    functools.partial(lambda_auto_wrap_policy, lambda_fn=trainable_leaf),
                    functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})])
                orig = False
            fm = FSDP(model, auto_wrap_policy=policy, use_orig_params=orig, device_id=torch.device("cpu"))
            blocks = [m for m in fm.modules() if isinstance(m, FSDP) and isinstance(m.module, LlamaDecoderLayer)]

            def unsharded():
                full = [b._handle.flat_param._full_param_padded for b in blocks]
                return [i for i, f in enumerate(full) if f.untyped_storage().size() > 0]

            starts = []
            for i, b in enumerate(blocks):
                def hook(mod, inp, outp, i=i):
                    o = outp[0] if isinstance(outp, tuple) else outp
                    if o.requires_grad and not any(s[0] == i for s in starts):
                        o.register_hook(lambda grad, i=i: starts.append([i, unsharded()]))
                b.register_forward_hook(hook)
            inputs = batch(config, train, "cpu", torch.float32)

            def grads():
                return [None if b._handle.flat_param.grad is None else b._handle.flat_param.grad.numel() for b in blocks]

            # What autograd saves in one forward: distinct storages, not the
            # flat parameters' (unsharded or sharded).
            params = {b._handle.flat_param.untyped_storage().data_ptr() for b in fm.modules() if isinstance(b, FSDP) and b._handle}
            saved = {}

            def pack(x):
                st = x.untyped_storage()
                full = [b._handle.flat_param._full_param_padded.untyped_storage().data_ptr()
                        for b in fm.modules() if isinstance(b, FSDP) and b._handle]
                if st.size() > 0 and st.data_ptr() not in params and st.data_ptr() not in full:
                    saved[st.data_ptr()] = st.nbytes()
                return x
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
                loss = loss_of(fm(**inputs), config)
            saved_bytes = sum(saved.values())
            loss.backward()
            fm.zero_grad(set_to_none=True)
            with fm.no_sync():
                loss_of(fm(**inputs), config).backward()
            no_sync = grads()
            starts.clear()
            loss_of(fm(**inputs), config).backward()
            fp = [b._handle.flat_param for b in blocks]
            out.update({
                "blocks": len(blocks),
                "flat_param_numel": [f.numel() for f in fp],
                "unsharded_numel": [f._unpadded_unsharded_size.numel() for f in fp],
                "padded_unsharded_numel": [f._padded_unsharded_size.numel() for f in fp],
                "flat_param_requires_grad": [f.requires_grad for f in fp],
                "adapter_numel": adapters,
                "saved_bytes_forward": saved_bytes,
                "unsharded_at_backward_start": sorted(starts, reverse=True),
                "grad_numel_after_no_sync": no_sync,
                "grad_numel_after_sync": grads(),
            })
        except Exception as e:  # noqa: BLE001 - the grid point's failure is its result
            out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        dist.destroy_process_group()
        fname = f"{name}-fsdp1-lora-{wrap}-{ckpt}.json"
        with open(os.path.join(args.outdir, fname), "w") as f:
            f.write(json.dumps(out, indent=1) + "\n")
        print("fsdp1", fname, out.get("error", "ok"))


def apply_tp(model, mesh, sp, lp):
    """torchtitan's TP plan on a transformers Llama (tp's docstring): q/k/v
    and gate/up ColwiseParallel, o/down RowwiseParallel, the embedding
    RowwiseParallel, the output layer ColwiseParallel with its logits
    sharded over the vocabulary (lp) or gathered; sp adds
    SequenceParallel norms and sequence-sharded hand-offs."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    for block in model.model.layers:
        plan_ = {
            "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()}
        if sp:
            # torchtitan's apply_tp: the norms run on sequence shards,
            # the attention and the MLP all-gather their input and
            # reduce-scatter their output. transformers passes the
            # attention's input as a keyword.
            plan_.update({
                "input_layernorm": SequenceParallel(), "post_attention_layernorm": SequenceParallel(),
                "self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                                desired_input_kwarg_layouts={"hidden_states": Replicate()}),
                "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1)),
                "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
                "mlp.down_proj": RowwiseParallel(output_layouts=Shard(1))})
        parallelize_module(block, mesh, plan_)
    head = ColwiseParallel(input_layouts=Shard(1) if sp else Replicate(),
                           output_layouts=Shard(-1) if lp else Replicate(), use_local_output=not lp)
    top = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1) if sp else Replicate()),
           "lm_head": head}
    if sp:
        top["model.norm"] = SequenceParallel()
    parallelize_module(model, mesh, top)


def tp(args):
    """Tensor parallelism through DTensor, traced by MemTracker on a fake
    process group (one process on the CPU stands for rank 0 of the TP group).

    The plan torchtitan applies to a Llama: the embedding RowwiseParallel,
    q/k/v and gate/up ColwiseParallel, o/down RowwiseParallel, and the
    output layer ColwiseParallel with its logits either sharded over the
    vocabulary and the loss computed under loss_parallel() (loss_parallel
    true), or all-gathered to every rank (false). With sp the norms are
    SequenceParallel, the embedding and o/down hand on sequence shards, and
    the attention and the MLP all-gather their input (PrepareModuleInput);
    without, activations are replicated between the sublayers.
    """
    import contextlib
    import itertools

    import torch
    import torch.distributed as dist
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel,
                                                   loss_parallel, parallelize_module)
    from torch.testing._internal.distributed.fake_pg import FakeStore

    g = json.load(open(args.grid))
    os.makedirs(args.outdir, exist_ok=True)
    axes = g["grid"]
    for (name, mcfg), degree, lp, sp in itertools.product(g["models"].items(), axes["tp"], axes["loss_parallel"], axes["sp"]):
        train = dict(g["train"])
        p = {"name": f"{name} tp {degree} loss_parallel {lp} sp {sp}", "model": dict(mcfg, name=name), "train": train}
        cfg = grid_hf_config(p["model"], train)
        p["train"] = dict(train, parallel={"tp": degree, "loss_parallel": lp, "sp": sp})

        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=degree)
        mesh = init_device_mesh("cpu", (degree,))
        torch.manual_seed(0)
        model, config = build(cfg, device="cpu", attn=train.get("attention", "sdpa"))
        model = for_training(model, train, dropout=False)
        apply_tp(model, mesh, sp, lp)
        # foreach cannot mix DTensor and plain tensors (the replicated
        # norms): one parameter group of each, as foreach groups tensors.
        from torch.distributed.tensor import DTensor
        params = [q for q in model.parameters() if q.requires_grad]
        opt = optimizer(train, [{"params": [q for q in params if isinstance(q, DTensor)]},
                                {"params": [q for q in params if not isinstance(q, DTensor)]}])
        inputs = batch(config, train, "cpu", torch.float32)
        ids = inputs["input_ids"]
        # Under sequence parallelism the embedding hands each rank its
        # sequence shard: positions are passed whole, as torchtitan does.
        pos = {"position_ids": torch.arange(ids.shape[1])[None], "cache_position": torch.arange(ids.shape[1])} if sp else {}
        mt, peaks = MemTracker(), []
        mt.track_external(model, opt)
        with mt:
            for _ in range(2):
                logits = model(input_ids=ids, **pos).logits
                # The causal-LM loss as transformers computes it (logits
                # upcast, labels shifted), under loss_parallel when sharded.
                with loss_parallel() if lp else contextlib.nullcontext():
                    loss = torch.nn.functional.cross_entropy(
                        logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
                    loss.backward()
                del logits, loss
                opt.step()
                opt.zero_grad(set_to_none=True)
                peaks.append(tracker_peak(mt, member_names=True))
                mt.reset_mod_stats()
                # reset_mod_stats leaves the tracker's own peak: clear it
                # so the second iteration's is its own.
                mt._peak_mem.clear()
                mt._peak_mem_snap.clear()
        dist.destroy_process_group()
        fname = f"{name}-tp{degree}-{'loss_parallel' if lp else 'gathered_logits'}{'-sp' if sp else ''}.json"
        write_trace(args.outdir, fname, p, peaks)
        print("tp", fname, peaks[1].get("Total"))


def fsdp_tp(args):
    """FSDP2 on a 2-D mesh with tensor parallelism, as torchtitan composes
    them (parallelize_llama: apply_tp on the "tp" mesh, then fully_shard on
    the "dp" mesh), traced by FSDPMemTracker on a fake process group of
    dp × tp ranks: a tiny Llama, MixedPrecisionPolicy(param_dtype=bf16,
    reduce_dtype=fp32), the loss on vocabulary-sharded logits under
    loss_parallel(), in the grid's loop; dp × tp × sp ×
    reshard_after_forward
    (examples/measure/fsdp-tp-grid.json), one file per point.
    """
    import itertools

    import torch
    import torch.distributed as dist
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor.parallel import loss_parallel
    from torch.testing._internal.distributed.fake_pg import FakeStore

    g = json.load(open(args.grid))
    os.makedirs(args.outdir, exist_ok=True)
    axes = g["grid"]
    for (name, mcfg), dp, tpd, sp, reshard in itertools.product(
            g["models"].items(), axes["dp"], axes["tp"], axes["sp"], axes["reshard_after_forward"]):
        # transformers' Llama in the grid's loop (a plain one keeps the
        # logits through backward).
        train = dict(g["train"], precision="fp32", compute_dtype="bf16")
        keep = keeps_output(train)
        p = {"name": f"{name} fsdp2 dp {dp} tp {tpd} sp {sp} reshard {reshard}", "model": dict(mcfg, name=name), "train": train}
        cfg = grid_hf_config(p["model"], {k: v for k, v in train.items() if k != "compute_dtype"})
        p["train"]["parallel"] = {"dp": dp, "tp": tpd, "sp": sp, "loss_parallel": True, "fsdp": "full_shard", "fsdp_version": 2,
                                  "reshard_after_forward": reshard}

        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=dp * tpd)
        mesh = init_device_mesh("cpu", (dp, tpd), mesh_dim_names=("dp", "tp"))
        torch.manual_seed(0)
        model, config = build(cfg, device="cpu", attn=train.get("attention", "sdpa"))
        model = for_training(model, train, dropout=False)
        apply_tp(model, mesh["tp"], sp, True)
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.model.layers:
            fully_shard(block, mesh=mesh["dp"], reshard_after_forward=reshard, mp_policy=mp)
        fully_shard(model, mesh=mesh["dp"], mp_policy=mp)
        opt = optimizer(train, [q for q in model.parameters() if q.requires_grad])
        inputs = batch(config, train, "cpu", torch.float32)
        ids = inputs["input_ids"]
        pos = {"position_ids": torch.arange(ids.shape[1])[None], "cache_position": torch.arange(ids.shape[1])} if sp else {}
        mt, peaks = FSDPMemTracker(model, opt), []
        mt.track_inputs((ids,))
        with mt:
            for _ in range(2):
                logits = model(input_ids=ids, **pos).logits
                with loss_parallel():
                    loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
                    if not keep:
                        logits = None
                    loss.backward()
                del logits, loss
                opt.step()
                opt.zero_grad(set_to_none=True)
                peaks.append(tracker_peak(mt))
                mt.reset_mod_stats()
        dist.destroy_process_group()
        fname = f"{name}-fsdp2-dp{dp}-tp{tpd}{'-sp' if sp else ''}-{'reshard' if reshard else 'keep'}.json"
        write_trace(args.outdir, fname, p, peaks)
        print("fsdp_tp", fname, peaks[1].get("Total"))


def zbv(args):
    """The zero-bubble schedules' per-rank action orders, as
    torch.distributed.pipelining builds them (ScheduleZBVZeroBubble,
    ScheduleInterleavedZeroBubble and ScheduleDualPipeV's
    _calculate_single_rank_operations, called without process groups): for
    a few (pp, microbatches), each rank's F / I / W (and, for DualPipeV, full
    backward B) actions on its chunk. The engine's zerobubble.go is held to
    them."""
    import types

    import torch
    from torch.distributed.pipelining.schedules import ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble

    code = {"FORWARD": "F", "BACKWARD_INPUT": "I", "BACKWARD_WEIGHT": "W"}
    out = {"torch": torch.__version__,
           "source": "torch.distributed.pipelining.schedules.ScheduleZBVZeroBubble._calculate_single_rank_operations",
           "orders": []}
    for pp, m in [(2, 3), (2, 8), (4, 8), (4, 4), (8, 16)]:
        fake = types.SimpleNamespace(pp_group_size=pp, _n_microbatches=m, num_stages=2 * pp)
        for rank in range(pp):
            seq = [("0" if a.stage_index == rank else "1") + code[a.computation_type.name]
                   for a in ScheduleZBVZeroBubble._calculate_single_rank_operations(fake, rank) if a is not None]
            out["orders"].append({"pp": pp, "microbatches": m, "rank": rank, "actions": " ".join(seq)})
    # The interleaved zero-bubble schedule (ZB-1P), v looped stages per
    # rank; the chunk is the stage's local index.
    out["interleaved"] = []
    for pp, v, m in [(2, 1, 4), (2, 2, 4), (4, 2, 8), (4, 3, 8), (4, 2, 12), (8, 2, 16)]:
        rounds = max(1, m // pp)
        fake = types.SimpleNamespace(pp_group_size=pp, n_local_stages=v, _n_microbatches=m,
                                     number_of_rounds=rounds, microbatches_per_round=m // rounds)
        for rank in range(pp):
            seq = [str(a.stage_index // pp) + code[a.computation_type.name]
                   for a in ScheduleInterleavedZeroBubble._calculate_single_rank_operations(fake, rank) if a is not None]
            out["interleaved"].append({"pp": pp, "virtual_stages": v, "microbatches": m, "rank": rank, "actions": " ".join(seq)})
    # DualPipeV (ScheduleDualPipeV): the V's two stages per rank, full
    # backwards (B) beside split ones, and overlapped F+B pairs, whose
    # sub-actions the runtime performs in order (written one after the
    # other).
    from torch.distributed.pipelining.schedules import ScheduleDualPipeV
    code["FULL_BACKWARD"] = "B"
    out["dualpipev"] = []
    for pp, m in [(2, 4), (2, 8), (4, 8), (4, 12), (8, 16), (8, 24)]:
        fake = types.SimpleNamespace(pp_group_size=pp, _n_microbatches=m)
        for rank in range(pp):
            seq = []
            for a in ScheduleDualPipeV._calculate_single_rank_operations(fake, rank):
                for b in (a.sub_actions or (a,)) if a is not None else ():
                    seq.append(("0" if b.stage_index == rank else "1") + code[b.computation_type.name])
            out["dualpipev"].append({"pp": pp, "microbatches": m, "rank": rank, "actions": " ".join(seq)})
    write(args, json.dumps(out, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("inventory")
    a.add_argument("plan")
    a.add_argument("-o")
    cd = sub.add_parser("defaults")
    cd.add_argument("model_types", nargs="+")
    cd.add_argument("-o")
    sv = sub.add_parser("saved")
    sv.add_argument("plan")
    sv.add_argument("-o")
    tr = sub.add_parser("trace")
    tr.add_argument("plan")
    tr.add_argument("-o")
    dp_ = sub.add_parser("deep")
    dp_.add_argument("grid")
    dp_.add_argument("outdir")
    gr = sub.add_parser("grid")
    gr.add_argument("grid")
    gr.add_argument("outdir")
    gr.add_argument("--only", nargs="*")
    g = sub.add_parser("gpu")
    g.add_argument("plan")
    g.add_argument("--steps", type=int, default=3)
    g.add_argument("--dry-run", action="store_true")
    g.add_argument("--device", default="cuda", help="cpu runs the whole measurement path on a small plan, for testing")
    g.add_argument("--snapshot", help="where to write the memory snapshot (default <plan>.snapshot.pickle)")
    sn = sub.add_parser("snapshot")
    sn.add_argument("plan")
    sn.add_argument("-o", required=True)
    sn.add_argument("--steps", type=int, default=2)
    zb = sub.add_parser("zbv")
    zb.add_argument("-o")
    fs = sub.add_parser("fsdp")
    fs.add_argument("grid")
    fs.add_argument("outdir")
    f1 = sub.add_parser("fsdp1")
    f1.add_argument("grid")
    f1.add_argument("outdir")
    tpp = sub.add_parser("tp")
    tpp.add_argument("grid")
    tpp.add_argument("outdir")
    ft = sub.add_parser("fsdp_tp")
    ft.add_argument("grid")
    ft.add_argument("outdir")
    po = sub.add_parser("posttrain")
    po.add_argument("plan")
    po.add_argument("-o")
    args = ap.parse_args()
    if args.mode == "posttrain":
        from posttrain import posttrain  # TRL's trainers: examples/measure/posttrain.py
        return posttrain(args, plan, hf_config, build)
    {"inventory": inventory, "defaults": class_defaults, "saved": saved, "trace": trace, "grid": grid, "deep": deep, "gpu": gpu, "snapshot": snapshot, "fsdp": fsdp, "fsdp1": fsdp1, "tp": tp, "fsdp_tp": fsdp_tp,
     "zbv": zbv}[args.mode](args)


if __name__ == "__main__":
    main()
