#!/usr/bin/env bash
# `make docs`: rewrite every table of measured numbers in the docs from the
# tests and benchmarks that measure them, so none is edited by hand. Each
# table sits between `<!-- BEGIN <command> -->` and `<!-- END -->`, the
# command being what writes it; `make test` fails when a table the tests
# write is not this code's. The speed table takes the benchmarks' time on
# this machine (run it on a quiet one); the sizes need a report, made here.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
go test ./vram -run '^(TestFamiliesTable|TestFSDP2Traces|TestVLLMMultimodalTable)$' -update
go test ./examples/validate -run '^TestReadmeAccuracySection$' -update
go test ./examples/plan -run '^TestReadmeExample$' -update
bench=$(mktemp)
trap 'rm -f "$bench"' EXIT
go test ./vram ./vram/gpu -run '^$' -bench . -benchmem -count "${BENCH_COUNT:-3}" | tee "$bench"
go run ./kernel/docs speed "$bench" vram/README.md
PLAN=examples/plans/llama3-8b-lora.json kernel/scripts/report.sh
go run ./kernel/docs sizes kernel/README.md
echo "docs: tables rewritten (git diff shows what moved)"
