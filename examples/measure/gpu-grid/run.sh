#!/usr/bin/env bash
# Runs every plan of this folder through measure.py's gpu mode, one process
# each (so each measures its own CUDA context), and appends the
# measured-case lines to OUT/cases.jsonl; errors go to OUT/errors.log. It
# needs a CUDA device with torch, transformers and peft, and not Go: the
# plans' HF configs and resolved settings are in prepared/ (kept current by
# go test ./examples/plan).
#
#   examples/measure/gpu-grid/run.sh OUT [SECONDS_PER_PLAN]
set -u
out=${1:?usage: run.sh OUT [SECONDS_PER_PLAN]}
per=${2:-60}
py=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
"$py" -c 'import torch; print("torch", torch.__version__, "on", torch.cuda.get_device_name(0))' | tee "$out/device.txt"
for plan in "$here"/*.json; do
  name=$(basename "$plan" .json)
  start=$(date +%s)
  if timeout "$per" "$py" "$here/../measure.py" gpu "$plan" >> "$out/cases.jsonl" 2>> "$out/errors.log"; then
    echo "$name: $(( $(date +%s) - start )) s"
  else
    echo "$name: failed or timed out after $(( $(date +%s) - start )) s (errors.log)"
  fi
done
