#!/usr/bin/env bash
# Sets up everything JupyterLab with the VRAM Lab kernel needs. Idempotent: a
# second run only checks and takes seconds. Used by `make lab`, `make test`
# and the Dockerfile, so all three install the same way.
#
#   kernel/scripts/setup.sh              every step, in order
#   kernel/scripts/setup.sh STEP...      only those: toolchain, modules, python, tools, deps, kernel
#
# The Dockerfile runs the steps one layer each, after copying only the files
# a step reads (python: kernel/requirements.txt and kernel/papermill;
# modules, tools and deps: go.mod and go.sum), so a change to the source
# rebuilds only the last layer.
source "$(dirname "$0")/lib.sh"
start=$(date +%s)

# The dependencies' packages a notebook cell links, compiled into the build
# cache by the deps step (before the project's source is there); the
# kernel step then compiles only the project. TestWarmDepsCoverTheProject
# (kernel/committed_test.go) keeps the list in step with what the project
# imports.
WARM_DEPS=(std github.com/go-echarts/go-echarts/v2/... github.com/NVIDIA/go-nvml/pkg/...
  github.com/janpfeifer/gonb/gonbui github.com/janpfeifer/gonb/gonbui/widgets
  github.com/modelcontextprotocol/go-sdk/... github.com/google/jsonschema-go/...)

step_toolchain() {
  say "Go toolchain"
  command -v go >/dev/null || { echo "Go 1.26 is required: https://go.dev/dl/" >&2; exit 1; }
  go version
  # go-nvml (GPU cells) needs cgo, which needs a C compiler.
  command -v gcc >/dev/null || apt_install gcc libc6-dev
}

step_modules() {
  say "Go modules (pinned in go.mod; cached for offline use)"
  go mod download
}

step_python() {
  say "Python virtualenv .venv (kernel/requirements.txt)"
  local stamp=.venv/.requirements.sha256 want
  want=$(cat kernel/requirements.txt kernel/papermill/pyproject.toml kernel/papermill/vramlab_papermill.py | sha256sum | cut -d' ' -f1)
  if [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "up to date"
    return
  fi
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check --no-cache-dir -r kernel/requirements.txt
  # The Go parameter translator for papermill (its build backend, flit_core,
  # is pinned in its pyproject.toml).
  .venv/bin/pip install -q --disable-pip-version-check --no-cache-dir --no-deps ./kernel/papermill
  echo "$want" > "$stamp"
}

# The kernel's tools (gonb, goimports, gopls: go.mod's tool directives) in
# .bin, rebuilt when go.mod, go.sum, the tools command (kernel/tools: gonb's patch) or the
# toolchain change.
# VRAMLAB_TOOLS_GOCACHE names a build cache for them alone (the Dockerfile
# throws it away: the kernel never needs the tools' objects).
step_tools() {
  say "the kernel's tools (gonb, goimports, gopls) in .bin"
  local stamp=.bin/.tools.sha256 want
  want=$( (cat go.mod go.sum kernel/tools/*.go; go version) | sha256sum | cut -d' ' -f1)
  if [ -x .bin/gonb ] && [ -x .bin/gopls ] && [ -x .bin/goimports ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "up to date"
    return
  fi
  mkdir -p .bin
  GOCACHE="${VRAMLAB_TOOLS_GOCACHE:-$(go env GOCACHE)}" go run ./kernel/tools
  echo "$want" > "$stamp"
}

step_deps() {
  say "warming the Go build cache with the dependencies' packages"
  GOPROXY=off go build "${WARM_DEPS[@]}"
}

step_kernel() {
  say "Go (VRAM Lab) kernel"
  go run ./kernel install -no-tools
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(toolchain modules python tools kernel)
for s in "${steps[@]}"; do
  case $s in
    toolchain | modules | python | tools | deps | kernel) "step_$s" ;;
    *) echo "setup: unknown step $s (toolchain, modules, python, tools, deps, kernel)" >&2; exit 2 ;;
  esac
done

echo
echo "setup done in $(( $(date +%s) - start ))s"
