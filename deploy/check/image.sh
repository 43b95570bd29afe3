#!/usr/bin/env bash
# Builds the top-level Dockerfile for real with BuildKit and runs the image,
# offline: Debian's docker.io engine on a private socket (no bridge, no
# iptables), a private registry on 127.0.0.1 (Debian's docker-registry), and
# base images made locally, pushed there and passed to the build pinned by
# digest, as a release build passes the public ones:
#   golang:1.26.8-bookworm            the host's Go toolchain, busybox for /bin/sh,
#                                     CA certificates
#   distroless/static-debian12:nonroot /etc/passwd with nonroot (65532), CA
#                                     certificates (what distroless holds)
# The build stage downloads modules through the host's network (GOPROXY).
# Checked: a digest the registry does not hold fails the build; the image
# answers /readyz with 200 and an authenticated GET /plants with 200, runs
# as 65532 and carries the OCI labels; a rebuild after a source change
# reuses the module and build caches (timed); a linux/arm64 build
# cross-compiles an aarch64 binary without emulation; the image pushed as
# a release and pinned in a copy of the prod overlay by
# deploy/release/set-image.sh is pulled back by the digest it renders.
#
#   deploy/check/image.sh   (needs root: dockerd; apt-get installs docker.io,
#                            docker-registry and busybox-static when missing)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
fail() { printf 'image: FAIL: %s\n' "$*" >&2; exit 1; }

if ! [ -x /usr/sbin/dockerd ] || ! [ -x /bin/busybox ] || ! [ -x /usr/bin/docker-registry ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io docker-registry busybox-static >/dev/null
fi
# Debian's client: it drives the engine's own BuildKit without buildx.
docker=/usr/bin/docker
export DOCKER_BUILDKIT=1

port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

d="$(mktemp -d)"
dockerd_pid="" registry_pid="" cid=""
cleanup() {
  [ -n "$cid" ] && "$docker" rm -f "$cid" >/dev/null 2>&1 || true
  for pid in "$dockerd_pid" "$registry_pid"; do
    [ -n "$pid" ] || continue
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  # dockerd leaves its network namespace mounted under exec-root.
  umount "$d/exec/netns/default" 2>/dev/null || true
  rm -rf "$d"
}
trap cleanup EXIT
export DOCKER_HOST="unix://$d/docker.sock"

reg="127.0.0.1:$(port)"
cat > "$d/registry.yml" <<EOF
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $d/registry}}
http: {addr: $reg}
EOF
/usr/bin/docker-registry serve "$d/registry.yml" > "$d/registry.log" 2>&1 &
registry_pid=$!
/usr/sbin/dockerd --data-root="$d/root" --exec-root="$d/exec" --pidfile="$d/dockerd.pid" -H "$DOCKER_HOST" \
  --bridge=none --iptables=false --ip6tables=false > "$d/dockerd.log" 2>&1 &
dockerd_pid=$!
for _ in $(seq 1 60); do "$docker" version >/dev/null 2>&1 && curl -sf "http://$reg/v2/" >/dev/null && break; sleep 0.5; done
"$docker" version --format 'docker engine {{.Server.Version}}' || { tail -20 "$d/dockerd.log"; fail "dockerd did not start"; }
curl -sf "http://$reg/v2/" >/dev/null || { cat "$d/registry.log"; fail "the registry did not start"; }

# push IMAGE:TAG from a directory and print IMAGE:TAG@sha256:DIGEST, the
# form a release build passes (127.0.0.1 registries need no TLS).
push() {
  local dir="$1" ref="$reg/$2"; shift 2
  tar -C "$dir" -c . | "$docker" import "$@" - "$ref" >/dev/null
  "$docker" push -q "$ref" >/dev/null || fail "docker push $ref"
  local digest
  digest="$("$docker" image inspect "$ref" --format '{{index .RepoDigests 0}}')"
  echo "$ref@${digest#*@}"
}

