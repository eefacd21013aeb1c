# Shared helpers for the setup and test scripts; sourced, not run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export GOTOOLCHAIN=local
# go-nvml's cgo bindings print pages of deprecation warnings otherwise.
export CGO_CFLAGS="${CGO_CFLAGS:--Wno-deprecated-declarations}"

# Each step's heading says how long the command has run (a CI log then
# shows where its minutes go); the clock starts at the first script.
export VRAMLAB_T0="${VRAMLAB_T0:-$(date +%s)}"
say() { printf '\n==> %s  [%ss]\n' "$*" "$(( $(date +%s) - VRAMLAB_T0 ))"; }

# as_root runs a command as root: directly when we are root, else through sudo.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=
# apt_install installs Debian packages that are missing (idempotent).
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || { echo "need Debian packages ${missing[*]}: install them with your package manager" >&2; exit 1; }
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
  say "installing Debian packages: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# work_copy makes dir the user's working copy of the tutorials: the first
# time, a copy of notebooks/; later, only notebooks that are new in
# notebooks/ are added, so a user's edits and outputs are never overwritten
# and the committed notebooks never receive them.
work_copy() {
  local dir=$1 added=0
  mkdir -p "$dir"
  local src
  # The tutorials and their Chinese edition (notebooks/zh/).
  for src in "$ROOT"/notebooks/*.ipynb "$ROOT"/notebooks/zh/*.ipynb; do
    [ -e "$src" ] || continue
    local name
    name=${src#"$ROOT/notebooks/"}
    if [ ! -e "$dir/$name" ]; then
      mkdir -p "$(dirname "$dir/$name")"
      cp "$src" "$dir/$name"
      added=$((added + 1))
    fi
  done
  echo "$added"
}

# plan_list NAME: splits $PLANS into the array NAME: one file a line when
# PLANS holds a newline (names may then hold spaces; blank lines are
# skipped), else at spaces and tabs.
plan_list() {
  local -n into=$1
  into=()
  if [[ "${PLANS:-}" == *$'\n'* ]]; then
    local line
    while IFS= read -r line; do
      [[ "$line" =~ ^[[:space:]]*$ ]] || into+=("$line")
    done <<< "$PLANS"
  else
    read -r -a into <<< "${PLANS:-}"
  fi
}
