#!/usr/bin/env bash
# The container's entry point, in the docker-stacks way. Launched by
# JupyterHub (which sets JUPYTERHUB_API_TOKEN and the JUPYTERHUB_* settings of
# the user's server): the user's single-user server, jupyterhub-singleuser,
# on the user's own copy of the tutorials ($VRAMLAB_WORK, default ~/vramlab:
# copied on first start, new tutorials added later, nothing overwritten, so
# a user's edits and outputs stay theirs), with the vramlab kernel as the
# default. Started on its own: JupyterLab (serve.sh) on the same copy, with
# nothing set up again (the image was set up when it was built). Arguments
# go to the server either way.
#
# Any uid: where the home is not writable (docker run --user 1234 without
# a volume there), the home is a fresh directory under /tmp and the start
# says so; mount a volume on the home to keep the work.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$ROOT
if [ ! -w "${HOME:-/nonexistent}" ]; then
  was=${HOME:-}
  export HOME=/tmp/vramlab-home-$(id -u)
  mkdir -p "$HOME"
  echo "start: $was is not writable by uid $(id -u); using $HOME (mount a volume on $was to keep your work)"
fi
work=${VRAMLAB_WORK:-$HOME/vramlab}
extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-root)  # containers and CI run as root
if [ -n "${JUPYTERHUB_API_TOKEN:-}" ]; then
  echo "start: $(work_copy "$work") new tutorials copied into $work"
  # A local-process spawner stops a server with SIGINT first; jupyter_server
  # without a terminal takes that as KeyboardInterrupt and exits without
  # shutting its kernels down (they run in their own sessions and would be
  # left behind). SIGTERM is its clean stop (kernels shut down, connection
  # files removed), so both signals are passed on as SIGTERM.
  "$root/.venv/bin/jupyterhub-singleuser" --ServerApp.root_dir="$work" \
    --MultiKernelManager.default_kernel_name=vramlab "${extra[@]}" \
    --LabApp.news_url= --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate "$@" &
  server=$!
  trap 'kill -TERM "$server" 2>/dev/null || true' INT TERM
  status=0
  wait "$server" || status=$?
  while kill -0 "$server" 2>/dev/null; do status=0; wait "$server" || status=$?; done
  exit "$status"
fi
VRAMLAB_WORK=$work exec "$root/kernel/scripts/serve.sh" "$@"
