#!/usr/bin/env bash
# `make report PLAN=examples/plans/<plan>.json`: run the report template on a
# plan with the vramlab kernel and export it as a self-contained offline HTML
# page (code hidden until asked for) and a PDF printed by headless chromium.
# Outputs go to .artifacts/reports/<plan>/; the executed notebook is trusted so
# it opens in JupyterLab with its charts (every piece of plan text in it was
# escaped when it was produced: charts.Display and the charts' tooltips).
#
# Every external step has a time limit (REPORT_TIMEOUT seconds for executing
# the notebook, default 600; two minutes for each other step); the script
# exits non-zero, saying which step failed, when one fails, times out or
# leaves its output missing, and removes its temporary files either way.
source "$(dirname "$0")/lib.sh"
"$ROOT/kernel/scripts/setup.sh" >/dev/null
apt_install chromium fonts-dejavu-core

plan=${PLAN:-examples/plans/llama3-8b-lora.json}
[ -f "$plan" ] || { echo "report: no plan file $plan" >&2; exit 1; }
plan=$(cd "$(dirname "$plan")" && pwd)/$(basename "$plan")
# The output name is the plan's file name with anything but letters, digits,
# '.', '_' and '-' replaced: it becomes a path and the page's title.
name=$(printf %s "$(basename "$plan" .json)" | LC_ALL=C tr -c 'A-Za-z0-9._-' '_')
out="$ROOT/.artifacts/reports/$name"
mkdir -p "$out"
rm -f "$out/$name.ipynb" "$out/$name.html" "$out/$name.pdf"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# step LIMIT WHAT COMMAND...: run with a time limit; fail with a message.
step() {
  local limit=$1 what=$2
  shift 2
  local rc=0
  timeout --kill-after=10 "$limit" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "report: $what did not finish within ${limit}s" >&2
    exit 1
  elif [ "$rc" != 0 ]; then
    echo "report: $what failed (exit status $rc)" >&2
    exit 1
  fi
}

# need FILE WHAT: the step must have produced a non-empty FILE.
need() {
  [ -s "$1" ] || { echo "report: $2 was not written ($1 is missing or empty)" >&2; exit 1; }
}

say "executing the report template on $plan"
export VRAMLAB_PLAN="$plan"
step "${REPORT_TIMEOUT:-600}" "executing the report notebook" \
  .venv/bin/jupyter nbconvert --to notebook --execute \
  --ExecutePreprocessor.kernel_name=vramlab --ExecutePreprocessor.timeout=600 \
  --output-dir "$out" --output "$name.ipynb" notebooks/30-training-plan-report.ipynb
need "$out/$name.ipynb" "the executed notebook"
step 120 "trusting the executed notebook" .venv/bin/jupyter trust "$out/$name.ipynb"

say "exporting offline HTML"
step 120 "the HTML export" .venv/bin/jupyter nbconvert --to html --template vramlab \
  --TemplateExporter.extra_template_basedirs="$ROOT/kernel/nbconvert" \
  --output-dir "$out" --output "$name.html" "$out/$name.ipynb"
need "$out/$name.html" "the HTML report"

say "printing PDF"
step 120 "printing the PDF with chromium" /usr/bin/chromium --headless=new --no-sandbox --disable-gpu \
  --disable-background-networking --disable-component-update --no-first-run --no-pdf-header-footer \
  --virtual-time-budget=15000 --user-data-dir="$tmp/chromium" --print-to-pdf="$out/$name.pdf" \
  "file://$out/$name.html" 2>"$tmp/chromium.log"
need "$out/$name.pdf" "the PDF report"

echo
ls -l "$out"
echo "report: $out/$name.html and $out/$name.pdf"
