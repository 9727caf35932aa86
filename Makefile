# One task runner for people and CI. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
INFRA := bash infra/infra.sh
# A well-known owner key of project "demo", for `make dev` / `make up` only: the gateway refuses
# it in any environment but development.
DEV_KEY := ilk_00000000000000de_development-key-not-for-production-use-000
# A Kafka and a MongoDB given in the environment win over the local ones: then the targets start
# and stop no infrastructure and the services use those two.
GIVEN_INFRA := $(and $(INTERLOCK_KAFKA_BOOTSTRAP_SERVERS),$(INTERLOCK_MONGODB_URI))
USE_INFRA := $(if $(GIVEN_INFRA),true,source .infra/env)

.PHONY: help venv lock infra-up infra-down topics up up-fg down dev test test-unit lint format asyncapi store-roles clean bench bench-full chaos

help: ## List the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP) ## Create .venv and install Interlock with its dev tools (versions from constraints.txt)

lock: ## Resolve the dependencies afresh and write their exact versions to constraints.txt
	@bash scripts/lock.sh

infra-up: ## Start Kafka (KRaft), PostgreSQL and FerretDB on loopback; prints the settings
	@$(if $(GIVEN_INFRA),echo "using the Kafka and MongoDB given in INTERLOCK_*",$(INFRA) up)

infra-down: ## Stop all three (data and caches kept; `bash infra/infra.sh purge` wipes the data)
	@$(if $(GIVEN_INFRA),true,$(INFRA) down)

topics: venv infra-up ## Create Interlock's topics on the local broker
	@$(USE_INFRA) && $(BIN)/interlock topics create

up: topics ## Start the four services in the background against the local infrastructure
	@mkdir -p .infra/logs/services
	@if [ -f .infra/services.pid ] && kill -0 $$(cat .infra/services.pid) 2>/dev/null; then \
	  echo "services already running (pid $$(cat .infra/services.pid))"; \
	else \
	  ( $(USE_INFRA) && INTERLOCK_DEV_API_KEY=$(DEV_KEY) exec nohup $(BIN)/interlock up --log-dir .infra/logs/services > .infra/logs/services/up.log 2>&1 ) & \
	  echo $$! > .infra/services.pid; \
	  for i in $$(seq 1 120); do grep -q "Interlock is running" .infra/logs/services/up.log 2>/dev/null && break; \
	    kill -0 $$(cat .infra/services.pid) 2>/dev/null || { cat .infra/logs/services/up.log; rm -f .infra/services.pid; exit 1; }; sleep 0.5; done; \
	  cat .infra/logs/services/up.log; \
	fi

down: ## Stop the services started by `make up` (waits until their port is free), then the infrastructure
	@if [ -f .infra/services.pid ]; then pid=$$(cat .infra/services.pid); \
	  kill $$pid 2>/dev/null || true; \
	  for i in $$(seq 1 150); do kill -0 $$pid 2>/dev/null || break; sleep 0.2; done; \
	  if kill -0 $$pid 2>/dev/null; then echo "interlock up (pid $$pid) did not stop in 30 s; killing it"; \
	    pkill -KILL -P $$pid; kill -KILL $$pid; fi; \
	  rm -f .infra/services.pid; fi
	@port=$${INTERLOCK_PORT:-8000}; for i in $$(seq 1 150); do \
	  (exec 3<>/dev/tcp/127.0.0.1/$$port) 2>/dev/null || exit 0; sleep 0.2; done; \
	  echo "port $$port is still taken after 30 s"; exit 1
	@$(MAKE) --no-print-directory infra-down

dev: venv ## Run Interlock in one process (SQLite, in-process bus; nothing else needed) and print how to try it
	@$(BIN)/interlock dev

up-fg: topics ## The four services as separate processes in the foreground, on the local Kafka and FerretDB
	@$(USE_INFRA) && INTERLOCK_DEV_API_KEY=$(DEV_KEY) $(BIN)/interlock up

test: venv ## Install, start the infrastructure, run the whole suite, stop what it started
	@bash scripts/test.sh

test-unit: venv ## Unit and contract tests against the in-memory fakes only (no infrastructure)
	$(BIN)/pytest tests/unit tests/contract -m "not integration and not e2e"

lint: venv ## ruff (lint + format check), mypy --strict and the import contracts (lint-imports)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

format: venv ## Apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: venv ## Benchmarks, quick mode (~12 min): JSON in bench/results/quick/, regenerates docs/benchmarks.md
	@bash bench/bench.sh --quick

bench-full: venv ## Benchmarks at the issue's sizes (hours on 2 cores): bench/results/full/, docs/benchmarks.md
	@bash bench/bench.sh --full

chaos: venv infra-up ## Every chaos scenario (faults, poison, races, broker/db outages, soak; ~40 min): table + .artifacts/chaos.json
	@source .infra/env && $(BIN)/python -m tests.chaos $(CHAOS_ARGS)

asyncapi: venv ## Regenerate docs/asyncapi.yaml from the event models (a test checks it is current)
	$(BIN)/python -m scripts.asyncapi

store-roles: venv ## Regenerate the MongoDB roles (deploy/k8s/base/mongodb/service-roles.json) from shared/store/access.py
	$(BIN)/python -m scripts.store_roles

clean: ## Remove the virtualenv and caches (not .infra)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
