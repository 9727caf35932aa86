#!/usr/bin/env bash
# `make test`: lint, then run every test tier against Kafka and MongoDB: the ones the settings
# name, else testcontainers, else a local broker and FerretDB that it starts and stops again.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=.venv/bin
started_infra=no

# The deploy tests render the manifests with kustomize, built from its Go module on a fresh
# machine (a minute or more). Built here, alongside the infrastructure and lint, not inside the
# first deploy test: there it ran under the test timeout, on cores the other workers were using.
mkdir -p .infra/logs
bash deploy/tools.sh >.infra/logs/tools.log 2>&1 &
tools_pid=$!

# An existing Kafka / MongoDB given in the environment wins: then nothing is started here.
# Otherwise, where a Docker engine answers, the fixtures start testcontainers themselves; where
# none does (this team's machines and CI), infra/infra.sh starts a local broker and FerretDB.
if [[ -n "${INTERLOCK_KAFKA_BOOTSTRAP_SERVERS:-}" && -n "${INTERLOCK_MONGODB_URI:-}" ]]; then
  echo "== using the given Kafka and MongoDB"
elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 \
    && [[ "${INTERLOCK_TEST_INFRA:-auto}" != local ]]; then
  echo "== a Docker engine answers: the tests start Kafka and MongoDB with testcontainers"
  unset INTERLOCK_KAFKA_BOOTSTRAP_SERVERS INTERLOCK_MONGODB_URI
else
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

echo "== lint"
$BIN/ruff check .
$BIN/ruff format --check .
$BIN/mypy
# The import contracts of pyproject.toml's [tool.importlinter]; no cache file in the work tree.
$BIN/lint-imports --no-cache

# The review page's tests drive headless Chromium (tests/e2e/test_review_page.py) and fail, not
# skip, without it: install Debian's browser and driver where they are missing.
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
  echo "== installing chromium and chromium-driver for the review page's browser tests"
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends chromium chromium-driver
fi

if ! wait "$tools_pid"; then
  cat .infra/logs/tools.log
  echo "deploy/tools.sh failed: the deploy tests cannot render the manifests" >&2
  exit 1
fi

echo "== tests (Kafka ${INTERLOCK_KAFKA_BOOTSTRAP_SERVERS:-testcontainers}, MongoDB ${INTERLOCK_MONGODB_URI:-testcontainers})"
# The test files run on several workers at once (pytest-xdist), each file whole on one worker,
# in the order collected: tests/conftest.py puts the longest first (xdist's own order, by number
# of tests, left the one-test benchmark smoke run for last, alone). The suite waits on
# processes, brokers and browsers far more than it computes, so three workers on CI's two cores
# take half the time of one. INTERLOCK_TEST_WORKERS=0 runs it in this process alone. The slowest
# tests are listed for the suite-time budget (CI has 90 minutes; the aim is well under 20).
$BIN/pytest -n "${INTERLOCK_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder \
  --durations=40 "$@"
