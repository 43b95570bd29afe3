#!/usr/bin/env bash
# Builds kube-apiserver v1.36.3 from the Go module proxy (no release
# downloads reach this network) into a cache directory, once:
#   deploy/check/kube-apiserver.sh [CACHE_DIR]   -> prints the binary's path
# The k8s.io/kubernetes module points its staging modules at ./staging; a
# wrapper module replaces each with its published v0.36.3.
set -euo pipefail
k8s=1.36.3
cache="${1:-${TEST_CI_CACHE:-/var/cache/plantstore-ci}}"
bin="$cache/kube-apiserver-v$k8s"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$cache"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
dir="$(go mod download -json "k8s.io/kubernetes@v$k8s" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
{
  printf 'module local/kas\n\ngo 1.26.0\n\ngodebug default=go1.26\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$k8s"
  grep '=> ./staging' "$dir/go.mod" | awk -v v="v0.${k8s#1.}" '{print "\t" $1 " => " $1 " " v}'
  printf ')\n'
} > "$work/go.mod"
printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' > "$work/tools.go"
(cd "$work" && GOFLAGS=-mod=mod go mod tidy >&2 &&
  go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$k8s")" \
    -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2)
mv "$bin.tmp" "$bin"
echo "$bin"
