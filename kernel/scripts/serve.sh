#!/usr/bin/env bash
# Serves JupyterLab on the user's own copy of the tutorials, bound to
# loopback with token authentication on; nothing is set up here (`make lab`
# runs setup.sh first; the container's image is set up when it is built).
# Jupyter prints the URL (with its token) when it is ready. LAB_PORT picks
# the port (default 8888); LAB_IP the address (default 127.0.0.1; the
# container uses 0.0.0.0). The copy lives in $VRAMLAB_WORK (default
# .work/notebooks, outside version control): made once, tutorials added
# later join it, nothing in it is overwritten (`make refresh` starts it
# anew, keeping the old one).
source "$(dirname "$0")/lib.sh"
work=${VRAMLAB_WORK:-$ROOT/.work/notebooks}
added=$(work_copy "$work")
say "JupyterLab on your copy of the tutorials, $work ($added new from notebooks/; Ctrl-C to stop)"
extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-root)  # containers and CI run as root
# No "Jupyter news?" toast and no update check: the lab works offline and
# says nothing the user did not ask for.
exec .venv/bin/jupyter lab "${extra[@]}" --notebook-dir="$work" --ip="${LAB_IP:-127.0.0.1}" \
  --port="${LAB_PORT:-8888}" --MultiKernelManager.default_kernel_name=vramlab --no-browser \
  --LabApp.news_url= --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate "$@"