# The Go toolchain image: GOROOT, a static busybox as /bin/sh, CA certificates.
goroot="$(go env GOROOT)"
g="$d/golang"
mkdir -p "$g/usr/local" "$g/bin" "$g/etc/ssl/certs" "$g/tmp" "$g/go" "$g/root"
cp -a "$goroot" "$g/usr/local/go"
rm -rf "$g/usr/local/go/test" "$g/usr/local/go/api"
cp /bin/busybox "$g/bin/busybox"
for tool in sh mkdir rm ls cat; do ln -s busybox "$g/bin/$tool"; done
cp /etc/ssl/certs/ca-certificates.crt "$g/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$g/etc/passwd"
chmod 1777 "$g/tmp"
go_image="$(push "$g" golang:1.26.8-bookworm \
  -c 'ENV PATH=/go/bin:/usr/local/go/bin:/bin' -c 'ENV GOPATH=/go' -c 'ENV HOME=/root' \
  -c "ENV GOPROXY=$(go env GOPROXY)" -c "ENV GOSUMDB=$(go env GOSUMDB)")"

# The runtime image: the distroless static:nonroot layout.
s="$d/static"
mkdir -p "$s/etc/ssl/certs" "$s/tmp" "$s/home/nonroot"
cp /etc/ssl/certs/ca-certificates.crt "$s/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$s/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$s/etc/group"
chmod 1777 "$s/tmp"
runtime_image="$(push "$s" distroless/static-debian12:nonroot)"
echo "base images: $go_image"
echo "             $runtime_image"
# Only the registry holds them from here on: the build must pull by digest.
"$docker" image rm -f "${go_image%@*}" "${runtime_image%@*}" >/dev/null

version=v0.0.0-ci revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
build() {
  "$docker" build -q --network host --build-arg GO_IMAGE="$go_image" --build-arg VERSION="$version" --build-arg REVISION="$revision" "$@" .
}

# A digest the registry does not hold must fail the build, not fall back
# to the tag.
wrong="${runtime_image%@*}@sha256:$(printf 'not the image' | sha256sum | cut -c1-64)"
if build --build-arg RUNTIME_IMAGE="$wrong" -t plantstore:wrong > "$d/wrong.log" 2>&1; then
  fail "the build succeeded with RUNTIME_IMAGE=$wrong"
fi
grep -q "not found" "$d/wrong.log" || { cat "$d/wrong.log"; fail "the build with a wrong digest failed for another reason"; }
echo "a wrong digest fails the build: $(grep -o 'sha256:[0-9a-f]*: not found' "$d/wrong.log" | head -1)"

start=$(date +%s)
build --build-arg RUNTIME_IMAGE="$runtime_image" -t plantstore:ci > "$d/build.log" 2>&1 || { cat "$d/build.log"; fail "docker build"; }
echo "docker build: $(( $(date +%s) - start )) s, $("$docker" image inspect plantstore:ci --format '{{.Size}}') bytes"

[ "$("$docker" image inspect plantstore:ci --format '{{.Config.User}}')" = 65532:65532 ] || fail "image user is not 65532:65532"
[ "$("$docker" image inspect plantstore:ci --format '{{index .Config.Labels "org.opencontainers.image.revision"}}')" = "$revision" ] ||
  fail "org.opencontainers.image.revision label is not $revision"
"$docker" image inspect plantstore:ci --format '{{json .Config.ExposedPorts}} {{json .Config.Entrypoint}}'

# A key pair for the container's static key source and a token signed with it.
keys="$d/keys"; mkdir -p "$keys"; chmod 755 "$keys"
go run . keygen -alg ES256 -out "$keys/ci" >/dev/null
chmod 644 "$keys/ci.jwks.json"
printf '[{"name":"Aloe vera","tag":"succulent","readers":["user:ci"]}]\n' > "$keys/catalog.json"
chmod 644 "$keys/catalog.json"
token="$(go run . token -key "$keys/ci.key" -sub ci -aud plantstore -ttl 5m)"
api="$(port)" admin="$(port)"

cid="$("$docker" run -d --network host --read-only --cap-drop ALL --security-opt no-new-privileges \
  -v "$keys:/config:ro" \
  -e PLANTSTORE_ADDR="127.0.0.1:$api" -e PLANTSTORE_ADMIN_ADDR="127.0.0.1:$admin" \
  -e PLANTSTORE_JWT_KEY_FILE=/config/ci.jwks.json -e PLANTSTORE_JWT_AUDIENCE=plantstore \
  -e PLANTSTORE_DATA=/config/catalog.json plantstore:ci)"
