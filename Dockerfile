# VRAM Lab in a container: JupyterLab with the Go (VRAM Lab) kernel, and a
# JupyterHub single-user image (Zero to JupyterHub: see kernel/README.md, "On JupyterHub").
# It runs the same kernel/scripts/setup.sh that `make test` (and so CI)
# exercises, one step a layer, and starts through kernel/scripts/start.sh,
# which the hub test in `make test` launches the way a hub does.
# kernel/scripts/image-test.sh builds it with podman or buildah and checks
# the container (kernel/README.md, "In a container").
#
#   docker build -t vramlab . && docker run --rm -p 8888:8888 vramlab
#   (open the http://127.0.0.1:8888/lab?token=... URL it prints)
#
# Layers, so that a change to the source rebuilds in seconds: the Debian
# packages and the user; the Python pins (.venv); Go's modules, the
# kernel's tools (their build cache thrown away) and the dependencies'
# packages compiled for the kernel — each from the few files that decide
# it; then the source, the kernelspec and the project's own packages.
#
# The docker-stacks conventions a hub expects: user jovyan (uid 1000, group
# users, gid 100), home /home/jovyan (where a hub mounts the user's volume,
# and where the tutorials are copied on the first start), tini as PID 1, and
# jupyterhub-singleuser as the server when the hub starts the container
# (JUPYTERHUB_API_TOKEN set). Everything installed lives under /opt, outside
# the home, so a mounted volume hides none of it: the project and its .venv
# (JupyterLab, JupyterHub, the kernelspec) in /opt/vramlab, Go's module and
# build caches in /opt/go (pinned in the kernelspec, so the kernel builds
# offline; the build cache is writable by any uid, which the kernel needs).
#
# The base image is pinned by digest (the tag is for people): a rebuild gets
# the same bytes. To move to a newer base, read the digest with
# `docker buildx imagetools inspect golang:<version>-bookworm`. Where no
# registry can be reached, kernel/scripts/make-base.sh makes an equivalent
# base from Debian's packages (image-test.sh passes it as BASE).
ARG BASE=golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d
FROM ${BASE}

RUN dpkg -s gcc libc6-dev python3 python3-venv make tini >/dev/null 2>&1 || { \
      apt-get update \
   && apt-get install -y --no-install-recommends gcc libc6-dev python3 python3-venv make tini \
   && rm -rf /var/lib/apt/lists/*; }

ARG NB_USER=jovyan
ARG NB_UID=1000
ARG NB_GID=100
RUN useradd --create-home --uid "$NB_UID" --gid "$NB_GID" --shell /bin/bash "$NB_USER" \
 && mkdir -p /opt/vramlab /opt/go \
 && chown "$NB_UID:$NB_GID" /opt/vramlab /opt/go

USER ${NB_UID}
ENV HOME=/home/${NB_USER} \
    GOPATH=/opt/go \
    GOMODCACHE=/opt/go/pkg/mod \
    GOCACHE=/opt/go/cache \
    GOTOOLCHAIN=local \
    GOFLAGS=-buildvcs=false \
    CGO_CFLAGS=-Wno-deprecated-declarations \
    PATH=/opt/vramlab/.venv/bin:/opt/vramlab/.bin:/opt/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /opt/vramlab

# The Python pins.
COPY --chown=${NB_UID}:${NB_GID} kernel/scripts/lib.sh kernel/scripts/setup.sh kernel/scripts/
COPY --chown=${NB_UID}:${NB_GID} kernel/requirements.txt kernel/
COPY --chown=${NB_UID}:${NB_GID} kernel/papermill/ kernel/papermill/
RUN kernel/scripts/setup.sh python

# Go's modules, the kernel's tools (built with a build cache of their own,
# thrown away) and the dependencies' packages the kernel links.
COPY --chown=${NB_UID}:${NB_GID} go.mod go.sum ./
# The tools step builds gonb with its patch through the tools command
# (kernel/tools), which is all it needs of the repository besides go.mod.
COPY --chown=${NB_UID}:${NB_GID} kernel/tools/ kernel/tools/
RUN kernel/scripts/setup.sh toolchain modules \
 && VRAMLAB_TOOLS_GOCACHE=/tmp/tools-cache kernel/scripts/setup.sh tools \
 && rm -rf /tmp/tools-cache \
 && kernel/scripts/setup.sh deps \
 && chmod -R a+rwX /opt/go/cache

# The source: the kernelspec and the project's packages in the build cache.
COPY --chown=${NB_UID}:${NB_GID} . .
RUN kernel/scripts/setup.sh kernel \
 && find /opt/go/cache ! -perm -a+rw -exec chmod a+rwX {} +

WORKDIR /home/${NB_USER}
EXPOSE 8888
# Standalone: token authentication stays on; Jupyter prints the URL with the token.
ENV LAB_IP=0.0.0.0 LAB_PORT=8888
ENTRYPOINT ["tini", "-g", "--"]
CMD ["/opt/vramlab/kernel/scripts/start.sh"]
