#!/usr/bin/env bash
# Deploy checks (issues 5 and 17): builds every kustomize overlay in
# deploy/overlays and deploy/namespaces, validates each object strictly
# against the Kubernetes v1.36.3 API schema (kubeconform with schemas
# generated from k8s.io/kubernetes' swagger.json, the Gateway API HTTPRoute
# CRD, the Prometheus Operator's ServiceMonitor, PodMonitor, PrometheusRule
# and Probe CRDs, and Envoy Gateway's SecurityPolicy and BackendTrafficPolicy
# CRDs), pins a copy of the prod overlay to a digest with
# deploy/release/set-image.sh and checks what it renders, writes the
# binary's SBOM (CycloneDX, cyclonedx-gomod), then runs the Go module
# deploy/check: strict decoding and the deployment policy (also against the
# overlays as they were before issue 17 and before the alerting fixes),
# promtool on the alerting rules and their unit tests, the rules, the
# dashboard's queries and the Probe (through a real blackbox exporter)
# against a real Prometheus after real traffic to four plantstores (two with
# issuers files), BuildKit's lint rules on the Dockerfile, the
# gateway end to end (oidc-provider, nginx, plantstore by OIDC discovery;
# two providers as two issuers; a DPoP client made with oauth4webapi), the
# three replicas sharing one redis-server behind nginx (replay and rate
# across replicas, Redis killed mid-run), the
# tracing end to end (plantstore's spans through nginx to the OpenTelemetry
# Collector's own OTLP receiver, .ci/otlpsink, over OTLP/HTTP and gRPC) and
# a real Prometheus on the shipped scrape job. Each check is also shown to
# reject a broken input. deploy/gateway's npm packages (package-lock.json)
# are installed with npm ci whenever node_modules differs from the lock.
#
# The Helm chart (deploy/chart/plantstore, issue 38): helm lint --strict
# and helm template with each set of ci/*-values.yaml through the same
# kubeconform schemas, the chart packaged, pushed to a private OCI
# registry (Debian's docker-registry on 127.0.0.1) and rendered again from
# there; deploy/check's go test compares it with the overlays and runs the
# deploy policy on it; with the API server, helm install --dry-run=server
# and the helm commands of docs/deploy.md against that registry.
#
# Opt-in, slower steps:
#   TEST_APISERVER=1  server-side dry-run (dryRun=All, strict field
#                           validation) against a real kube-apiserver + etcd;
#                           the first run builds kube-apiserver (~7 min) into
#                           $TEST_CI_CACHE (default /var/cache/plantstore-ci).
#                           Runs by default once that binary is cached.
#   TEST_IMAGE=1      BuildKit build of the Dockerfile with Debian's
#                           docker.io on a private socket, locally made base
#                           images pinned by digest in a private registry,
#                           then /readyz and GET /plants in the container, a
#                           rebuild on warm caches and a linux/arm64
#                           cross-build (about 5 min).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

