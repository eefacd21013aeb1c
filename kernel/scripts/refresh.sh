#!/usr/bin/env bash
# `make refresh`: moves the working copy of the tutorials aside
# (.work/notebooks.<date>) and makes a fresh one from notebooks/.
source "$(dirname "$0")/lib.sh"
work=${VRAMLAB_WORK:-$ROOT/.work/notebooks}
if [ -d "$work" ]; then
  old="$work.$(date +%Y%m%d-%H%M%S)"
  mv "$work" "$old"
  echo "your previous copy is in $old"
fi
added=$(work_copy "$work")
echo "a fresh copy of $added tutorials is in $work"
