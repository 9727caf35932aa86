# The Interlock image: one image, four services. The service is the argument:
#   docker run IMAGE gateway|orchestrator|sandbox|notifier
# and any other `interlock` command with --entrypoint interlock (topics create, store init...).
#
# The base is an exact Python patch release on a named Debian release, so a rebuild gets the
# same interpreter. For byte-for-byte reproducible builds pin its digest as well
# (`docker buildx imagetools inspect python:3.11.16-slim-bookworm`, then
# `--build-arg PYTHON_IMAGE=python:3.11.16-slim-bookworm@sha256:...`). Both stages must use the
# same base: the virtualenv built in the first runs on the interpreter of the second.
ARG PYTHON_IMAGE=python:3.11.16-slim-bookworm

# ---------------------------------------------------------------- build: wheel + virtualenv
FROM ${PYTHON_IMAGE} AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src
# Only what the wheel is built from (.dockerignore lets nothing else in).
COPY pyproject.toml README.md constraints.txt ./
COPY shared/ shared/
COPY services/ services/
COPY interlock/ interlock/
COPY agents/ agents/

# Every dependency ships binary wheels for CPython 3.11 on manylinux, so no compiler is needed
# here either; installing the wheel (not the source tree) keeps tests and tooling out. The
# versions are those of constraints.txt, the ones the test suite ran with.
# (pip stays in the virtualenv: an image that adds your agents installs them with it.)
RUN python -m venv /opt/interlock \
 && python -m pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/interlock/bin/pip install --only-binary=:all: -c constraints.txt /wheels/interlock-*.whl

# ---------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE} AS runtime

# A fixed, unprivileged UID/GID that Kubernetes manifests can name (runAsUser: 10001).
RUN groupadd --system --gid 10001 interlock \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin interlock

COPY --from=build /opt/interlock /opt/interlock

# Bytecode was compiled at install time; nothing is written beside the code, so the root
# filesystem can be mounted read-only (writable: /tmp, where HOME points for libraries' caches).
# In a container the service ports must listen on every interface; the image defaults to
# production, which refuses the development key.
ENV PATH=/opt/interlock/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    INTERLOCK_ENVIRONMENT=production \
    INTERLOCK_HOST=0.0.0.0 \
    INTERLOCK_PORT=8000 \
    INTERLOCK_HEALTH_HOST=0.0.0.0 \
    INTERLOCK_HEALTH_PORT=8081

USER 10001:10001
WORKDIR /tmp

# 8000: the gateway's API (and its /healthz, /readyz); 8081: every service's /healthz, /readyz
# and /metrics (the gateway's /metrics only there).
EXPOSE 8000 8081

# No HEALTHCHECK: the port to probe depends on the service, so compose (healthcheck) and
# Kubernetes (probes) declare their own.
ENTRYPOINT ["interlock", "service"]
CMD ["gateway"]
