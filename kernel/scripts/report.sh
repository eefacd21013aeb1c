#!/usr/bin/env bash
# `make report PLAN=examples/plans/<plan>.json`: run the report template on a
# plan — or on a trainer's config or a launch script, with GPU=, GPUS= and
# MODEL= for what it leaves to the launch, as the plan command takes them —
# through papermill with the vramlab kernel (the plan is the template's
# `plan` parameter) and export it as a self-contained offline HTML page (code
# hidden until asked for) and a PDF printed by headless chromium.
# `make report PLANS="a.json b.json c.json"` (file names separated by spaces,
# or one a line when a name holds a space) runs the comparison template (notebooks/31-plan-comparison.ipynb) on the
# plans together instead: one report that puts the candidates side by side.
# Outputs go to .artifacts/reports/<name>/ (REPORT_DIR/<name>/ when set); the executed notebook is trusted so
# it opens in JupyterLab with its charts (every piece of plan text in it was
# escaped when it was produced: charts.Display and the charts' tooltips; the
# parameters papermill writes are Go string literals).
#
# Every external step has a time limit (REPORT_TIMEOUT seconds for executing
# the notebook, default 600; two minutes for each other step); the script
# exits non-zero, saying which step failed, when one fails, times out or
# leaves its output missing, and removes its temporary files either way.
source "$(dirname "$0")/lib.sh"
# reports.sh sets up once before running several of these at a time.
if [ -z "${VRAMLAB_SET_UP:-}" ]; then
  "$ROOT/kernel/scripts/setup.sh" >/dev/null
  apt_install chromium fonts-dejavu-core fonts-wqy-zenhei
fi

# absolute FILE: the plan file's absolute path (exit if there is none).
absolute() { printf '%s/%s' "$(cd "$(dirname "$1")" && pwd)" "$(basename "$1")"; }
exists() { [ -f "$1" ] || { echo "report: no plan file $1" >&2; exit 1; }; }
# safe NAME: NAME with anything but letters, digits, '.', '_' and '-'
# replaced: it becomes a path and the page's title.
safe() { printf %s "$1" | LC_ALL=C tr -c 'A-Za-z0-9._-' '_'; }

if [ -n "${PLANS:-}" ]; then
  template=notebooks/31-plan-comparison.ipynb
  plan_list given
  [ "${#given[@]}" -ge 2 ] || { echo "report: PLANS names ${#given[@]} plan; a comparison needs two or more" >&2; exit 1; }
  plans=()
  name=compare
  for f in "${given[@]}"; do
    exists "$f"
    plans+=("$(absolute "$f")")
    name="$name-$(basename "$f" .json)"
  done
  name=$(safe "${name:0:120}")
else
  template=notebooks/30-training-plan-report.ipynb
  exists "${PLAN:-examples/plans/llama3-8b-lora.json}"
  plans=("$(absolute "${PLAN:-examples/plans/llama3-8b-lora.json}")")
  base=$(basename "${plans[0]}")
  name=$(safe "${base%.*}")
fi
out="${REPORT_DIR:-$ROOT/.artifacts/reports}/$name"
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

# The parameters as JSON (which papermill reads as YAML): each path a string,
# whatever its characters. JSON's \u escapes of characters outside the BMP
# are surrogate pairs, which YAML reads as lone surrogates: the file is UTF-8
# text instead. A name that is not UTF-8 at all (a file system allows any
# bytes) reaches the notebook through a link of a plain name beside it.
key=plan
[ -n "${PLANS:-}" ] && key=plans
mkdir "$tmp/links"
GPU="${GPU:-}" GPUS="${GPUS:-}" MODEL="${MODEL:-}" \
.venv/bin/python - "$tmp/parameters.json" "$tmp/links" "$key" "${plans[@]}" <<'PY'
import json, os, sys
out, links, key, paths = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def text(i, p):
    try:
        p.encode("utf-8")
        return p
    except UnicodeEncodeError:
        link = os.path.join(links, f"plan-{i}.json")
        os.symlink(p, link)
        return link
paths = [text(i, p) for i, p in enumerate(paths)]
params = {key: paths if key == "plans" else paths[0]}
# What a trainer's config or a launch script leaves to the launch (the
# plan command's -gpu, -gpus, -model), for the single-plan report.
if key == "plan":
    for name in ("gpu", "model"):
        if os.environ.get(name.upper()):
            params[name] = os.environ[name.upper()]
    if os.environ.get("GPUS"):
        if not os.environ["GPUS"].isdigit():
            sys.exit("report: GPUS must be a whole number of GPUs, got " + repr(os.environ["GPUS"]))
        params["gpus"] = int(os.environ["GPUS"])
with open(out, "w", encoding="utf-8") as f:
    json.dump(params, f, ensure_ascii=False)
PY
say "executing $template on ${plans[*]}"
# why: the first error a failed cell printed (a plan error names the field
# and the rule), which papermill's own message leaves out.
why() {
  [ -s "$out/$name.ipynb" ] || return 0
  .venv/bin/python - "$out/$name.ipynb" >&2 <<'PY' || true
import json, sys
for cell in json.load(open(sys.argv[1]))["cells"]:
    err = "".join("".join(o.get("text", [])) for o in cell.get("outputs", []) if o.get("name") == "stderr")
    for marker in ("\nerror: ", "panic: "):  # charts.Must's line, or a panic
        if marker in "\n" + err:
            lines = [l for l in ("\n" + err).split(marker, 1)[1].splitlines() if l.strip()]
            print("report: the notebook stopped: " + (lines[0] if lines else "a panic"))
            sys.exit()
PY
}
# papermill's own traceback says only that a cell failed: it goes to a log,
# and the failure is said in one line (why), the log's last line if not.
# The kernel papermill starts runs in a session of its own (jupyter_client
# start_new_session), out of reach of timeout's signal: its connection file
# is made under $tmp, by which a kernel left running is found and stopped.
rc=0
mkdir "$tmp/kernel"
TMPDIR="$tmp/kernel" timeout --kill-after=10 "${REPORT_TIMEOUT:-600}" .venv/bin/papermill --no-progress-bar --kernel vramlab --cwd "$ROOT" \
  --execution-timeout 600 -f "$tmp/parameters.json" \
  "$template" "$out/$name.ipynb" >"$tmp/papermill.log" 2>&1 || rc=$?
pkill -f -- "$tmp/kernel/" 2>/dev/null || true
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "report: executing the report notebook did not finish within ${REPORT_TIMEOUT:-600}s" >&2
  exit 1
elif [ "$rc" != 0 ]; then
  said=$(why 2>&1)
  echo "${said:-report: executing the report notebook failed: $(tail -n 1 "$tmp/papermill.log")}" >&2
  exit 1
fi
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
  "$(.venv/bin/python -c 'import pathlib, sys; print(pathlib.Path(sys.argv[1]).as_uri())' "$out/$name.html")" 2>"$tmp/chromium.log"
need "$out/$name.pdf" "the PDF report"

echo
ls -l "$out"
echo "report: $out/$name.html and $out/$name.pdf"
