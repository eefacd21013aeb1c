#!/usr/bin/env bash
# `make report PLAN=examples/plans/<plan>.json`: run the report template on a
# plan with the vramlab kernel and export it as a self-contained offline HTML
# page (code hidden until asked for) and a PDF printed by headless chromium.
# Outputs go to .artifacts/reports/<plan>/; the executed notebook is trusted so
# it opens in JupyterLab with its charts.
source "$(dirname "$0")/lib.sh"
"$ROOT/kernel/scripts/setup.sh" >/dev/null
apt_install chromium fonts-dejavu-core

plan=${PLAN:-examples/plans/llama3-8b-lora.json}
[ -f "$plan" ] || { echo "report: no plan file $plan" >&2; exit 1; }
plan=$(cd "$(dirname "$plan")" && pwd)/$(basename "$plan")
name=$(basename "$plan" .json)
out="$ROOT/.artifacts/reports/$name"
mkdir -p "$out"

say "executing the report template on $plan"
VRAMLAB_PLAN="$plan" .venv/bin/jupyter nbconvert --to notebook --execute \
  --ExecutePreprocessor.kernel_name=vramlab --ExecutePreprocessor.timeout=600 \
  --output-dir "$out" --output "$name.ipynb" notebooks/30-training-plan-report.ipynb
.venv/bin/jupyter trust "$out/$name.ipynb"

say "exporting offline HTML"
.venv/bin/jupyter nbconvert --to html --template vramlab \
  --TemplateExporter.extra_template_basedirs="$ROOT/kernel/nbconvert" \
  --output-dir "$out" --output "$name.html" "$out/$name.ipynb"

say "printing PDF"
/usr/bin/chromium --headless=new --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --no-first-run --no-pdf-header-footer --virtual-time-budget=15000 \
  --user-data-dir="$(mktemp -d)" --print-to-pdf="$out/$name.pdf" "file://$out/$name.html" 2>/dev/null

echo
ls -l "$out"
echo "report: $out/$name.html and $out/$name.pdf"
