#!/usr/bin/env bash
# The tools the deploy tests need, installed once into .infra/bin (git-ignored). Idempotent:
# prints the path of each tool and does nothing more when it is there already.
#
#   bash deploy/tools.sh              install kustomize if missing, print its path
#
# kustomize is built from its Go module (Go must be on the PATH; the module proxy serves it), so
# no prebuilt binary is downloaded.
set -euo pipefail

KUSTOMIZE_MODULE="sigs.k8s.io/kustomize/kustomize/v5"
KUSTOMIZE_VERSION="v5.8.1"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$REPO/.infra/bin"
KUSTOMIZE="$BIN/kustomize-$KUSTOMIZE_VERSION"

log() { printf 'tools: %s\n' "$*" >&2; }
die() { printf 'tools: ERROR: %s\n' "$*" >&2; exit 1; }

if [[ ! -x $KUSTOMIZE ]]; then
  command -v go >/dev/null 2>&1 || die "Go is needed to build kustomize ($KUSTOMIZE_MODULE)"
  mkdir -p "$BIN"
  # Build into a private folder, then move into place: two runs at once cannot leave a
  # half-written binary behind.
  staging="$(mktemp -d "$BIN/.kustomize.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  log "building kustomize $KUSTOMIZE_VERSION (once; about a minute)"
  GOBIN="$staging" GOWORK=off GOFLAGS=-mod=mod GOPROXY="${GOPROXY:-https://proxy.golang.org}" \
    CGO_ENABLED=0 go install "$KUSTOMIZE_MODULE@$KUSTOMIZE_VERSION" >&2
  mv -f "$staging/kustomize" "$KUSTOMIZE"
fi
echo "$KUSTOMIZE"
