# VRAM Lab in a container: JupyterLab with the Go (VRAM Lab) kernel.
# Thin on purpose: it runs the same kernel/scripts/setup.sh that `make test`
# (and so CI) exercises. No Docker engine exists on the build machines, so this
# file is not built in CI; the scripts it calls are.
#
#   docker build -t vramlab . && docker run --rm -p 8888:8888 vramlab
#   (open the http://127.0.0.1:8888/lab?token=... URL it prints)
# The base image is pinned by digest (the tag is for people): a rebuild gets
# the same bytes. To move to a newer base, read the digest with
# `docker buildx imagetools inspect golang:<version>-bookworm`.
FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d

RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev python3 python3-venv make \
 && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 lab
USER lab
WORKDIR /home/lab/vramlab
COPY --chown=lab:lab . .

# Go tools, modules (cached for offline use), .venv, the kernelspec, a warm build cache.
RUN kernel/scripts/setup.sh

EXPOSE 8888
# Token authentication stays on; Jupyter prints the URL with the token.
ENV LAB_IP=0.0.0.0 LAB_PORT=8888
CMD ["kernel/scripts/lab.sh"]
