#!/usr/bin/env bash
# `make truth`: ground truth from PyTorch itself. Installs torch, transformers,
# peft and torchao (examples/measure/requirements.txt) into .venv-truth — never done
# by `make test` — then writes the parameter inventory of every catalog model
# that transformers builds into vram/testdata/inventory/ (the Go tests compare
# the engine's tensors with them), traces the grid of small models of
# examples/measure/trace-grid.json and every other plan of
# vram/testdata/trace/ again under MemTracker and the live-storage tracker,
# the saved sets of the same small blocks compiled by torch.compile
# (vram/testdata/compiled/) and under torchao's float8 training
# (vram/testdata/float8/), FSDP2 on a fake process group under
# FSDPMemTracker (vram/testdata/fsdp/),
# tensor parallelism through DTensor under MemTracker (vram/testdata/tp/),
# the two composed on a 2-D mesh (vram/testdata/fsdp_tp/),
# TRL's post-training trainers phase by phase (vram/testdata/posttrain/),
# and checks the gpu mode's plan parsing and model construction on the CPU.
source "$(dirname "$0")/lib.sh"
if [ ! -x .venv-truth/bin/python ]; then python3 -m venv .venv-truth; fi
.venv-truth/bin/pip install -q --disable-pip-version-check -r examples/measure/requirements.txt

out=vram/testdata/inventory
mkdir -p "$out"
tmp=$(mktemp -d)
for preset in $(go run ./examples/plan -presets); do
  # 8 tokens, or 1024 for a vision-language model, whose images' tokens
  # are among the sequence's, or 3000 log-mel frames for Whisper, whose
  # encoder reads exactly that many (the inventory is built on the meta
  # device).
  ok=
  for seq in 8 1024 3000; do
    printf '{"model": "%s", "train": {"seq_len": %d, "micro_batch": 1}}\n' "$preset" "$seq" > "$tmp/$preset.json"
    if .venv-truth/bin/python examples/measure/measure.py inventory "$tmp/$preset.json" -o "$out/$preset.json" 2> "$tmp/$preset.err"; then
      ok=1
      break
    fi
  done
  if [ -n "$ok" ]; then
    echo "inventory $preset"
  else
    echo "inventory $preset: transformers cannot build it here ($(tail -1 "$tmp/$preset.err"))"
    rm -f "$out/$preset.json"
  fi
done

say "Traces (MemTracker and live storages): the grid of examples/measure/trace-grid.json"
.venv-truth/bin/python examples/measure/measure.py grid examples/measure/trace-grid.json vram/testdata/trace

