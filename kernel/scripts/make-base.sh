#!/usr/bin/env bash
# Makes the image's base where no registry can be reached: Debian bookworm
# from Debian's packages (debootstrap, the same suite and packages as
# golang:1.26.8-bookworm plus what the Dockerfile installs) with the Go
# toolchain of this machine in /usr/local/go, as the golang image has it,
# and this machine's CA certificates (so the build reaches the package
# registries the way this machine does). Imported as the image NAME:
#
#   kernel/scripts/make-base.sh localhost/vramlab-base:bookworm-go1.26.8
#
# Needs root (debootstrap), debootstrap and podman or buildah. Takes about
# 3 minutes on 2 cores.
set -euo pipefail
name=${1:?usage: make-base.sh IMAGE-NAME}
engine=$(command -v podman || command -v buildah) || { echo "make-base: needs podman or buildah" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "make-base: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
goroot=$(go env GOROOT)
# go.mod's language version (1.26) is the toolchain's minor release.
want=$(sed -n 's/^go \([0-9]*\.[0-9]*\).*/\1/p' "$(dirname "$0")/../../go.mod")
have=$(go env GOVERSION)
case $have in "go$want".*) ;; *) echo "make-base: go.mod asks for Go $want, this machine has $have" >&2; exit 1 ;; esac

root=$(mktemp -d /tmp/vramlab-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
# The golang:bookworm image's packages (buildpack-deps:bookworm-scm plus
# gcc and libc6-dev) are more than the image needs; these are what the
# Dockerfile asks for, and what setup.sh and the kernel use.
debootstrap --variant=minbase \
  --include=ca-certificates,gcc,libc6-dev,python3,python3-venv,make,tini,git,curl \
  bookworm "$root/fs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$root/debootstrap.log" 2>&1 ||
  { tail -20 "$root/debootstrap.log" >&2; exit 1; }
cp /etc/ssl/certs/ca-certificates.crt "$root/fs/etc/ssl/certs/ca-certificates.crt"
cp -a "$goroot" "$root/fs/usr/local/go"
rm -rf "$root/fs/var/cache/apt/archives"/*.deb "$root/fs/var/lib/apt/lists"/*
case $engine in
  *podman)
    tar -C "$root/fs" -c . | podman import -q \
      --change 'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV GOLANG_VERSION='"${have#go}" --change 'CMD ["bash"]' - "$name" >/dev/null ;;
  *)
    c=$(buildah from scratch)
    buildah copy "$c" "$root/fs" / >/dev/null
    buildah config --env PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env GOLANG_VERSION="${have#go}" --cmd bash "$c"
    buildah commit --rm "$c" "$name" >/dev/null ;;
esac
echo "made $name from Debian bookworm packages and $have"
