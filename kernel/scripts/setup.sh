#!/usr/bin/env bash
# Sets up everything JupyterLab with the VRAM Lab kernel needs. Idempotent: a
# second run only checks and takes seconds. Used by `make lab`, `make test`
# and the Dockerfile, so all three install the same way.
source "$(dirname "$0")/lib.sh"
start=$(date +%s)

say "Go toolchain"
command -v go >/dev/null || { echo "Go 1.26 is required: https://go.dev/dl/" >&2; exit 1; }
go version
# go-nvml (GPU cells) needs cgo, which needs a C compiler.
command -v gcc >/dev/null || apt_install gcc libc6-dev

say "Go modules (pinned in go.mod; cached for offline use)"
go mod download

say "Python virtualenv .venv (kernel/requirements.txt)"
stamp=.venv/.requirements.sha256
want=$(cat kernel/requirements.txt kernel/papermill/pyproject.toml kernel/papermill/vramlab_papermill.py | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r kernel/requirements.txt
  # The Go parameter translator for papermill (its build backend, flit_core,
  # is pinned in its pyproject.toml).
  .venv/bin/pip install -q --disable-pip-version-check --no-deps ./kernel/papermill
  echo "$want" > "$stamp"
else
  echo "up to date"
fi

say "Go (VRAM Lab) kernel"
go run ./kernel install

echo
echo "setup done in $(( $(date +%s) - start ))s"
