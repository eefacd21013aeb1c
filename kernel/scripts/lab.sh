#!/usr/bin/env bash
# The main job (`make lab`): set up (kernel/scripts/setup.sh, seconds when
# nothing changed), then serve JupyterLab on the user's own copy of the
# tutorials (kernel/scripts/serve.sh says where and how).
"$(dirname "$0")/setup.sh"
exec "$(dirname "$0")/serve.sh" "$@"
