#!/usr/bin/env bash
# `make test`: lint, then start the infrastructure if it is not running, run every test tier
# against it, and stop what this script started (only that).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=.venv/bin
started_infra=no

# An existing Kafka / MongoDB given in the environment wins: then nothing is started here.
if [[ -z "${INTERLOCK_KAFKA_BOOTSTRAP_SERVERS:-}" || -z "${INTERLOCK_MONGODB_URI:-}" ]]; then
  if ! bash infra/infra.sh status >/dev/null 2>&1; then
    started_infra=yes
  fi
  eval "$(bash infra/infra.sh up)"
fi
cleanup() {
  if [[ $started_infra == yes ]]; then bash infra/infra.sh down || true; fi
}
trap cleanup EXIT

echo "== lint"
$BIN/ruff check .
$BIN/ruff format --check .
$BIN/mypy

echo "== tests (Kafka ${INTERLOCK_KAFKA_BOOTSTRAP_SERVERS}, MongoDB ${INTERLOCK_MONGODB_URI})"
$BIN/pytest "$@"
