#!/usr/bin/env bash
# Pins an overlay's release to an image by digest, and points the alerts'
# runbook links at the runbooks of the same version:
#
#   deploy/release/set-image.sh IMAGE:TAG@sha256:DIGEST [RELEASE_DIR]
#
# RELEASE_DIR is the overlay's release component, deploy/overlays/prod/release
# by default. The release pipeline runs it with the reference that
# "docker buildx build --push" (or "docker buildx imagetools inspect") prints
# for the multi-platform index, then commits the change, e.g.
#
#   deploy/release/set-image.sh ghcr.io/plantstore/plantstore:v0.2.0@sha256:…
#
# It runs "kustomize edit set image plantstore=REF" in RELEASE_DIR (kustomize
# v5 on PATH) and sets the base of RELEASE_DIR/runbooks.yaml to
# .../blob/TAG/. .ci/deploy.sh runs it on a copy of deploy/ and checks the
# rendered overlay; deploy/check/image.sh runs it with an image it built.
set -euo pipefail
fail() { printf 'set-image: %s\n' "$*" >&2; exit 2; }

[ $# -ge 1 ] && [ $# -le 2 ] || fail "usage: $0 IMAGE:TAG@sha256:DIGEST [RELEASE_DIR]"
ref="$1"
dir="${2:-$(cd "$(dirname "$0")/../overlays/prod/release" && pwd)}"
# A tag for people and the runbook links, a digest for the cluster.
[[ "$ref" =~ ^([a-z0-9][a-z0-9._:/-]*):([A-Za-z0-9_][A-Za-z0-9._-]{0,127})@sha256:[0-9a-f]{64}$ ]] ||
  fail "$ref is not IMAGE:TAG@sha256:<64 hex digits>"
tag="${BASH_REMATCH[2]}"
[ -f "$dir/kustomization.yaml" ] && [ -f "$dir/runbooks.yaml" ] || fail "$dir holds no kustomization.yaml and runbooks.yaml"
command -v kustomize >/dev/null 2>&1 || fail "kustomize is not on PATH (go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2)"

(cd "$dir" && kustomize edit set image "plantstore=$ref")
grep -q '^  base: https://.*/blob/[^/]*/$' "$dir/runbooks.yaml" || fail "$dir/runbooks.yaml: no base ending in /blob/<version>/"
sed -i -E "s#^(  base: https://.*/blob/)[^/]*/\$#\\1$tag/#" "$dir/runbooks.yaml"
echo "set-image: $dir pins $ref; runbooks at $(sed -n 's/^  base: //p' "$dir/runbooks.yaml")"
