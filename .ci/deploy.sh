#!/usr/bin/env bash
# Deploy checks (issue 5): builds every kustomize overlay in deploy/overlays,
# validates each object strictly against the Kubernetes v1.36.3 API schema
# (kubeconform with schemas generated from k8s.io/kubernetes' swagger.json and
# the Gateway API HTTPRoute CRD), then runs the Go module deploy/check:
# strict decoding into k8s.io/api types and the deployment policy, BuildKit's
# lint rules on the Dockerfile, the gateway end to end (oidc-provider, nginx,
# plantstore by OIDC discovery) and a real Prometheus on the shipped scrape
# job. Each check is also shown to reject a broken input.
#
# Opt-in, slower steps:
#   PLANTSTORE_APISERVER=1  server-side dry-run (dryRun=All, strict field
#                           validation) against a real kube-apiserver + etcd;
#                           the first run builds kube-apiserver (~7 min) into
#                           $PLANTSTORE_CI_CACHE (default /var/cache/plantstore-ci).
#                           Runs by default once that binary is cached.
#   PLANTSTORE_IMAGE=1      docker build of the Dockerfile with Debian's
#                           docker.io on a private socket and locally made base
#                           images, then /readyz and GET /plants in the container.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

step() { printf '\n== deploy: %s\n' "$*"; }
fail() { printf 'deploy: FAIL: %s\n' "$*" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
export PLANTSTORE_REQUIRE_TOOLS=1
export NPM_CONFIG_AUDIT=false NPM_CONFIG_FUND=false NPM_CONFIG_UPDATE_NOTIFIER=false
export PATH="$PATH:$(go env GOPATH)/bin"
k8s_version=1.36.3
cache="${PLANTSTORE_CI_CACHE:-/var/cache/plantstore-ci}"

tmp="$(mktemp -d)"
pids=()
# cleanup stops what this script started, newest first (kube-apiserver
# before its etcd), by PID: SIGTERM, then SIGKILL after 10 s.
cleanup() {
  local i pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid="${pids[i]}"
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# free_port prints a TCP port on 127.0.0.1 that was free a moment ago.
free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

step "tools"
missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
export PATH="$PATH:/usr/sbin"
if command -v kustomize >/dev/null 2>&1; then
  kustomize=(kustomize build)
elif command -v kubectl >/dev/null 2>&1; then
  kustomize=(kubectl kustomize)
else
  GOFLAGS= go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2
  kustomize=(kustomize build)
fi
export PLANTSTORE_KUSTOMIZE="${kustomize[*]}"
command -v kubeconform >/dev/null 2>&1 || GOFLAGS= go install github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0
command -v node >/dev/null 2>&1 || fail "node is not installed (Node 20 or later runs deploy/gateway/oidc.mjs)"
lock=deploy/gateway/package-lock.json installed=deploy/gateway/node_modules/.package-lock.json
if [ ! -f "$installed" ] || ! node -e '
  const fs = require("fs");
  const want = JSON.parse(fs.readFileSync(process.argv[1])).packages;
  const have = JSON.parse(fs.readFileSync(process.argv[2])).packages;
  for (const [k, v] of Object.entries(want)) {
    if (k !== "" && (!have[k] || have[k].version !== v.version)) process.exit(1);
  }' "$lock" "$installed"; then
  npm ci --prefix deploy/gateway --no-audit --no-fund --loglevel=error
fi
echo "kustomize: ${kustomize[*]}"
echo "kubeconform $(kubeconform -v), nginx $(nginx -v 2>&1 | cut -d/ -f2), node $(node --version)"

step "kustomize build"
mkdir -p "$tmp/manifests"
for dir in deploy/overlays/*/; do
  name="$(basename "$dir")"
  "${kustomize[@]}" "$dir" > "$tmp/manifests/$name.yaml"
  echo "$name: $(grep -c '^kind:' "$tmp/manifests/$name.yaml") objects"
done

step "schemas from k8s.io/kubernetes@v$k8s_version and the HTTPRoute CRD"
k8s_dir="$(go mod download -json "k8s.io/kubernetes@v$k8s_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
(cd deploy/check && go mod download sigs.k8s.io/gateway-api)
gw_dir="$(cd deploy/check && go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)"
schemas="$tmp/schemas"
(cd deploy/check && go run ./k8sschema -out "$schemas/v$k8s_version-standalone-strict" \
  -swagger "$k8s_dir/api/openapi-spec/swagger.json" \
  "$gw_dir/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml")

step "kubeconform -strict (every kind needs a schema)"
kubeconform_() {
  kubeconform -strict -summary -kubernetes-version "$k8s_version" \
    -schema-location "$schemas/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$@"
}
kubeconform_ "$tmp"/manifests/*.yaml
if kubeconform_ deploy/check/testdata/broken.yaml > "$tmp/broken.out" 2>&1; then
  cat "$tmp/broken.out"; fail "kubeconform accepted deploy/check/testdata/broken.yaml"
fi
grep -q "containerPortt" "$tmp/broken.out" || { cat "$tmp/broken.out"; fail "kubeconform did not name containerPortt"; }
echo "deploy/check/testdata/broken.yaml rejected, as it must be"

step "build plantstore"
go build -buildvcs=auto -o "$tmp/plantstore" .
export PLANTSTORE_BIN="$tmp/plantstore"

step "go vet and go test (deploy/check)"
(cd deploy/check && go vet ./... && go test -count=1 -timeout 5m ./...)

# --- server-side dry-run -------------------------------------------------
kas="$cache/kube-apiserver-v$k8s_version"
if [ "${PLANTSTORE_APISERVER:-}" = 1 ] || { [ "${PLANTSTORE_APISERVER:-}" != 0 ] && [ -x "$kas" ]; }; then
  step "kube-apiserver v$k8s_version + etcd: server-side dry-run"
  command -v etcd >/dev/null 2>&1 || { apt-get update -qq; apt-get install -y -qq --no-install-recommends etcd-server >/dev/null; }
  kas="$(deploy/check/kube-apiserver.sh "$cache")"
  d="$tmp/kas"; mkdir -p "$d/certs"
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  echo "admin-token,admin,admin,system:masters" > "$d/tokens.csv"
  ec="$(free_port)" ep="$(free_port)" em="$(free_port)" sp="$(free_port)"
  etcd --data-dir="$d/etcd" --listen-client-urls="http://127.0.0.1:$ec" --advertise-client-urls="http://127.0.0.1:$ec" \
    --listen-peer-urls="http://127.0.0.1:$ep" --initial-advertise-peer-urls="http://127.0.0.1:$ep" \
    --initial-cluster="default=http://127.0.0.1:$ep" --listen-metrics-urls="http://127.0.0.1:$em" > "$d/etcd.log" 2>&1 &
  pids+=($!)
  "$kas" --etcd-servers="http://127.0.0.1:$ec" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
    --secure-port="$sp" --cert-dir="$d/certs" --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$d/sa.pub" --service-account-signing-key-file="$d/sa.key" \
    --token-auth-file="$d/tokens.csv" --authorization-mode=RBAC --service-cluster-ip-range=10.96.0.0/24 > "$d/kas.log" 2>&1 &
  pids+=($!)
  cat > "$d/kubeconfig" <<KCFG
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:$sp", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: admin-token}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
KCFG
  export KUBECONFIG="$d/kubeconfig"
  for _ in $(seq 1 120); do
    [ "$(curl -sk -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer admin-token' "https://127.0.0.1:$sp/readyz")" = 200 ] && break
    sleep 0.5
  done
  [ "$(curl -sk -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer admin-token' "https://127.0.0.1:$sp/readyz")" = 200 ] ||
    { tail -20 "$d/kas.log"; fail "kube-apiserver not ready"; }
  # The HTTPRoute CRD and the overlays' namespaces exist for real; every
  # other object is only dry-run.
  kubectl apply -f "$gw_dir/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml" 2>&1 | grep -v '^Warning: version difference' || true
  kubectl wait --for=condition=Established --timeout=60s crd/httproutes.gateway.networking.k8s.io 2>&1 | grep -v '^Warning: version difference'
  kubectl apply -f deploy/overlays/dev/namespace.yaml -f deploy/overlays/prod/namespace.yaml 2>&1 | grep -v '^Warning: version difference'
  for f in "$tmp"/manifests/*.yaml; do
    echo "-- $(basename "$f")"
    kubectl apply --dry-run=server --validate=strict -f "$f" > "$d/out" 2>&1 || { cat "$d/out"; fail "server dry-run of $f"; }
    grep -v '^Warning: version difference' "$d/out" > "$d/out2" || true
    # A warning (PodSecurity "restricted", a deprecated field) fails too.
    if grep -q '^Warning' "$d/out2"; then cat "$d/out2"; fail "server dry-run of $f warned"; fi
    cat "$d/out2"
  done
  for bad in deploy/check/testdata/broken.yaml deploy/check/testdata/selector-mismatch.yaml; do
    if kubectl apply --dry-run=server --validate=strict -f "$bad" > "$d/out" 2>&1; then
      cat "$d/out"; fail "the API server accepted $bad"
    fi
    echo "$bad rejected: $(grep -v '^Warning: version difference' "$d/out" | head -1)"
  done
  kubectl apply --dry-run=server --validate=strict -f deploy/check/testdata/not-restricted.yaml > "$d/out" 2>&1 || true
  grep -q 'would violate PodSecurity "restricted' "$d/out" || { cat "$d/out"; fail "no PodSecurity warning for testdata/not-restricted.yaml"; }
  echo "deploy/check/testdata/not-restricted.yaml warned: $(grep -m1 'would violate' "$d/out" | cut -c1-100)..."
else
  step "server-side dry-run skipped (PLANTSTORE_APISERVER=1 builds kube-apiserver into $cache once)"
fi

# --- the image, built and run --------------------------------------------
if [ "${PLANTSTORE_IMAGE:-}" = 1 ]; then
  step "docker build and run (deploy/check/image.sh)"
  deploy/check/image.sh
else
  step "image build skipped (PLANTSTORE_IMAGE=1 runs deploy/check/image.sh, about 4 min)"
fi

step "ok"