ok=""
for _ in $(seq 1 40); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz")" = 200 ]; then ok=1; break; fi
  sleep 0.25
done
[ -n "$ok" ] || { "$docker" logs "$cid"; fail "/readyz did not answer 200"; }
echo "container /readyz: 200"
body="$(curl -s -w ' %{http_code}' -H "Authorization: Bearer $token" "http://127.0.0.1:$api/plants")"
[ "$body" = '[{"name":"Aloe vera","tag":"succulent"}] 200' ] || { "$docker" logs "$cid"; fail "GET /plants: $body"; }
echo "container GET /plants: $body"
code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$api/plants")"
[ "$code" = 401 ] || fail "GET /plants without a token: $code, want 401"
echo "container GET /plants without a token: 401"
[ "$("$docker" top "$cid" -o pid,uid | awk 'NR == 2 {print $2}')" = 65532 ] || fail "the process does not run as 65532"
"$docker" run --rm plantstore:ci version

# The release step for real: the image pushed as a release pushes it,
# pinned by deploy/release/set-image.sh in a copy of the prod overlay, and
# the reference the overlay renders pulled back from the registry.
command -v kustomize >/dev/null 2>&1 || fail "kustomize is not on PATH (.ci/deploy.sh installs it)"
release_ref="$reg/plantstore/plantstore:v0.1.0"
"$docker" tag plantstore:ci "$release_ref"
"$docker" push -q "$release_ref" >/dev/null || fail "docker push $release_ref"
release_digest="$("$docker" image inspect "$release_ref" --format '{{index .RepoDigests 0}}')"
release_digest="${release_digest#*@}"
mkdir -p "$d/deploy"
cp -r deploy/base deploy/components deploy/overlays "$d/deploy/"
deploy/release/set-image.sh "$release_ref@$release_digest" "$d/deploy/overlays/prod/release"
rendered="$(kustomize build "$d/deploy/overlays/prod" | sed -n 's/^ *image: //p' | sort -u)"
[ "$rendered" = "$release_ref@$release_digest" ] || fail "the prod overlay renders $rendered, want $release_ref@$release_digest"
"$docker" image rm -f "$release_ref" >/dev/null
"$docker" pull -q "$rendered" >/dev/null || fail "docker pull $rendered"
echo "release: the prod overlay pins $rendered, pulled back by digest"

# A source change reruns the compile step only, on warm module and build
# caches (the cache mounts), not the module download.
start=$(date +%s)
build --build-arg RUNTIME_IMAGE="$runtime_image" --build-arg VERSION=v0.0.1-ci -t plantstore:ci2 > "$d/build2.log" 2>&1 ||
  { cat "$d/build2.log"; fail "docker build (second)"; }
echo "docker build after a change of VERSION: $(( $(date +%s) - start )) s (cache mounts warm)"

# linux/arm64 from this amd64 builder: the build stage runs natively and
# cross-compiles; the binary in the image must be an aarch64 ELF.
start=$(date +%s)
build --platform linux/arm64 --build-arg RUNTIME_IMAGE="$runtime_image" -t plantstore:arm64 > "$d/build3.log" 2>&1 ||
  { cat "$d/build3.log"; fail "docker build --platform linux/arm64"; }
[ "$("$docker" image inspect plantstore:arm64 --format '{{.Os}}/{{.Architecture}}')" = linux/arm64 ] ||
  fail "plantstore:arm64 is $("$docker" image inspect plantstore:arm64 --format '{{.Os}}/{{.Architecture}}')"
arm="$("$docker" create --platform linux/arm64 plantstore:arm64)"
"$docker" cp "$arm:/plantstore" "$d/plantstore-arm64"
"$docker" rm "$arm" >/dev/null
# ELF e_machine (2 bytes at offset 18): 183 is AArch64, 62 x86-64.
machine="$(od -An -t u2 -j 18 -N 2 "$d/plantstore-arm64" | tr -d ' ')"
[ "$machine" = 183 ] || fail "the linux/arm64 image holds an ELF for machine $machine, want 183 (AArch64)"
echo "docker build --platform linux/arm64: $(( $(date +%s) - start )) s, an AArch64 binary"
