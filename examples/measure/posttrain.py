"""Post-training ground truth on the CPU: TRL's own trainers (GRPOTrainer
with transformers' generate, DPOTrainer) run two steps of a plan's tiny
model, and a live-storage tracker records each phase's peak over the two
steps (the optimizer runs for_loop, as PyTorch picks on the CPU): every tensor storage an op creates, plus the model's parameters and
buffers, plus the reference model's when TRL holds one.

Phases are marked by wrapping the trainers' own methods:
  generation            GRPOTrainer._generate
  no-grad log-probs     GRPOTrainer._get_per_token_logps_and_entropies under no_grad
  training step         compute_loss (forward and loss), backward and the optimizer step
  precompute            DPOTrainer.compute_ref_log_probs (before training)
"""

import json
import os
import tempfile
import weakref


def _tokenizer(vocab):
    """A word-level tokenizer over the model's vocabulary: "<pad>" is token
    0, "<eos>" token 1 and word "w<i>" token i, so a text of n words is n
    tokens (special tokens that no word contains: the tokenizer matches
    them inside words first)."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = {"<pad>": 0, "<eos>": 1, **{f"w{i}": i for i in range(2, vocab)}}
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<pad>")


def _lora(pol):
    """The plan's LoRA as PEFT's config, or None."""
    lora = pol.get("lora")
    if not lora:
        return None
    from peft import LoraConfig

    return LoraConfig(r=int(lora["rank"]), lora_alpha=float(lora.get("alpha", 2 * int(lora["rank"]))), lora_dropout=0.0,
                      target_modules=lora["targets"], task_type="CAUSAL_LM")


def _text(n, start, vocab):
    return " ".join(f"w{2 + (start + i) % (vocab - 2)}" for i in range(n))


class PhaseTracker:
    """Live storages created inside the mode, by phase; base is what exists
    before (parameters, buffers, a reference model)."""

    def __init__(self, base, owned):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        tracker = self
        self.base, self.owned, self.live = base, owned, {}
        self.phase, self.step, self.peaks, self.ops, self.top = "setup", 0, {}, {}, {}

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in tree_flatten(out)[0]:
                    if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                        continue
                    st = t.untyped_storage()
                    k = st.data_ptr()
                    if k in tracker.live or k in tracker.owned or st.nbytes() == 0:
                        continue
                    tracker.live[k] = st.nbytes()
                    tracker.ops[k] = str(func.overloadpacket.__name__)
                    weakref.finalize(st, tracker.live.pop, k, None)
                tracker.note()
                return out

        self.mode = Mode()

    def note(self):
        total = self.base + sum(self.live.values())
        key = (self.step, self.phase)
        if total > self.peaks.get(key, -1):
            self.peaks[key] = total
            if os.environ.get("POSTTRAIN_TOP"):
                self.top[key] = sorted(((b, self.ops.get(k, "?")) for k, b in self.live.items() if self.ops.get(k) != "zeros_like"), reverse=True)[:25]

    def set(self, phase):
        self.phase = phase
        self.note()


def _wrap(obj, name, before, after=None):
    f = getattr(obj, name)

    def wrapped(*a, **k):
        prev = before(*a, **k)
        try:
            return f(*a, **k)
        finally:
            if after:
                after(prev)

    setattr(obj, name, wrapped)


def posttrain(args, plan, hf_config, build):
    import torch
    import transformers
    import trl
    from datasets import Dataset

    p = plan(args.plan)
    pt = p["post_training"]
    pol = pt.get("policy", {})
    if pt["framework"] != "trl":
        raise SystemExit("posttrain traces TRL's trainers")
    cfg = hf_config(args.plan)
    torch.manual_seed(0)
    model, config = build(cfg, device="cpu", attn=pol.get("attention", "sdpa"))
    vocab = config.vocab_size
    config.pad_token_id, config.eos_token_id = 0, 1
    tok = _tokenizer(vocab)
    P, C, B = int(pt["prompt_len"]), int(pt["completion_len"]), int(pol.get("micro_batch", 8))
    out_dir = tempfile.mkdtemp()
    common = dict(output_dir=out_dir, per_device_train_batch_size=B, max_steps=2, bf16=False, fp16=False, use_cpu=True,
                  report_to=[], logging_steps=1000, save_strategy="no", learning_rate=1e-6, seed=0,
                  gradient_checkpointing=pol.get("grad_checkpointing", "full") != "none", dataloader_num_workers=0,
                  optim="adamw_torch")
    ref = None
    if pt["algorithm"] == "dpo" and pt.get("reference", "model") == "model":
        ref = build(cfg, device="cpu", attn=pol.get("attention", "sdpa"))[0]
    held = list(model.parameters()) + list(model.buffers())
    if ref is not None:
        held += list(ref.parameters()) + list(ref.buffers())
    owned = {q.untyped_storage().data_ptr(): q.untyped_storage().nbytes() for q in held}
    base = sum(owned.values())
    tr = PhaseTracker(base, owned)

    def enter(phase):
        def before(*a, **k):
            prev = tr.phase
            tr.set(phase)
            return prev
        return before

    def new_step(*a, **k):
        tr.step += 1

    if pt["algorithm"] == "dpo":
        cls = trl.DPOTrainer
        _wrap(cls, "compute_ref_log_probs", enter("precompute"), tr.set)
    else:
        cls = trl.GRPOTrainer
        _wrap(cls, "_generate", enter("generation"), lambda prev: tr.set("after generation"))

        def logps(*a, **k):
            return tr.phase if torch.is_grad_enabled() else enter("no-grad log-probs")()

        _wrap(cls, "_get_per_token_logps_and_entropies", logps, lambda prev: tr.set(prev) if not torch.is_grad_enabled() else None)
    _wrap(cls, "training_step", new_step)
    _wrap(cls, "compute_loss", enter("training step"))
    with tr.mode:
        if pt["algorithm"] == "dpo":
            rows = [{"prompt": _text(P, i, vocab), "chosen": " " + _text(C, i + 7, vocab), "rejected": " " + _text(C, i + 11, vocab)} for i in range(4 * B)]
            dcfg = trl.DPOConfig(max_length=P + C, precompute_ref_log_probs=pt.get("reference") == "precomputed", **common)
            trainer = cls(model=model, ref_model=ref, args=dcfg, train_dataset=Dataset.from_list(rows), processing_class=tok,
                          peft_config=_lora(pol))
        else:
            gens = int(pt.get("generations_per_prompt", 8))
            rows = [{"prompt": _text(P, i, vocab)} for i in range(4 * B)]
            beta = 0.0 if pt.get("reference", "none") == "none" else 0.04
            gcfg = trl.GRPOConfig(num_generations=gens, max_completion_length=C, beta=beta, use_vllm=False,
                                  generation_kwargs={"min_new_tokens": C}, **common)

            def reward(completions, **kw):
                return [float(len(c)) for c in completions]

            trainer = cls(model=model, reward_funcs=reward, args=gcfg, train_dataset=Dataset.from_list(rows), processing_class=tok,
                          peft_config=_lora(pol))
        trainer.train()
    phases = {}
    for (step, phase), peak in tr.peaks.items():
        # The first and the steady step, as the engine's peak is of both
        # (and the precompute pass before them).
        if step in (1, 2) or (phase == "precompute" and step == 0):
            phases[phase] = max(phases.get(phase, 0), peak)
    if os.environ.get("POSTTRAIN_TOP"):
        for (step, phase), top in tr.top.items():
            if step in (0, 1, 2):
                print(step, phase, tr.peaks[(step, phase)], [(b, op) for b, op in top], file=__import__("sys").stderr)
    res = {"plan": p, "torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
           "params_and_buffers": base, "phases": phases}
    text = json.dumps(res, indent=1) + "\n"
    if args.o:
        with open(args.o, "w") as f:
            f.write(text)
    else:
        print(text, end="")
