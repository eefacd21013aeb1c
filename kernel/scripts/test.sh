#!/usr/bin/env bash
# The test command (`make test`): installs like `make lab` does, then runs
# go vet, the Go tests under the race detector, a cgo-free build, every
# notebook through the real vramlab kernel, and the browser tests in a real
# JupyterLab.
source "$(dirname "$0")/lib.sh"
"$ROOT/kernel/scripts/setup.sh"
"$ROOT/kernel/scripts/setup-test.sh"

say "go vet"
go vet ./...

say "go test (with the race detector)"
go test -race ./...

say "build without cgo (vram and charts must build anywhere)"
CGO_ENABLED=0 go build ./...

say "papermill's Go parameter translator"
.venv/bin/python -m unittest discover -s kernel/papermill -p 'test_*.py'

say "notebooks, executed headless through the vramlab kernel"
.venv/bin/python kernel/scripts/run_notebooks.py notebooks

say "browser tests (JupyterLab + Debian chromium via playwright-core)"
(cd kernel/browsertest && node --test --test-concurrency=1 --test-reporter=spec)
