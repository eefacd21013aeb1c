#!/usr/bin/env bash
# Builds the container image with podman (or buildah) and checks the
# container as a user and a hub meet it. Not part of `make test`: the first
# build takes minutes (kernel/README.md, "In a container", says how long).
#
#   kernel/scripts/image-test.sh            build (base: the Dockerfile's pinned digest,
#                                           or one made from Debian packages) and check
#   BUILDER=buildah kernel/scripts/image-test.sh   build with buildah bud (podman runs it)
#   FRESH=1 kernel/scripts/image-test.sh            the first build without the layer cache
#
# The base: the Dockerfile's pinned golang image where a registry answers;
# else kernel/scripts/make-base.sh's image, made once from Debian's packages
# and this machine's Go (kept as localhost/vramlab-base:<go version>).
# The build context is a copy of the files git knows (as a clone has them),
# so nothing of this checkout's .venv or caches goes in. Checks:
#   - a rebuild after a one-line source change (under a minute), the image size;
#   - the log prints the URL with its token; the API answers 403 without it;
#   - the vramlab kernelspec, its kernel offline (GOPROXY=off);
#   - uid 1000, tini as PID 1, `doctor`; setup does not run again at start;
#   - the tutorials copied into a volume mounted on the home;
#   - another uid (1234) starts the server; a tutorial executes with
#     --network none under it;
#   - the container stops within 5 s.
source "$(dirname "$0")/lib.sh"
command -v podman >/dev/null || { echo "image-test: needs podman (apt-get install podman buildah)" >&2; exit 1; }
builder=${BUILDER:-podman}
image=${IMAGE:-localhost/vramlab:test}
name=vramlab-image-test-$$
tmp=$(mktemp -d /tmp/vramlab-image-test.XXXXXX)
cleanup() {
  podman rm -f "$name" "$name-uid" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "image-test: FAIL: $*" >&2; podman logs "$name" 2>&1 | tail -30 >&2 || true; exit 1; }
ok() { echo "ok   $*"; }

say "base image"
pinned=$(sed -n 's/^ARG BASE=//p' Dockerfile)
base=$pinned
if ! podman image exists "$pinned" && ! timeout 120 podman pull -q "$pinned" >/dev/null 2>&1; then
  base=localhost/vramlab-base:$(go env GOVERSION)
  if podman image exists "$base"; then
    echo "no registry answers; using $base (made by make-base.sh before)"
  else
    echo "no registry answers; making $base from Debian's packages"
    kernel/scripts/make-base.sh "$base"
  fi
fi
echo "BASE=$base"

say "build context: the files git knows"
mkdir "$tmp/ctx"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -C "$tmp/ctx" -xf -
echo "$(find "$tmp/ctx" -type f | wc -l) files"

build() {
  local t0=$SECONDS cache=(--layers)
  [ "${1:-}" = fresh ] && cache+=(--no-cache)
  case $builder in
    podman) podman build -q "${cache[@]}" --build-arg BASE="$base" -t "$image" "$tmp/ctx" >"$tmp/build.log" 2>&1 ;;
    buildah) buildah bud -q "${cache[@]}" --build-arg BASE="$base" -t "$image" "$tmp/ctx" >"$tmp/build.log" 2>&1 ;;
    *) echo "image-test: BUILDER is podman or buildah" >&2; exit 2 ;;
  esac || { tail -40 "$tmp/build.log" >&2; fail "the image did not build"; }
  echo $((SECONDS - t0))
}

say "build ($builder)"
first=$(build "$([ -n "${FRESH:-}" ] && echo fresh)")
echo "built $image in ${first}s"
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "image size: $((size / 1000000)) MB"

say "rebuild after a one-line change to the source"
echo "// image-test: a one-line change ($(date +%s%N))" >> "$tmp/ctx/vram/doc.go"
second=$(build)
echo "rebuilt in ${second}s"
[ "$second" -lt 60 ] || fail "a one-line change took ${second}s to rebuild (want under a minute)"
ok "rebuild after a one-line change: ${second}s"

# podman asks for more open files and processes than some machines allow
# (runc: "error setting rlimit"); then the containers get this machine's.
run_opts=()
if ! podman run --rm "$image" true >/dev/null 2>"$tmp/probe"; then
  grep -q rlimit "$tmp/probe" || { cat "$tmp/probe" >&2; fail "the image does not run"; }
  run_opts=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=16384:16384)
  echo "this machine's limits for the containers: ${run_opts[*]}"
