#!/usr/bin/env bash
# Builds the top-level Dockerfile for real and runs the image, offline:
# Debian's docker.io engine on a private socket (no bridge, no iptables),
# and base images made locally and passed through the build arguments,
# since no registry is reachable:
#   local/golang   the host's Go toolchain, busybox for /bin/sh, CA certificates
#   local/static   /etc/passwd with nonroot (65532), CA certificates (what
#                  distroless static:nonroot holds)
# The build stage downloads modules through the host's network (GOPROXY).
# Then the container must answer /readyz with 200 and an authenticated
# GET /plants with 200, run as 65532, and carry the OCI labels.
#
#   deploy/check/image.sh   (needs root: dockerd; apt-get installs docker.io
#                            and busybox-static when missing)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
fail() { printf 'image: FAIL: %s\n' "$*" >&2; exit 1; }

if ! [ -x /usr/sbin/dockerd ] || ! [ -x /bin/busybox ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io busybox-static >/dev/null
fi
docker=/usr/bin/docker

d="$(mktemp -d)"
dockerd_pid=""
cid=""
cleanup() {
  [ -n "$cid" ] && DOCKER_HOST="unix://$d/docker.sock" "$docker" rm -f "$cid" >/dev/null 2>&1 || true
  if [ -n "$dockerd_pid" ]; then
    kill "$dockerd_pid" 2>/dev/null || true
    wait "$dockerd_pid" 2>/dev/null || true
  fi
  # dockerd leaves its network namespace mounted under exec-root.
  umount "$d/exec/netns/default" 2>/dev/null || true
  rm -rf "$d"
}
trap cleanup EXIT
export DOCKER_HOST="unix://$d/docker.sock"

/usr/sbin/dockerd --data-root="$d/root" --exec-root="$d/exec" --pidfile="$d/dockerd.pid" -H "$DOCKER_HOST" \
  --bridge=none --iptables=false --ip6tables=false > "$d/dockerd.log" 2>&1 &
dockerd_pid=$!
for _ in $(seq 1 60); do "$docker" version >/dev/null 2>&1 && break; sleep 0.5; done
"$docker" version --format 'docker engine {{.Server.Version}}' || { tail -20 "$d/dockerd.log"; fail "dockerd did not start"; }

# local/golang: GOROOT, a static busybox as /bin/sh, CA certificates.
goroot="$(go env GOROOT)"
g="$d/golang"
mkdir -p "$g/usr/local" "$g/bin" "$g/etc/ssl/certs" "$g/tmp" "$g/go" "$g/root"
cp -a "$goroot" "$g/usr/local/go"
cp /bin/busybox "$g/bin/busybox"
for tool in sh mkdir rm ls cat; do ln -s busybox "$g/bin/$tool"; done
cp /etc/ssl/certs/ca-certificates.crt "$g/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$g/etc/passwd"
chmod 1777 "$g/tmp"
tar -C "$g" -c . | "$docker" import \
  -c 'ENV PATH=/go/bin:/usr/local/go/bin:/bin' -c 'ENV GOPATH=/go' -c 'ENV HOME=/root' \
  -c "ENV GOPROXY=$(go env GOPROXY)" -c "ENV GOSUMDB=$(go env GOSUMDB)" \
  - local/golang:host >/dev/null

# local/static: the distroless static:nonroot layout.
s="$d/static"
mkdir -p "$s/etc/ssl/certs" "$s/tmp" "$s/home/nonroot"
cp /etc/ssl/certs/ca-certificates.crt "$s/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$s/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$s/etc/group"
chmod 1777 "$s/tmp"
tar -C "$s" -c . | "$docker" import - local/static:nonroot >/dev/null

version=v0.0.0-ci revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
start=$(date +%s)
DOCKER_BUILDKIT=0 "$docker" build -q --network host \
  --build-arg GO_IMAGE=local/golang:host --build-arg RUNTIME_IMAGE=local/static:nonroot \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  -t plantstore:ci . > "$d/build.log" 2>&1 || { cat "$d/build.log"; fail "docker build"; }
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
port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
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