say "Compiled blocks' saved sets (torch.compile per block, saved_tensors_hooks): every plan of vram/testdata/saved compiled"
mkdir -p vram/testdata/compiled
for f in vram/testdata/saved/*.json; do
  n=$(basename "$f" .json)
  .venv-truth/bin/python -c 'import json,sys; p=json.load(open(sys.argv[1]))["plan"]; p["train"]["compile"]=True; p["name"]+=" compiled"; json.dump(p, sys.stdout)' "$f" > "$tmp/compiled.json"
  .venv-truth/bin/python examples/measure/measure.py saved "$tmp/compiled.json" -o "vram/testdata/compiled/$n.json"
  echo "compiled $n"
done

say "float8 saved sets (torchao Float8Linear, tensorwise and rowwise): five families"
mkdir -p vram/testdata/float8
for n in llama-tiny-gqa-bf16-sdpa llama-tiny-gqa-bf16-eager mistral-tiny-bf16-sdpa gpt2-tiny-bf16-eager opt-tiny-bf16-sdpa neox-tiny-bf16-sdpa; do
  for recipe in tensorwise rowwise; do
    .venv-truth/bin/python -c 'import json,sys; p=json.load(open(sys.argv[1]))["plan"]; p["train"]["float8"]=sys.argv[2]; p["name"]+=" float8 "+sys.argv[2]; json.dump(p, sys.stdout)' "vram/testdata/saved/$n.json" "$recipe" > "$tmp/float8.json"
    .venv-truth/bin/python examples/measure/measure.py saved "$tmp/float8.json" -o "vram/testdata/float8/$n-$recipe.json"
    echo "float8 $n $recipe"
  done
done

say "ZB-V pipeline orders (torch.distributed.pipelining)"
.venv-truth/bin/python examples/measure/measure.py zbv -o vram/testdata/pipeline/zero-bubble-orders.json

say "The end of the forward: the grid's decoders deepened, two loops (vram/testdata/deep/)"
.venv-truth/bin/python examples/measure/measure.py deep examples/measure/trace-grid.json vram/testdata/deep

say "FSDP2 traces (FSDPMemTracker, fake process group): the grid of examples/measure/fsdp-grid.json"
.venv-truth/bin/python examples/measure/measure.py fsdp examples/measure/fsdp-grid.json vram/testdata/fsdp

say "FSDP1 under LoRA (fake process group): the grid of examples/measure/fsdp1-grid.json"
.venv-truth/bin/python examples/measure/measure.py fsdp1 examples/measure/fsdp1-grid.json vram/testdata/fsdp1

say "Tensor-parallel traces (DTensor, MemTracker, fake process group): the grid of examples/measure/tp-grid.json"
.venv-truth/bin/python examples/measure/measure.py tp examples/measure/tp-grid.json vram/testdata/tp

say "FSDP2 with tensor parallelism on a 2-D mesh (FSDPMemTracker, fake process group): the grid of examples/measure/fsdp-tp-grid.json"
.venv-truth/bin/python examples/measure/measure.py fsdp_tp examples/measure/fsdp-tp-grid.json vram/testdata/fsdp_tp

say "Traces: every other plan of vram/testdata/trace again"
for f in vram/testdata/trace/*.json; do
  # Grid traces were just written; the rest carry their plan.
  .venv-truth/bin/python -c 'import json,sys; g=json.load(open("examples/measure/trace-grid.json"))["models"]; p=json.load(open(sys.argv[1]))["plan"]; p["model"]["name"] in g and sys.exit(3); json.dump(p, sys.stdout)' "$f" > "$tmp/trace-plan.json" || continue
  .venv-truth/bin/python examples/measure/measure.py trace "$tmp/trace-plan.json" -o "$f"
  echo "trace $(basename "$f" .json)"
done

say "Checkpoint early stop and op-level SAC: every plan of vram/testdata/trace_early_stop and trace_sac again"
for f in vram/testdata/trace_early_stop/*.json vram/testdata/trace_sac/*.json; do
  .venv-truth/bin/python -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["plan"], sys.stdout)' "$f" > "$tmp/trace-plan.json"
  .venv-truth/bin/python examples/measure/measure.py trace "$tmp/trace-plan.json" -o "$f"
  echo "trace $(basename "$(dirname "$f")")/$(basename "$f" .json)"
done

say "Post-training phases (TRL's own GRPO and DPO trainers on the CPU): every plan of vram/testdata/posttrain/plans"
for f in vram/testdata/posttrain/plans/*.json; do
  .venv-truth/bin/python examples/measure/measure.py posttrain "$f" -o "vram/testdata/posttrain/$(basename "$f")"
  echo "posttrain $(basename "$f" .json)"
done

say "gpu mode, dry run on the CPU"
for plan in examples/plans/llama3-8b-lora.json examples/plans/llama2-7b-full-fp32.json; do
  sed 's/"llama-3-8b"\|"llama-2-7b"/"llama-3.2-1b"/' "$plan" > "$tmp/dry.json"
  .venv-truth/bin/python examples/measure/measure.py gpu --dry-run "$tmp/dry.json"
done
printf '{"model": "bert-base-uncased", "train": {"seq_len": 128, "micro_batch": 8, "precision": "amp_bf16"}}\n' > "$tmp/dry.json"
.venv-truth/bin/python examples/measure/measure.py gpu --dry-run "$tmp/dry.json"
for f in examples/measure/gpu-grid/*.json; do
  .venv-truth/bin/python examples/measure/measure.py gpu --dry-run "$f"
done

say "gpu mode's whole path on the CPU (small plans: LoRA with checkpointing under autocast, an encoder)"
for f in vram/testdata/trace/llama-tiny-gqa-lora-amp_bf16-sdpa-full-adamw.json vram/testdata/trace/bert-tiny-amp_bf16-eager-none-sgd.json; do
  .venv-truth/bin/python -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["plan"], sys.stdout)' "$f" > "$tmp/small.json"
  .venv-truth/bin/python examples/measure/measure.py gpu --device cpu --steps 1 "$tmp/small.json" > "$tmp/case.jsonl"
  go run ./examples/validate "$tmp/case.jsonl" > /dev/null
  echo "gpu path on the CPU: $(basename "$f" .json)"
done
