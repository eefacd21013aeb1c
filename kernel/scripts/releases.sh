#!/usr/bin/env bash
# `make releases` (a maintainer's command, not part of CI): for each engine
# and library whose rules change with its release, the newest release the
# engine models beside the newest on the package index, so that a lag shows
# the day it opens. Needs the package index (pip index versions).
source "$(dirname "$0")/lib.sh"
[ -x .venv/bin/pip ] || "$ROOT/kernel/scripts/setup.sh"
printf '%-14s %-16s %-16s %s\n' library modelled "on PyPI" ""
# The package index's name of each library, where it has one: llama.cpp,
# Ollama and TGI release on GitHub only (PyPI's "ollama" is the client),
# NCCL as the wheel torch 2.15 depends on.
pypi_name() {
  case "$1" in
    llama_cpp | ollama | tgi) echo "" ;;
    nccl) echo nvidia-nccl-cu13 ;;
    *) echo "$1" ;;
  esac
}
go run ./examples/plan -releases | while read -r lib rows; do
  newest=${rows##* }
  name=$(pypi_name "$lib")
  pypi=""
  if [ -n "$name" ]; then
    pypi=$(.venv/bin/pip index versions --disable-pip-version-check "$name" 2>/dev/null | sed -n 's/^[^(]*(\(.*\))$/\1/p' || true)
  fi
  note=""
  if [ -z "$name" ]; then
    note="(not on PyPI: see the project's GitHub releases)"
  elif [ -z "$pypi" ]; then
    note="(the package index did not answer)"
  elif [ "$pypi" != "$newest" ]; then
    note="← newer on PyPI: read its wheel and add a row (vram/README.md, Releases)"
  fi
  printf '%-14s %-16s %-16s %s\n' "$lib" "$newest" "${pypi:-?}" "$note"
done
