#!/usr/bin/env bash
# `make reports PLANS="a.json b.json …"`: one report per plan (report.sh:
# notebook, offline HTML, PDF), run in parallel across the machine's cores
# (REPORT_JOBS to choose), with a line per plan as each finishes and a summary
# at the end. Exits non-zero if any report failed, showing why.
source "$(dirname "$0")/lib.sh"
plan_list plans
[ "${#plans[@]}" -ge 1 ] || { echo 'reports: set PLANS to the plan files, e.g. PLANS="a.json b.json"' >&2; exit 1; }
declare -A seen
for f in "${plans[@]}"; do
  [ -f "$f" ] || { echo "reports: no plan file $f" >&2; exit 1; }
  base=$(basename "$f" .json)
  [ -z "${seen[$base]:-}" ] || { echo "reports: $f and ${seen[$base]} would write the same report ($base); rename one" >&2; exit 1; }
  seen[$base]=$f
done

"$ROOT/kernel/scripts/setup.sh" >/dev/null
apt_install chromium fonts-dejavu-core fonts-wqy-zenhei
export VRAMLAB_SET_UP=1

jobs=${REPORT_JOBS:-$(nproc)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
say "${#plans[@]} reports, $jobs at a time"
start=$(date +%s)
total=${#plans[@]}

# one I FILE: run report.sh on one plan, then print its line.
one() {
  local i=$1 f=$2 t0 status
  t0=$(date +%s)
  if PLAN="$f" PLANS= "$ROOT/kernel/scripts/report.sh" >"$tmp/$i.log" 2>&1; then status=ok; else status=FAILED; fi
  echo "$status" > "$tmp/$i.status"
  printf '[%s] %-6s %s (%ss)\n' "$(ls "$tmp"/*.status | wc -l)/$total" "$status" "$f" "$(( $(date +%s) - t0 ))"
}

for i in "${!plans[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  one "$i" "${plans[$i]}" &
done
wait

failed=0
echo
for i in "${!plans[@]}"; do
  if [ "$(cat "$tmp/$i.status" 2>/dev/null)" = ok ]; then
    echo "  ok      ${plans[$i]}: $(tail -1 "$tmp/$i.log" | sed 's/^report: //')"
  else
    failed=$((failed + 1))
    echo "  FAILED  ${plans[$i]}:"
    tail -5 "$tmp/$i.log" | sed 's/^/          /'
  fi
done
echo
echo "reports: $(( total - failed )) of $total written in $(( $(date +%s) - start ))s"
[ "$failed" = 0 ]
