# VRAM Lab in a container: JupyterLab with the Go (VRAM Lab) kernel, and a
# JupyterHub single-user image (Zero to JupyterHub: see README, "On JupyterHub").
# Thin on purpose: it runs the same kernel/scripts/setup.sh that `make test`
# (and so CI) exercises, and starts through kernel/scripts/start.sh, which the
# hub test in `make test` launches the way a hub does. No Docker engine exists
# on the build machines, so this file is not built in CI; the scripts it calls are.
#
#   docker build -t vramlab . && docker run --rm -p 8888:8888 vramlab
#   (open the http://127.0.0.1:8888/lab?token=... URL it prints)
#
# The docker-stacks conventions a hub expects: user jovyan (uid 1000, group
# users, gid 100), home /home/jovyan (where a hub mounts the user's volume),
# tini as PID 1, and jupyterhub-singleuser as the server when the hub starts
# the container (JUPYTERHUB_API_TOKEN set). Everything installed lives under
# /opt, outside the home, so a mounted volume hides none of it: the project and
# its .venv (JupyterLab, JupyterHub, the kernelspec) in /opt/vramlab, Go's
# module and build caches in /opt/go (pinned in the kernelspec at setup, so the
# kernel builds offline).
#
# The base image is pinned by digest (the tag is for people): a rebuild gets
# the same bytes. To move to a newer base, read the digest with
# `docker buildx imagetools inspect golang:<version>-bookworm`.
FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d

RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev python3 python3-venv make tini \
 && rm -rf /var/lib/apt/lists/*

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
    PATH=/opt/vramlab/.venv/bin:/opt/vramlab/.bin:/opt/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /opt/vramlab
COPY --chown=${NB_UID}:${NB_GID} . .

# Go tools, modules (cached for offline use), .venv, the kernelspec, a warm build cache.
RUN kernel/scripts/setup.sh

WORKDIR /home/${NB_USER}
EXPOSE 8888
# Standalone: token authentication stays on; Jupyter prints the URL with the token.
ENV LAB_IP=0.0.0.0 LAB_PORT=8888
ENTRYPOINT ["tini", "-g", "--"]
CMD ["/opt/vramlab/kernel/scripts/start.sh"]
