#!/usr/bin/env bash
# `make bench` / `make bench-full`: run the harness against the Kafka and MongoDB the settings
# name, else the local ones from infra/infra.sh (started here and stopped again only if they
# were not running before).
set -euo pipefail
cd "$(dirname "$0")/.."

started_infra=no
if [[ -z "${INTERLOCK_KAFKA_BOOTSTRAP_SERVERS:-}" || -z "${INTERLOCK_MONGODB_URI:-}" ]]; then
  if ! bash infra/infra.sh status >/dev/null 2>&1; then
    started_infra=yes
  fi
  # An assignment keeps the exit status (eval of a failed substitution would not).
  infra_env=$(bash infra/infra.sh up)
  eval "$infra_env"
fi
cleanup() {
  if [[ $started_infra == yes ]]; then bash infra/infra.sh down || true; fi
}
trap cleanup EXIT

.venv/bin/python -m bench "$@"
