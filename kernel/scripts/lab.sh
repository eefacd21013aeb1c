#!/usr/bin/env bash
# The main job (`make lab`): set up, then serve JupyterLab on the tutorials,
# bound to loopback with token authentication on. Jupyter prints the URL
# (with its token) when it is ready. LAB_PORT picks the port (default 8888);
# LAB_IP the address (default 127.0.0.1; the container uses 0.0.0.0).
source "$(dirname "$0")/lib.sh"
"$ROOT/kernel/scripts/setup.sh"
say "JupyterLab on notebooks/ (Ctrl-C to stop)"
extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-root)  # containers and CI run as root
exec .venv/bin/jupyter lab "${extra[@]}" --notebook-dir="$ROOT/notebooks" --ip="${LAB_IP:-127.0.0.1}" \
  --port="${LAB_PORT:-8888}" --MultiKernelManager.default_kernel_name=vramlab --no-browser "$@"
