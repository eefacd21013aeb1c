#!/usr/bin/env bash
# The test command (`make test`): installs like `make lab` does, then runs
# go vet, the Go tests under the race detector, the engine's tests again
# with the step program's invariant pass, a cgo-free build, every
# notebook through the real vramlab kernel, and the browser tests in a real
# JupyterLab.
source "$(dirname "$0")/lib.sh"
"$ROOT/kernel/scripts/setup.sh"
"$ROOT/kernel/scripts/setup-test.sh"

say "go vet"
go vet ./...

say "go test (with the race detector)"
# go test's own limit is 10 minutes a package; the limit is set well above
# (speed is held by the benchmarks, not by a limit here). The engine's
# one-goroutine table walks skip under the detector (vram/race_skip_test.go)
# and run in full in the sanity pass below.
go test -race -timeout 40m ./...

say "the step program's invariant pass (vram/sanity.go) on every training plan of the engine's tests, and every engine test without the race detector"
go test -timeout 20m ./vram -sanity

say "build without cgo (vram and charts must build anywhere)"
CGO_ENABLED=0 go build ./...

say "Python pins install on the image's Python (Debian bookworm's 3.11.2)"
# The Dockerfile builds .venv with Debian's python3, which may be older than
# this machine's; pip checks each pin's Requires-Python against that version.
dl=$(mktemp -d) && trap 'rm -rf "$dl"' EXIT
.venv/bin/pip download -q --disable-pip-version-check --no-deps --python-version 3.11.2 \
  --only-binary=:all: -r kernel/requirements.txt -d "$dl" 2>"$dl/pip.err" || { cat "$dl/pip.err" >&2; exit 1; }
# A yanked pin is only a warning to pip; here it fails (yanked for a reason).
if grep -qi yanked "$dl/pip.err"; then cat "$dl/pip.err" >&2; exit 1; fi

say "make lab's working copy of the tutorials"
# Made once from notebooks/, new tutorials join it, a user's edits stay,
# and make refresh starts it anew while keeping the old copy.
(
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  all=$(ls notebooks/*.ipynb notebooks/zh/*.ipynb | wc -l)
  [ "$(work_copy "$tmp/nb")" = "$all" ] || { echo "work_copy: first copy incomplete" >&2; exit 1; }
  echo '{"edited": true}' > "$tmp/nb/00-check-your-setup.ipynb"
  rm "$tmp/nb/01-who-eats-the-memory.ipynb"
  [ "$(work_copy "$tmp/nb")" = 1 ] || { echo "work_copy: a removed tutorial did not come back" >&2; exit 1; }
  grep -q edited "$tmp/nb/00-check-your-setup.ipynb" || { echo "work_copy: overwrote a user's notebook" >&2; exit 1; }
  VRAMLAB_WORK=$tmp/nb kernel/scripts/refresh.sh >/dev/null
  [ "$(ls -d "$tmp"/nb.* | wc -l)" = 1 ] && ! grep -q edited "$tmp/nb/00-check-your-setup.ipynb" ||
    { echo "make refresh: the old copy was not kept aside or the new one is not fresh" >&2; exit 1; }
  echo "ok"
)

say "the MCP server driven by the reference MCP client SDK (both protocol eras)"
(
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
  go build -o "$bin/mcp" ./examples/mcp
  go build -o "$bin/plan" ./examples/plan
  .venv-mcp/bin/python kernel/mcp/test_client.py "$bin/mcp" "$bin/plan"
)

say "papermill's Go parameter translator"
.venv/bin/python -m unittest discover -s kernel/papermill -p 'test_*.py'

say "notebooks, executed headless through the vramlab kernel"
.venv/bin/python kernel/scripts/run_notebooks.py notebooks notebooks/zh

say "the Chinese tutorials keep the English code cells"
.venv/bin/python kernel/scripts/zh_sync.py --check

say "a typo in a cell reads as one line (real kernel)"
.venv/bin/python kernel/scripts/cell_errors.py

say "browser tests (JupyterLab + Debian chromium via playwright-core)"
# A test that hangs fails after 15 minutes (the longest single wait, the
# what-if widget's, is 7),
# each file's process exits when its tests are done even if a handle is
# left open, and the whole step is bounded, so a hang reads as a failure
# with its test's name rather than running into CI's limit.
# make test set up above, so the many `make report` runs below skip
# setup.sh (as make reports' children do); report.test.mjs's first report
# runs the whole path, setup included, as a user's make report does.
export VRAMLAB_SET_UP=1
(cd kernel/browsertest && timeout --kill-after=30 2700 \
  node --test --test-concurrency=1 --test-timeout=900000 --test-force-exit --test-reporter=spec)
