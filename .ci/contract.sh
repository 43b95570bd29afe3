#!/usr/bin/env bash
# Black-box contract checks against the built plantstore binary: the served
# /openapi.json validated against real responses (libopenapi-validator) and
# linted (redocly), a client generated from it (openapi-typescript +
# openapi-fetch) calling the service, promtool on /metrics, and a real
# Prometheus scraping the service. Installs what is missing (Debian's
# prometheus package, the pinned npm tools of .ci/client), builds the
# binary, runs the tests in .ci/contract (a module of its own), cleans up.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

step() { printf '\n== contract: %s\n' "$*"; }
fail() { printf 'contract: %s\n' "$*" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
# A missing tool fails the tests instead of skipping them.
export TEST_REQUIRE_TOOLS=1
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
export NPM_CONFIG_AUDIT=false NPM_CONFIG_FUND=false NPM_CONFIG_UPDATE_NOTIFIER=false

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

step "tools"
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
prometheus --version 2>&1 | head -1
command -v node >/dev/null 2>&1 || fail "node is not installed (Node 20 or later is needed for .ci/client)"
command -v npm >/dev/null 2>&1 || fail "npm is not installed"
echo "node $(node --version), npm $(npm --version 2>/dev/null)"
# npm ci installs exactly package-lock.json; skip it when that is what
# node_modules already holds.
lock=.ci/client/package-lock.json installed=.ci/client/node_modules/.package-lock.json
if [ ! -f "$installed" ] || ! node -e '
  const fs = require("fs");
  const want = JSON.parse(fs.readFileSync(process.argv[1])).packages;
  const have = JSON.parse(fs.readFileSync(process.argv[2])).packages;
  for (const [k, v] of Object.entries(want)) {
    if (k !== "" && (!have[k] || have[k].version !== v.version)) process.exit(1);
  }' "$lock" "$installed"; then
  npm ci --prefix .ci/client --no-audit --no-fund --loglevel=error
fi

step "build"
# The released binary's build (its tags, stripped), stamped with the commit
# for plantstore_build_info and "plantstore version".
.ci/build "$tmp/plantstore"
export TEST_PLANTSTORE_BIN="$tmp/plantstore"

step "go vet (.ci/contract)"
(cd .ci/contract && go vet ./...)

step "go test (.ci/contract)"
(cd .ci/contract && go test -count=1 -timeout 10m ./...)