step() { printf '\n== deploy: %s\n' "$*"; }
fail() { printf 'deploy: FAIL: %s\n' "$*" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
export TEST_REQUIRE_TOOLS=1
# deploy/check's database test needs a PostgreSQL ($TEST_DATABASE_URL,
# or postgres@127.0.0.1:5432/test as .ci/run starts it): fail, not skip.
export TEST_REQUIRE_DB="${TEST_REQUIRE_DB:-1}"
export NPM_CONFIG_AUDIT=false NPM_CONFIG_FUND=false NPM_CONFIG_UPDATE_NOTIFIER=false
export PATH="$PATH:$(go env GOPATH)/bin"
k8s_version=1.36.3
cache="${TEST_CI_CACHE:-/var/cache/plantstore-ci}"

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
command -v prometheus-blackbox-exporter >/dev/null 2>&1 || missing+=(prometheus-blackbox-exporter)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# The chart's OCI registry.
[ -x /usr/bin/docker-registry ] || missing+=(docker-registry)
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
export PATH="$PATH:/usr/sbin"
# kustomize itself (not kubectl's): deploy/release/set-image.sh runs
# "kustomize edit", which kubectl does not have.
command -v kustomize >/dev/null 2>&1 || GOFLAGS= go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2
kustomize=(kustomize build)
export TEST_KUSTOMIZE="${kustomize[*]}"
command -v kubeconform >/dev/null 2>&1 || GOFLAGS= go install github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0
command -v cyclonedx-gomod >/dev/null 2>&1 || GOFLAGS= go install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
# helm, stamped as Helm's own Makefile stamps it: without the Kubernetes
# version, helm template and lint assume 1.20, below the chart's kubeVersion.
# Always the one in GOPATH/bin, ahead of any other on PATH.
helm_version=v3.22.0
helm_bin="$(go env GOPATH)/bin/helm"
if [ "$("$helm_bin" version --template '{{.Version}}' 2>/dev/null)" != "$helm_version" ]; then
  GOFLAGS= go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$helm_version \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37 \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37" \
    "helm.sh/helm/v3/cmd/helm@$helm_version"
fi
mkdir -p "$tmp/bin" && ln -sf "$helm_bin" "$tmp/bin/helm"
export PATH="$tmp/bin:$PATH" TEST_HELM="$helm_bin"
command -v node >/dev/null 2>&1 || fail "node is not installed (Node 20 or later runs deploy/gateway/oidc.mjs and dpop-client.mjs)"
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
echo "kubeconform $(kubeconform -v), nginx $(nginx -v 2>&1 | cut -d/ -f2), node $(node --version), helm $(helm version --template '{{.Version}}')"

step "kustomize build"
mkdir -p "$tmp/manifests"
for dir in deploy/overlays/*/ deploy/namespaces/; do
  name="$(basename "$dir")"
  "${kustomize[@]}" "$dir" > "$tmp/manifests/$name.yaml"
  echo "$name: $(grep -c '^kind:' "$tmp/manifests/$name.yaml") objects"
done
# Each component no overlay takes, on prod as an overlay that takes it
# would (kustomize reads bases only by relative paths), and the gateway's
# half of components/mtls, applied on its own in the Gateway's namespace.
for dir in deploy/components/*/; do
  name="$(basename "$dir")"
  grep -q "/components/$name\$" deploy/overlays/*/kustomization.yaml && continue
  k="$tmp/with-$name"
  mkdir -p "$k"
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n' \
    "$(realpath --relative-to="$k" deploy/overlays/prod)" "$(realpath --relative-to="$k" "$dir")" > "$k/kustomization.yaml"
  "${kustomize[@]}" "$k" > "$tmp/manifests/prod-with-$name.yaml"
  echo "prod with components/$name: $(grep -c '^kind:' "$tmp/manifests/prod-with-$name.yaml") objects"
done
"${kustomize[@]}" deploy/components/mtls/gateway > "$tmp/manifests/mtls-gateway.yaml"
echo "mtls/gateway: $(grep -c '^kind:' "$tmp/manifests/mtls-gateway.yaml") objects"

step "schemas from k8s.io/kubernetes@v$k8s_version, the HTTPRoute CRD, the Prometheus Operator and Envoy Gateway CRDs"
k8s_dir="$(go mod download -json "k8s.io/kubernetes@v$k8s_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
(cd deploy/check && go mod download sigs.k8s.io/gateway-api)
gw_dir="$(cd deploy/check && go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)"
# The CRDs ship in the operator's main module, at the version of the API
# types deploy/check decodes with (its go.mod); only that module's zip is
# fetched, not its dependency graph.
po_version="$(cd deploy/check && go list -m -f '{{.Version}}' github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring)"
po_dir="$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$po_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
[ -d "$po_dir/example/prometheus-operator-crd" ] || fail "no CRDs in github.com/prometheus-operator/prometheus-operator@$po_version"
crds=("$gw_dir/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml")
for kind in servicemonitors podmonitors prometheusrules probes; do
  crds+=("$po_dir/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml")
done
echo "prometheus-operator $po_version"
# Envoy Gateway's CRDs ship in its main module's Helm chart, at the version
# of the API types deploy/check decodes with.
eg_version="$(cd deploy/check && go list -m -f '{{.Version}}' github.com/envoyproxy/gateway)"
eg_dir="$(go mod download -json "github.com/envoyproxy/gateway@$eg_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
for kind in securitypolicies backendtrafficpolicies clienttrafficpolicies; do
  f="$eg_dir/charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_$kind.yaml"
  [ -f "$f" ] || fail "no $kind CRD in github.com/envoyproxy/gateway@$eg_version"
  crds+=("$f")
done
echo "envoy gateway $eg_version"
# docs/deploy.md shows Argo CD and Flux objects; their CRDs come from the
# projects' module zips (the newest versions built with this Go release).
argocd_dir="$(go mod download -json github.com/argoproj/argo-cd/v3@v3.5.0 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
kc_dir="$(go mod download -json github.com/fluxcd/kustomize-controller@v1.9.6 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
sc_dir="$(go mod download -json github.com/fluxcd/source-controller@v1.9.6 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
# The HelmRelease of the chart's Flux example (v1.4.3: the newest the proxy
# serves).
hc_dir="$(go mod download -json github.com/fluxcd/helm-controller@v1.4.3 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
docs_crds=("$argocd_dir/manifests/crds/application-crd.yaml"
  "$kc_dir/config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"
  "$sc_dir/config/crd/bases/source.toolkit.fluxcd.io_gitrepositories.yaml"
  "$sc_dir/config/crd/bases/source.toolkit.fluxcd.io_ocirepositories.yaml"
  "$hc_dir/config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml")
schemas="$tmp/schemas"
(cd deploy/check && go run ./k8sschema -out "$schemas/v$k8s_version-standalone-strict" \
  -swagger "$k8s_dir/api/openapi-spec/swagger.json" "${crds[@]}" "${docs_crds[@]}")

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
if kubeconform_ deploy/check/testdata/broken-monitoring.yaml > "$tmp/broken.out" 2>&1; then
  cat "$tmp/broken.out"; fail "kubeconform accepted deploy/check/testdata/broken-monitoring.yaml"
fi
for want in "ServiceMonitor broken is invalid.*'intervall' not allowed" "PodMonitor broken is invalid.*scrapeTimeout" "PrometheusRule broken is invalid.*missing property 'expr'" \
  "Probe broken is invalid.*'modul' not allowed" "BackendTrafficPolicy broken is invalid.*'requests'" "SecurityPolicy broken is invalid.*'claimToHeader' not allowed"; do
  grep -q "$want" "$tmp/broken.out" || { cat "$tmp/broken.out"; fail "kubeconform did not report: $want"; }
done
echo "deploy/check/testdata/broken-monitoring.yaml rejected (ServiceMonitor, PodMonitor, PrometheusRule, Probe, BackendTrafficPolicy, SecurityPolicy), as it must be"
if kubeconform_ deploy/check/testdata/broken-mtls.yaml > "$tmp/broken.out" 2>&1; then
  cat "$tmp/broken.out"; fail "kubeconform accepted deploy/check/testdata/broken-mtls.yaml"
fi
grep -q "ClientTrafficPolicy broken-optional is invalid.*'optionall' not allowed" "$tmp/broken.out" || { cat "$tmp/broken.out"; fail "kubeconform did not name optionall"; }
echo "deploy/check/testdata/broken-mtls.yaml: its misspelled ClientTrafficPolicy rejected, as it must be"

step "deploy/release/set-image.sh on a copy of deploy/: prod by digest, runbooks of that version"
mkdir -p "$tmp/release"
cp -r deploy/base deploy/components deploy/overlays "$tmp/release/"
digest="sha256:$(printf 'plantstore v9.8.7 for the check' | sha256sum | cut -c1-64)"
deploy/release/set-image.sh "ghcr.io/plantstore/plantstore:v9.8.7@$digest" "$tmp/release/overlays/prod/release"
"${kustomize[@]}" "$tmp/release/overlays/prod" > "$tmp/release.yaml"
images="$(sed -n 's/^ *image: //p' "$tmp/release.yaml" | sort -u)"
[ "$images" = "ghcr.io/plantstore/plantstore:v9.8.7@$digest" ] || fail "set-image.sh: the overlay renders images $images"
runbooks="$(sed -n 's/^ *runbook_url: //p' "$tmp/release.yaml" | sed 's#docs/runbooks/.*##' | sort -u)"
[ "$runbooks" = "https://github.com/plantstore/plantstore/blob/v9.8.7/" ] || fail "set-image.sh: runbook links at $runbooks"
git diff --quiet -- deploy/overlays || fail "set-image.sh changed deploy/overlays instead of the copy"
if deploy/release/set-image.sh "ghcr.io/plantstore/plantstore:v9.8.7" "$tmp/release/overlays/prod/release" 2> "$tmp/release.err"; then
  fail "set-image.sh accepted an image without a digest"
fi
echo "every image renders as the digest set; runbooks at $runbooks; a tag alone is refused: $(cat "$tmp/release.err")"

step "kubeconform -strict on the Argo CD and Flux objects of docs/deploy.md"
# The yaml blocks that are objects (not values-prod.yaml, a values file).
awk '/^```yaml$/ {f = 1; b = ""; next} /^```$/ {if (f && b ~ /(^|\n)apiVersion:/) printf "%s---\n", b; f = 0; next} f {b = b $0 "\n"}' \
  docs/deploy.md > "$tmp/docs.yaml"
for kind in Application Kustomization OCIRepository HelmRelease; do
  grep -q "^kind: $kind\$" "$tmp/docs.yaml" || fail "docs/deploy.md shows no $kind"
done
kubeconform_ "$tmp/docs.yaml"
sed 's/^  destination:$/  destinaton:/; s/^  dependsOn:$/  dependOn:/; s/^  chartRef:$/  chartRf:/; s/^  layerSelector:$/  layerSelecter:/' \
  "$tmp/docs.yaml" > "$tmp/docs-broken.yaml"
if kubeconform_ "$tmp/docs-broken.yaml" > "$tmp/broken.out" 2>&1; then
  cat "$tmp/broken.out"; fail "kubeconform accepted misspelled Application, Kustomization, OCIRepository and HelmRelease fields"
fi
for want in "Application plantstore-prod is invalid" "Kustomization plantstore-prod is invalid" \
  "OCIRepository plantstore-chart is invalid" "HelmRelease plantstore is invalid"; do
  grep -q "$want" "$tmp/broken.out" || { cat "$tmp/broken.out"; fail "kubeconform did not report: $want"; }
done
echo "the same objects with a misspelled field are rejected, as they must be"
# The gateway that verifies tokens, which docs/deploy.md shows as the other
# way (indented in its list item): its SecurityPolicy and
# BackendTrafficPolicy against Envoy Gateway's CRDs, here and in the
# server dry-run below.
awk '/^  ```yaml$/ {f = 1; next} /^  ```$/ {if (f) print "---"; f = 0} f {sub(/^  /, ""); print}' docs/deploy.md > "$tmp/docs-gateway.yaml"
grep -q '^kind: SecurityPolicy$' "$tmp/docs-gateway.yaml" && grep -q '^kind: BackendTrafficPolicy$' "$tmp/docs-gateway.yaml" ||
  fail "docs/deploy.md shows no SecurityPolicy and BackendTrafficPolicy of a gateway that verifies tokens"
kubeconform_ "$tmp/docs-gateway.yaml"
sed 's/^\( *\)cacheDuration:/\1cacheDurations:/' "$tmp/docs-gateway.yaml" > "$tmp/docs-broken.yaml"
if kubeconform_ "$tmp/docs-broken.yaml" > "$tmp/broken.out" 2>&1; then
  cat "$tmp/broken.out"; fail "kubeconform accepted a misspelled cacheDuration"
fi
grep -q "SecurityPolicy plantstore is invalid.*'cacheDurations' not allowed" "$tmp/broken.out" || { cat "$tmp/broken.out"; fail "kubeconform did not name cacheDurations"; }
echo "docs/deploy.md's gateway that verifies tokens validates, and rejects a misspelled cacheDuration"

step "helm chart: lint --strict, template through kubeconform, package and push to an OCI registry"
chart=deploy/chart/plantstore
chart_version="$(sed -n 's/^version: //p' "$chart/Chart.yaml")"
# chart_args SET prints the --values of a comma list of ci/*-values.yaml.
chart_args() {
  local v
  for v in ${1//,/ }; do printf -- '--values\n%s\n' "$chart/ci/$v-values.yaml"; done
}
chart_ns() { case "$1" in dev*) echo plantstore-dev ;; *) echo plantstore ;; esac; }
chart_sets=(dev prod prod,prod-ingress prod,features dev,features)
mkdir -p "$tmp/chart"
for set in "${chart_sets[@]}"; do
  mapfile -t args < <(chart_args "$set")
  helm lint --strict "$chart" "${args[@]}" > "$tmp/lint.out" 2>&1 || { cat "$tmp/lint.out"; fail "helm lint --strict with $set"; }
  helm template plantstore "$chart" --namespace "$(chart_ns "$set")" "${args[@]}" > "$tmp/chart/${set//,/+}.yaml"
  echo "$set: lint --strict passed, $(grep -c '^kind:' "$tmp/chart/${set//,/+}.yaml") objects"
done
kubeconform_ "$tmp"/chart/*.yaml
# A broken template: kubeconform names the field, and lint refuses a
# template that does not parse; the schema refuses an unknown value.
cp -r "$chart" "$tmp/broken-chart"
sed -i 's/containerPort: 8080/containerPortt: 8080/' "$tmp/broken-chart/templates/deployment.yaml"
helm template plantstore "$tmp/broken-chart" --namespace plantstore-dev --values "$chart/ci/dev-values.yaml" > "$tmp/broken-chart.yaml"
if kubeconform_ "$tmp/broken-chart.yaml" > "$tmp/broken.out" 2>&1; then cat "$tmp/broken.out"; fail "kubeconform accepted the chart with containerPortt"; fi
grep -q "containerPortt" "$tmp/broken.out" || { cat "$tmp/broken.out"; fail "kubeconform did not name containerPortt"; }
echo "the chart with containerPortt rejected by kubeconform: $(grep -m1 -o "additional properties 'containerPortt' not allowed" "$tmp/broken.out")"
printf '{{- if .Values.env }}\n' >> "$tmp/broken-chart/templates/service.yaml"
if helm lint --strict "$tmp/broken-chart" --values "$chart/ci/dev-values.yaml" > "$tmp/broken.out" 2>&1; then
  cat "$tmp/broken.out"; fail "helm lint --strict accepted a template that does not parse"
fi
grep -q 'service.yaml.*unexpected EOF' "$tmp/broken.out" || { cat "$tmp/broken.out"; fail "helm lint did not name service.yaml"; }
echo "a template that does not parse rejected by helm lint: $(grep -m1 -o 'service.yaml.*unexpected EOF' "$tmp/broken.out")"
if helm lint --strict "$chart" --values "$chart/ci/dev-values.yaml" --set replicaCount=3 > "$tmp/broken.out" 2>&1; then
  cat "$tmp/broken.out"; fail "helm lint --strict accepted an unknown value"
fi
grep -q "additional properties 'replicaCount' not allowed" "$tmp/broken.out" || { cat "$tmp/broken.out"; fail "the schema did not name replicaCount"; }
echo "an unknown value rejected by values.schema.json: additional properties 'replicaCount' not allowed"

# The packaged chart, pushed as an OCI artifact to a private registry and
# pulled back: Helm's media types, and the same rendering as the directory.
reg="127.0.0.1:$(free_port)"
mkdir -p "$tmp/registry"
printf 'version: 0.1\nlog: {level: warn}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: %s}\n' "$tmp/registry/data" "$reg" > "$tmp/registry/config.yml"
/usr/bin/docker-registry serve "$tmp/registry/config.yml" > "$tmp/registry/log" 2>&1 &
pids+=($!)
for _ in $(seq 1 40); do curl -sf "http://$reg/v2/" >/dev/null && break; sleep 0.25; done
curl -sf "http://$reg/v2/" >/dev/null || { cat "$tmp/registry/log"; fail "the OCI registry did not start"; }
helm package "$chart" --destination "$tmp/pkg"
helm push "$tmp/pkg/plantstore-$chart_version.tgz" "oci://$reg/charts" --plain-http
curl -sf -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$reg/v2/charts/plantstore/manifests/$chart_version" > "$tmp/manifest.json"
node -e '
  const m = JSON.parse(require("fs").readFileSync(process.argv[1]));
  const ok = m.schemaVersion === 2 && (m.mediaType || "application/vnd.oci.image.manifest.v1+json") === "application/vnd.oci.image.manifest.v1+json" &&
    m.config.mediaType === "application/vnd.cncf.helm.config.v1+json" &&
    m.layers.length === 1 && m.layers[0].mediaType === "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
  if (!ok) { console.error("not a Helm OCI artifact:", JSON.stringify(m)); process.exit(1); }
  console.log("oci://" + process.argv[2] + "/charts/plantstore:" + process.argv[3] + ": " + m.config.mediaType + ", layer " + m.layers[0].digest);
' "$tmp/manifest.json" "$reg" "$chart_version"
for set in prod dev,features; do
  mapfile -t args < <(chart_args "$set")
  helm template plantstore "oci://$reg/charts/plantstore" --version "$chart_version" --plain-http \
    --namespace "$(chart_ns "$set")" "${args[@]}" > "$tmp/chart-oci.yaml"
  diff -u "$tmp/chart/${set//,/+}.yaml" "$tmp/chart-oci.yaml" || fail "the chart pulled from the registry renders $set otherwise"
done
echo "pulled back from the registry, the chart renders prod and dev,features as the directory does"
if helm show chart "oci://$reg/charts/plantstore" --version 9.9.9 --plain-http > "$tmp/broken.out" 2>&1; then
  cat "$tmp/broken.out"; fail "helm found a chart version the registry does not hold"
fi
grep -q 'not found' "$tmp/broken.out" || { cat "$tmp/broken.out"; fail "helm show chart of a missing version did not say not found"; }
echo "a version the registry does not hold is refused: $(grep -m1 'not found' "$tmp/broken.out" | head -c 160)"

step "build plantstore and the OTLP sink; the binary's SBOM"
.ci/build "$tmp/plantstore"
export TEST_PLANTSTORE_BIN="$tmp/plantstore"
# CycloneDX from the module versions the binary carries (its build info);
# the release pipeline attaches it to the image (docs/deploy.md).
cyclonedx-gomod bin -json -output "$tmp/plantstore.cdx.json" "$tmp/plantstore" 2>/dev/null
node -e '
  const sbom = JSON.parse(require("fs").readFileSync(process.argv[1]));
  const names = (sbom.components || []).map(c => c.name + "@" + c.version);
  const want = process.argv.slice(2);
  const missing = want.filter(w => !names.includes(w));
  if (sbom.bomFormat !== "CycloneDX" || missing.length) { console.error("SBOM lacks", missing, "of", names.length); process.exit(1); }
  console.log("SBOM: CycloneDX " + sbom.specVersion + ", " + names.length + " components, " + want.join(", ") + " among them");
' "$tmp/plantstore.cdx.json" $(go list -m -f '{{.Path}}@{{.Version}}' github.com/golang-jwt/jwt/v5 github.com/gin-gonic/gin) ||
  fail "the SBOM does not list the binary's modules"
go build -C .ci/otlpsink -o "$tmp/otlpsink" .
export TEST_OTLPSINK_BIN="$tmp/otlpsink"

step "go vet and go test (deploy/check)"
(cd deploy/check && go vet ./... && go test -count=1 -timeout 5m ./...)

# --- server-side dry-run -------------------------------------------------
kas="$cache/kube-apiserver-v$k8s_version"
if [ "${TEST_APISERVER:-}" = 1 ] || { [ "${TEST_APISERVER:-}" != 0 ] && [ -x "$kas" ]; }; then
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
  # The CRDs and deploy/namespaces exist for real; every other object is
  # only dry-run.
  for crd in "${crds[@]}"; do
    kubectl apply --server-side -f "$crd" 2>&1 | grep -v '^Warning: version difference' || true
  done
  kubectl wait --for=condition=Established --timeout=60s crd/httproutes.gateway.networking.k8s.io \
    crd/servicemonitors.monitoring.coreos.com crd/podmonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com \
    crd/probes.monitoring.coreos.com crd/securitypolicies.gateway.envoyproxy.io crd/backendtrafficpolicies.gateway.envoyproxy.io \
    crd/clienttrafficpolicies.gateway.envoyproxy.io 2>&1 |
    grep -v '^Warning: version difference'
  kubectl apply -f "$tmp/manifests/namespaces.yaml" 2>&1 | grep -v '^Warning: version difference'
  # The Gateway's namespace, where deploy/components/mtls/gateway goes; the
  # platform's, not this repository's.
  kubectl create namespace gateway-system 2>&1 | grep -v '^Warning: version difference'
  for f in "$tmp"/manifests/*.yaml; do
    [ "$(basename "$f")" = namespaces.yaml ] && continue
    echo "-- $(basename "$f")"
    kubectl apply --dry-run=server --validate=strict -f "$f" > "$d/out" 2>&1 || { cat "$d/out"; fail "server dry-run of $f"; }
    grep -v '^Warning: version difference' "$d/out" > "$d/out2" || true
    # A warning (PodSecurity "restricted", a deprecated field) fails too.
    if grep -q '^Warning' "$d/out2"; then cat "$d/out2"; fail "server dry-run of $f warned"; fi
    cat "$d/out2"
  done
  # Each broken file is rejected for its own reasons: every object of
  # broken-monitoring.yaml is named, not just the first to fail.
  for bad in "broken.yaml:containerPortt" "selector-mismatch.yaml:does not match template" \
    "broken-monitoring.yaml:ServiceMonitor" "broken-monitoring.yaml:PodMonitor" "broken-monitoring.yaml:PrometheusRule" \
    "broken-monitoring.yaml:Probe" "broken-monitoring.yaml:BackendTrafficPolicy" "broken-monitoring.yaml:SecurityPolicy" \
    "broken-mtls.yaml:optionall" "broken-mtls.yaml:certDetailsToAdd can only be set when mode is AppendForward or SanitizeSet"; do
    file="deploy/check/testdata/${bad%%:*}" want="${bad#*:}"
    if kubectl apply --dry-run=server --validate=strict -f "$file" > "$d/out" 2>&1; then
      cat "$d/out"; fail "the API server accepted $file"
    fi
    grep -q "$want" "$d/out" || { cat "$d/out"; fail "the API server's refusal of $file does not name $want"; }
    echo "$file rejected ($want): $(grep -v '^Warning: version difference' "$d/out" | grep -m1 "$want" | cut -c1-160)"
  done
  echo "-- docs/deploy.md: the gateway that verifies tokens"
  kubectl -n plantstore apply --dry-run=server --validate=strict -f "$tmp/docs-gateway.yaml" > "$d/out" 2>&1 || { cat "$d/out"; fail "server dry-run of docs/deploy.md's gateway objects"; }
  grep -v '^Warning: version difference' "$d/out"
  # The chart: helm's own server dry run (its install path against the
  # cluster: every kind it renders must be one the API server serves, so a
  # missing CRD fails here; helm does not send the objects for field
  # validation), and kubectl's strict server-side dry run of what it
  # renders, which does, admission warnings included.
  for set in "${chart_sets[@]}"; do
    mapfile -t args < <(chart_args "$set")
    echo "-- chart $set"
    helm install --dry-run=server plantstore "$chart" --namespace "$(chart_ns "$set")" "${args[@]}" > "$d/out" 2>&1 ||
      { cat "$d/out"; fail "helm install --dry-run=server with $set"; }
    grep -q '^STATUS: pending-install$' "$d/out" && grep -q "readyz?verbose" "$d/out" ||
      { cat "$d/out"; fail "helm install --dry-run=server with $set: no pending install, or no NOTES"; }
    kubectl apply --dry-run=server --validate=strict -f "$tmp/chart/${set//,/+}.yaml" > "$d/out" 2>&1 || { cat "$d/out"; fail "server dry-run of the chart with $set"; }
    grep -v '^Warning: version difference' "$d/out" > "$d/out2" || true
    if grep -q '^Warning' "$d/out2"; then cat "$d/out2"; fail "server dry-run of the chart with $set warned"; fi
    echo "helm install --dry-run=server: pending-install; kubectl: $(grep -c 'created (server dry run)' "$d/out2") objects"
  done
  sed -i '$d' "$tmp/broken-chart/templates/service.yaml" # parses again; containerPortt stays
  if kubectl apply --dry-run=server --validate=strict -f "$tmp/broken-chart.yaml" > "$d/out" 2>&1; then
    cat "$d/out"; fail "the API server accepted the chart with containerPortt"
  fi
  grep -q 'containerPortt' "$d/out" || { cat "$d/out"; fail "the API server's refusal of the chart does not name containerPortt"; }
  echo "the chart with containerPortt rejected by the API server: $(grep -m1 -o 'unknown field "[^"]*containerPortt"' "$d/out")"
  # A kind the cluster does not serve (no GRPCRoute CRD here).
  printf 'apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {name: plantstore}\nspec: {}\n' > "$tmp/broken-chart/templates/grpcroute.yaml"
  if helm install --dry-run=server plantstore "$tmp/broken-chart" --namespace plantstore-dev --values "$chart/ci/dev-values.yaml" > "$d/out" 2>&1; then
    cat "$d/out"; fail "helm install --dry-run=server accepted a kind the API server does not serve"
  fi
  grep -q 'no matches for kind "GRPCRoute"' "$d/out" || { cat "$d/out"; fail "helm install --dry-run=server did not name GRPCRoute"; }
  echo "a chart with a kind the cluster does not serve rejected by helm install --dry-run=server: no matches for kind \"GRPCRoute\""
  # The helm commands docs/deploy.md shows, as written, but for the
  # registry (this one, over plain HTTP) and the cluster (a dry run).
  echo "-- the helm commands of docs/deploy.md"
  mkdir -p "$d/docs"
  awk '/^```yaml$/ {f = 1; b = ""; next} /^```$/ {if (f && b ~ /^# values-prod.yaml\n/) printf "%s", b; f = 0; next} f {b = b $0 "\n"}' \
    docs/deploy.md > "$d/docs/values-prod.yaml"
  awk '/^<!-- run: by \.ci\/deploy\.sh -->$/ {m = 1; next} m && /^```sh$/ {f = 1; next} f && /^```$/ {f = 0; m = 0; next} f' \
    docs/deploy.md | sed "s#oci://ghcr.io/plantstore/charts#oci://$reg/charts#g" > "$d/docs/helm.sh"
  grep -q '^helm upgrade --install ' "$d/docs/helm.sh" && [ -s "$d/docs/values-prod.yaml" ] ||
    fail "docs/deploy.md: no helm block marked run: by .ci/deploy.sh, or no values-prod.yaml"
  (
    cd "$d/docs"
    helm() {
      case "$1" in
        install | upgrade) command helm "$@" --plain-http --dry-run=server ;;
        show | template | pull) command helm "$@" --plain-http ;;
        *) command helm "$@" ;;
      esac
    }
    set -x
    . ./helm.sh
  ) > "$d/out" 2>&1 || { cat "$d/out"; fail "the helm commands of docs/deploy.md"; }
  grep -q '^STATUS: pending-install$' "$d/out" || { cat "$d/out"; fail "docs/deploy.md: helm upgrade --install did not install"; }
  grep -q '^kind: PrometheusRule$' "$d/docs/rendered.yaml" && grep -q '^  digest: ""$' "$d/docs/defaults.yaml" ||
    fail "docs/deploy.md: helm template or helm show values gave nothing"
  echo "docs/deploy.md: helm show values, helm template and helm upgrade --install ran against oci://$reg/charts"
  # /readyz?verbose: the service's lines have the grammar of the API
  # server's own, and so does a failing check (the service draining).
  echo "-- /readyz?verbose, the service's as the API server's"
  curl -sk -H 'Authorization: Bearer admin-token' "https://127.0.0.1:$sp/readyz?verbose" > "$d/readyz-kube-apiserver"
  pa="$(free_port)" pm="$(free_port)"
  "$TEST_PLANTSTORE_BIN" serve -dev -addr "127.0.0.1:$pa" -admin-addr "127.0.0.1:$pm" -shutdown-delay 3s > "$d/plantstore.log" 2>&1 &
  ps_pid=$!
  pids+=("$ps_pid")
  for _ in $(seq 1 40); do curl -sf "http://127.0.0.1:$pm/readyz" >/dev/null && break; sleep 0.25; done
  curl -s "http://127.0.0.1:$pm/readyz?verbose" > "$d/readyz-plantstore"
  kill -TERM "$ps_pid"
  for _ in $(seq 1 40); do [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$pm/readyz")" = 503 ] && break; sleep 0.25; done
  curl -s "http://127.0.0.1:$pm/readyz?verbose" > "$d/readyz-plantstore-draining"
  wait "$ps_pid" || { cat "$d/plantstore.log"; fail "plantstore did not stop cleanly after SIGTERM"; }
  for f in kube-apiserver:passed plantstore:passed plantstore-draining:failed; do
    file="$d/readyz-${f%%:*}"
    bad="$(sed '$d' "$file" | grep -Ev '^\[[+-]\][A-Za-z0-9:._/-]+ [^ ]' || true)"
    [ -z "$bad" ] && [ "$(wc -l < "$file")" -ge 2 ] && [ "$(tail -n1 "$file")" = "readyz check ${f#*:}" ] ||
      { cat "$file"; fail "/readyz?verbose of ${f%%:*}: not [+]name ok or [-]name reason lines, then readyz check ${f#*:}"; }
  done
  grep -q '^\[-\]draining ' "$d/readyz-plantstore-draining" || { cat "$d/readyz-plantstore-draining"; fail "no [-]draining line"; }
  echo "kube-apiserver: $(sed -n 1p "$d/readyz-kube-apiserver") ... $(tail -n1 "$d/readyz-kube-apiserver") ($(wc -l < "$d/readyz-kube-apiserver") lines);" \
    "plantstore: $(tr '\n' ' ' < "$d/readyz-plantstore"); draining: $(tr '\n' ' ' < "$d/readyz-plantstore-draining")"
  kubectl apply --dry-run=server --validate=strict -f deploy/check/testdata/not-restricted.yaml > "$d/out" 2>&1 || true
  grep -q 'would violate PodSecurity "restricted' "$d/out" || { cat "$d/out"; fail "no PodSecurity warning for testdata/not-restricted.yaml"; }
  echo "deploy/check/testdata/not-restricted.yaml warned: $(grep -m1 'would violate' "$d/out" | cut -c1-100)..."
else
  step "server-side dry-run skipped (TEST_APISERVER=1 builds kube-apiserver into $cache once)"
fi

# --- the image, built and run --------------------------------------------
if [ "${TEST_IMAGE:-}" = 1 ]; then
  step "docker build and run (deploy/check/image.sh)"
  deploy/check/image.sh
else
  step "image build skipped (TEST_IMAGE=1 runs deploy/check/image.sh, about 5 min)"
fi

step "ok"