fi

say "the container, standalone"
mkdir -p "$tmp/home"
chown 1000:100 "$tmp/home" 2>/dev/null || chmod 777 "$tmp/home"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
t0=$SECONDS
podman run "${run_opts[@]}" -d --name "$name" -p "127.0.0.1:$port:8888" -v "$tmp/home:/home/jovyan" "$image" >/dev/null
token=
for _ in $(seq 120); do
  token=$(podman logs "$name" 2>&1 | sed -n 's/.*http:\/\/127\.0\.0\.1:8888\/lab?token=\([0-9a-f]*\).*/\1/p' | head -1)
  [ -n "$token" ] && break
  sleep 0.5
done
[ -n "$token" ] || fail "no URL with a token in the log"
ok "the log prints the URL with its token ($((SECONDS - t0))s after the start)"
podman logs "$name" 2>&1 | grep -q "setup done\|==> Go toolchain" && fail "the start ran setup again"
ok "the start does not run setup"

api() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
code=$(api "http://127.0.0.1:$port/api/kernelspecs")
[ "$code" = 403 ] || fail "the API without the token answered $code, want 403"
ok "403 without the token"
code=$(api -H "Authorization: token $token" "http://127.0.0.1:$port/api/kernelspecs")
[ "$code" = 200 ] || fail "the API with the token answered $code"
python3 - "$tmp/body" <<'PY' || fail "the kernelspec"
import json, sys
specs = json.load(open(sys.argv[1]))
k = specs["kernelspecs"]["vramlab"]["spec"]
assert specs["default"] == "vramlab", specs["default"]
assert k["env"]["GOPROXY"] == "off", k["env"]
assert k["language"] == "go"
PY
ok "the vramlab kernelspec (default, GOPROXY=off)"

uid=$(podman exec "$name" id -u)
[ "$uid" = 1000 ] || fail "the server runs as uid $uid"
pid1=$(podman exec "$name" cat /proc/1/cmdline | tr '\0' ' ')
case $pid1 in tini*|/usr/bin/tini*) ;; *) fail "PID 1 is $pid1" ;; esac
ok "uid 1000, PID 1: $pid1"
podman exec -w /opt/vramlab "$name" go run ./kernel doctor >"$tmp/doctor" 2>&1 || { cat "$tmp/doctor" >&2; fail "doctor"; }
ok "doctor: $(tail -1 "$tmp/doctor")"
[ -e "$tmp/home/vramlab/00-check-your-setup.ipynb" ] && [ -e "$tmp/home/vramlab/zh/01-who-eats-the-memory.ipynb" ] ||
  fail "the tutorials are not in the volume on the home"
ok "the tutorials are in the volume mounted on the home"

t0=$(date +%s.%N)
podman stop -t 10 "$name" >/dev/null
took=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
python3 -c "import sys; sys.exit(0 if $took < 5 else 1)" || fail "stop took ${took}s"
ok "stopped in ${took}s"

say "another uid (1234), no network"
podman run "${run_opts[@]}" -d --name "$name-uid" --network none --user 1234 "$image" >/dev/null
started=
for _ in $(seq 120); do
  podman logs "$name-uid" 2>&1 | grep -q "lab?token=" && { started=1; break; }
  sleep 0.5
done
podman logs "$name-uid" >"$tmp/uid.log" 2>&1 || true
podman rm -f "$name-uid" >/dev/null 2>&1
[ -n "$started" ] || { cat "$tmp/uid.log" >&2; fail "the server did not start as uid 1234"; }
ok "the server starts as uid 1234: $(grep -m1 'not writable' "$tmp/uid.log" || echo 'home writable')"
# The tutorial through the kernel as start.sh runs it for that uid (its
# home under /tmp), offline.
podman run "${run_opts[@]}" --rm --network none --user 1234 -e HOME=/tmp/vramlab-home-1234 -w /opt/vramlab "$image" \
  bash -c 'mkdir -p "$HOME" && .venv/bin/python kernel/scripts/run_notebooks.py -o /tmp/executed notebooks/01-who-eats-the-memory.ipynb' \
  >"$tmp/nb.log" 2>&1 || { cat "$tmp/nb.log" >&2; fail "the tutorial"; }
ok "tutorial 01 executed offline as uid 1234: $(grep -m1 '^ok ' "$tmp/nb.log")"

echo
echo "image-test: all checks passed (first build ${first}s, rebuild ${second}s, image $((size / 1000000)) MB)"
