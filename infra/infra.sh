#!/usr/bin/env bash
# Local infrastructure for Interlock: a single-node Apache Kafka broker (KRaft)
# and FerretDB (MongoDB wire protocol) on PostgreSQL (or SQLite) on 127.0.0.1, no Docker.
#
#   bash infra/infra.sh up            provision if needed, start them, print env
#   bash infra/infra.sh down          stop them (data, jars and binaries kept)
#   bash infra/infra.sh down --purge  stop them and delete their data
#   bash infra/infra.sh purge         same as down --purge
#   bash infra/infra.sh status        say what runs (exit 0 only if all needed run)
#   bash infra/infra.sh env           print the settings (shell exports)
#
# Progress goes to stderr and the exports to stdout, so
#   eval "$(bash infra/infra.sh up)"
# starts everything and sets INTERLOCK_KAFKA_BOOTSTRAP_SERVERS and
# INTERLOCK_MONGODB_URI (and INTERLOCK_POSTGRES_URI, the PostgreSQL server, when it
# runs) in the calling shell. Everything at run time lives in
# $REPO/.infra/ (see infra/README.md).
set -euo pipefail

log() { printf 'infra: %s\n' "$*" >&2; }
die() { printf 'infra: ERROR: %s\n' "$*" >&2; exit 1; }

check_port_number() {
  if ! [[ "$2" =~ ^[0-9]+$ ]] || ((10#$2 < 1 || 10#$2 > 65535)); then
    die "$1 must be a TCP port number, got '$2'"
  fi
}

# ---------------------------------------------------------------- settings
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/.." && pwd)"
INFRA="$REPO/.infra"

KAFKA_VERSION="4.1.1"
FERRETDB_MODULE="github.com/FerretDB/FerretDB"
FERRETDB_VERSION="v1.24.2"
POSTGRES_VERSION="15"  # Debian 12's; the newest installed major is used if it is missing

# FerretDB's storage: postgresql (default) or sqlite (kept for comparison).
BACKEND="${INTERLOCK_INFRA_FERRETDB_BACKEND:-postgresql}"
[[ "$BACKEND" == postgresql || "$BACKEND" == sqlite ]] \
  || die "INTERLOCK_INFRA_FERRETDB_BACKEND must be postgresql or sqlite, got '$BACKEND'"
# Whether the patches in infra/ferretdb/ are applied to FerretDB's source (see infra/README.md).
PATCHES="${INTERLOCK_INFRA_FERRETDB_PATCHES:-on}"
[[ "$PATCHES" == on || "$PATCHES" == off ]] \
  || die "INTERLOCK_INFRA_FERRETDB_PATCHES must be on or off, got '$PATCHES'"

KAFKA_PORT="${INTERLOCK_INFRA_KAFKA_PORT:-19092}"
check_port_number INTERLOCK_INFRA_KAFKA_PORT "$KAFKA_PORT"
KAFKA_PORT=$((10#$KAFKA_PORT))
CTRL_PORT="${INTERLOCK_INFRA_KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}"
check_port_number INTERLOCK_INFRA_KAFKA_CONTROLLER_PORT "$CTRL_PORT"
CTRL_PORT=$((10#$CTRL_PORT))
SASL_PORT="${INTERLOCK_INFRA_KAFKA_SASL_PORT:-$((KAFKA_PORT + 2))}"
check_port_number INTERLOCK_INFRA_KAFKA_SASL_PORT "$SASL_PORT"
SASL_PORT=$((10#$SASL_PORT))
# A second listener with SASL (PLAIN and SCRAM-SHA-512), so the tests prove that the clients
# authenticate (loopback only; these credentials exist nowhere else). The broker authorizes with
# ACLs: this user and the PLAINTEXT listener's anonymous clients are super users, so every other
# test runs as before, while a SCRAM user the tests create has only the ACLs they grant it (the
# production overlay's, tests/e2e/test_kafka_acls.py).
SASL_USER="interlock"
SASL_PASSWORD="interlock-test-secret"
MONGO_PORT="${INTERLOCK_INFRA_MONGO_PORT:-27117}"
check_port_number INTERLOCK_INFRA_MONGO_PORT "$MONGO_PORT"
MONGO_PORT=$((10#$MONGO_PORT))
PG_PORT="${INTERLOCK_INFRA_POSTGRES_PORT:-25432}"
check_port_number INTERLOCK_INFRA_POSTGRES_PORT "$PG_PORT"
PG_PORT=$((10#$PG_PORT))
KAFKA_TIMEOUT="${INTERLOCK_INFRA_KAFKA_TIMEOUT:-90}"
MONGO_TIMEOUT="${INTERLOCK_INFRA_MONGO_TIMEOUT:-60}"
PG_TIMEOUT="${INTERLOCK_INFRA_POSTGRES_TIMEOUT:-60}"
[[ "$KAFKA_TIMEOUT" =~ ^[0-9]+$ && "$MONGO_TIMEOUT" =~ ^[0-9]+$ && "$PG_TIMEOUT" =~ ^[0-9]+$ ]] \
  || die "INTERLOCK_INFRA_KAFKA_TIMEOUT, INTERLOCK_INFRA_MONGO_TIMEOUT and INTERLOCK_INFRA_POSTGRES_TIMEOUT must be whole seconds"
STOP_TIMEOUT=20
HOST=127.0.0.1

KAFKA_DIR="$INFRA/kafka"
KAFKA_LIBS="$KAFKA_DIR/libs"
KAFKA_LIBS_MARKER="$KAFKA_LIBS/.complete"
KAFKA_DATA="$KAFKA_DIR/data"
KAFKA_CONF="$KAFKA_DIR/server.properties"
KAFKA_POM="$SCRIPT_DIR/kafka/pom.xml"
KAFKA_LOG4J="$SCRIPT_DIR/kafka/log4j2.properties"

FERRETDB_BIN="$INFRA/bin/ferretdb"
FERRETDB_BUILD_MARKER="$INFRA/bin/ferretdb.build"
FERRETDB_PATCH_DIR="$SCRIPT_DIR/ferretdb"
FERRETDB_DATA="$INFRA/ferretdb/data"
FERRETDB_STATE="$INFRA/ferretdb/state"

# PostgreSQL: a cluster of our own under .infra/, on loopback only, trust authentication.
# initdb and postgres refuse to run as root: as root they run as a dedicated system user.
PG_DIR="$INFRA/postgres"
PG_DATA="$PG_DIR/data"
PG_OS_USER="interlock-pg"
PG_ROLE="interlock"  # the cluster's superuser, whom FerretDB connects as
PG_DB="ferretdb"

LOGS="$INFRA/logs"
ENV_FILE="$INFRA/env"

# ---------------------------------------------------------------- helpers

# True if something accepts TCP connections on 127.0.0.1:$1.
port_open() { timeout 2 bash -c ": </dev/tcp/$HOST/$1" 2>/dev/null; }

# True if process $1 exists and is not a zombie (a child of ours that died
# stays a zombie until reaped, and kill -0 still succeeds on it).
proc_alive() {
  local line state
  [[ "$1" =~ ^[0-9]+$ ]] || return 1
  { read -r line </proc/"$1"/stat; } 2>/dev/null || return 1
  state="${line##*) }"
  [[ "${state%% *}" != Z ]]
}

# The string that identifies our process of a service in /proc/PID/cmdline
# (unique to this checkout, so another clone's services are never touched).
marker() {
  case "$1" in
    kafka) printf '%s' "$KAFKA_CONF" ;;
    # not the binary's path: other FerretDBs (the chaos suite's, a second one for a benchmark)
    # run the same binary
    ferretdb) printf '%s' "--state-dir=$FERRETDB_STATE" ;;
    postgres) printf '%s' "$PG_DATA" ;;
  esac
}

# True if PID $2 is alive and is our process of service $1: one of its
# arguments is exactly the marker (a zombie has no arguments).
is_ours() {
  local pid="$2" want arg args=()
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  { mapfile -d '' -t args <"/proc/$pid/cmdline"; } 2>/dev/null || return 1
  want="$(marker "$1")"
  for arg in "${args[@]}"; do
    [[ "$arg" == "$want" ]] && return 0
  done
  return 1
}

# Prints the PID of our running service $1 (from its pid file, else by looking
# through /proc in case the pid file was lost); fails if it does not run.
# A stale pid file is removed.
service_pid() {
  local svc="$1" pidfile="$INFRA/$1.pid" pid
  if [[ -f "$pidfile" ]]; then
    pid="$(cat "$pidfile" 2>/dev/null || true)"
    if is_ours "$svc" "$pid"; then
      printf '%s\n' "$pid"
      return 0
    fi
    rm -f "$pidfile"
  fi
  # PostgreSQL records its postmaster in the cluster (its children share the executable).
  if [[ "$svc" == postgres ]]; then
    pid="$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)"
    if is_ours postgres "$pid" && [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */bin/postgres ]]; then
      mkdir -p "$INFRA"
      printf '%s\n' "$pid" >"$pidfile"
      printf '%s\n' "$pid"
      return 0
    fi
    return 1
  fi
  local cand
  while IFS= read -r cand; do
    pid="${cand#/proc/}"
    pid="${pid%/cmdline}"
    [[ "$pid" == "$$" ]] && continue
    is_ours "$svc" "$pid" || continue
    # only the service itself, not e.g. a shell whose command line names it
    case "$svc" in
      kafka) grep -qaF 'kafka.Kafka' "/proc/$pid/cmdline" 2>/dev/null || continue ;;
      ferretdb) [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$FERRETDB_BIN" ]] || continue ;;
    esac
    mkdir -p "$INFRA"
    printf '%s\n' "$pid" >"$pidfile"
    printf '%s\n' "$pid"
    return 0
  done < <(grep -laF -- "$(marker "$svc")" /proc/[0-9]*/cmdline 2>/dev/null || true)
  return 1
}

# The ports a running service was started with (written at start).
recorded_port() { cat "$INFRA/$1.port" 2>/dev/null || true; }

tail_logs() {
  local f
  for f in "$@"; do
    [[ -s "$f" ]] || continue
    printf -- '----- last lines of %s -----\n' "$f" >&2
    tail -n 40 "$f" >&2
  done
}

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed (needed to $2)"; }

# ------------------------------------------------------------ provisioning
provision_kafka() {
  local want
  want="kafka=$KAFKA_VERSION pom=$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)"
  if [[ -f "$KAFKA_LIBS_MARKER" && "$(cat "$KAFKA_LIBS_MARKER")" == "$want" ]]; then
    return 0
  fi
  need mvn "fetch the Kafka jars from Maven Central"
  log "fetching Kafka $KAFKA_VERSION jars with Maven into $KAFKA_LIBS (first time only) ..."
  rm -rf "$KAFKA_LIBS"
  mkdir -p "$KAFKA_LIBS" "$LOGS"
  if ! mvn -q -B -Dstyle.color=never dependency:copy-dependencies \
      -DoutputDirectory="$KAFKA_LIBS" -f "$KAFKA_POM" >"$LOGS/mvn.log" 2>&1; then
    tail_logs "$LOGS/mvn.log"
    die "maven could not fetch the Kafka jars (full log: $LOGS/mvn.log)"
  fi
  [[ -f "$KAFKA_LIBS/kafka_2.13-$KAFKA_VERSION.jar" ]] || die "kafka_2.13-$KAFKA_VERSION.jar missing after the fetch"
  printf '%s\n' "$want" >"$KAFKA_LIBS_MARKER"
  local jars=("$KAFKA_LIBS"/*.jar)
  log "fetched ${#jars[@]} jars"
}

# What the FerretDB build must be: its version and the patches applied (their sha256, so a
# changed, added or removed patch rebuilds it), written next to the binary after a build.
ferretdb_patches() {
  [[ "$PATCHES" == on ]] || return 0
  local f
  for f in "$FERRETDB_PATCH_DIR"/*.patch; do
    [[ -f "$f" ]] && printf '%s\n' "$f"
  done
  return 0
}

ferretdb_build_id() {
  local f out="version=$FERRETDB_VERSION patches="
  local -a files
  mapfile -t files < <(ferretdb_patches)
  if ((${#files[@]} == 0)); then
    printf '%snone\n' "$out"
    return 0
  fi
  for f in "${files[@]}"; do
    out+="$(basename "$f"):$(sha256sum "$f" | cut -d' ' -f1),"
  done
  printf '%s\n' "${out%,}"
}

# True if the FerretDB binary is there, is the wanted version and has the wanted patches.
# (No `| grep -q`: with pipefail, grep quitting early can fail the pipeline.)
ferretdb_ok() {
  local out
  [[ -x "$FERRETDB_BIN" ]] || return 1
  out="$("$FERRETDB_BIN" --version 2>/dev/null)" || return 1
  [[ $'\n'"$out"$'\n' == *$'\n'"version: $FERRETDB_VERSION"$'\n'* ]] || return 1
  [[ -f "$FERRETDB_BUILD_MARKER" && "$(cat "$FERRETDB_BUILD_MARKER")" == "$(ferretdb_build_id)" ]]
}

# Applies patch file $2 to the source tree $1 (patch(1), else git apply outside any repository).
apply_patch() {
  if command -v patch >/dev/null 2>&1; then
    patch -p1 --batch --forward --no-backup-if-mismatch -d "$1" -i "$2"
  else
    (cd "$1" && GIT_CEILING_DIRECTORIES="$(dirname "$1")" git apply -p1 --verbose "$2")
  fi
}

# `go install github.com/FerretDB/FerretDB/cmd/ferretdb@VERSION` builds a binary
# that panics at start ("Invalid build/version/version.txt"): the release's
# version.txt is generated and not in the module zip. So: download the module
# through the Go module proxy, copy it, write version.txt, apply infra/ferretdb/*.patch,
# build the copy.
provision_ferretdb() {
  if ferretdb_ok; then
    return 0
  fi
  need go "build FerretDB"
  command -v patch >/dev/null 2>&1 || command -v git >/dev/null 2>&1 \
    || [[ "$PATCHES" == off ]] || die "'patch' (or git) is not installed (needed to patch FerretDB)"
  local build="$INFRA/build" src rc want pkg="interlock-infra" f
  local -a patches
  want="$(ferretdb_build_id)"
  mapfile -t patches < <(ferretdb_patches)
  for f in "${patches[@]}"; do pkg+="+$(basename "$f" .patch)"; done
  log "building FerretDB $FERRETDB_VERSION into $FERRETDB_BIN (${#patches[@]} patch(es); first time only, 1-3 min) ..."
  rm -rf "$build"
  mkdir -p "$build" "$INFRA/bin" "$LOGS"
  src="$build/ferretdb-src"
  set +e
  (
    set -e
    modjson="$(cd "$build" && GOWORK=off GO111MODULE=on GOFLAGS=-mod=mod \
      go mod download -json "$FERRETDB_MODULE@$FERRETDB_VERSION")"
    moddir="$(printf '%s\n' "$modjson" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -n "$moddir" && -d "$moddir" ]] || { echo "no module dir in: $modjson"; exit 1; }
    cp -R "$moddir" "$src"
    chmod -R u+w "$src"
    for f in "${patches[@]}"; do
      echo "applying $f"
      apply_patch "$src" "$f"
    done
    printf '%s\n' "$FERRETDB_VERSION" >"$src/build/version/version.txt"
    # `ferretdb --version` says which patches the build has ("package: interlock-infra+0001-...").
    printf '%s\n' "$pkg" >"$src/build/version/package.txt"
    cd "$src"
    GOWORK=off GOFLAGS='' CGO_ENABLED=0 go build -buildvcs=false -trimpath \
      -ldflags='-s -w' -o "$FERRETDB_BIN.tmp" ./cmd/ferretdb
  ) >"$LOGS/go-build.log" 2>&1
  rc=$?
  set -e
  rm -rf "$build"
  if ((rc != 0)) || [[ ! -x "$FERRETDB_BIN.tmp" ]]; then
    rm -f "$FERRETDB_BIN.tmp"
    tail_logs "$LOGS/go-build.log"
    die "could not build FerretDB (full log: $LOGS/go-build.log)"
  fi
  mv -f "$FERRETDB_BIN.tmp" "$FERRETDB_BIN"
  printf '%s\n' "$want" >"$FERRETDB_BUILD_MARKER"
  ferretdb_ok || die "the FerretDB build does not report version $FERRETDB_VERSION"
}

as_root() { if ((EUID == 0)); then "$@"; else sudo "$@"; fi; }

# The directory of the PostgreSQL server binaries (Debian: /usr/lib/postgresql/<major>/bin).
pg_bin_dir() {
  local d
  if [[ -x "/usr/lib/postgresql/$POSTGRES_VERSION/bin/postgres" ]]; then
    printf '%s\n' "/usr/lib/postgresql/$POSTGRES_VERSION/bin"
    return 0
  fi
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  [[ -n "$d" && -x "$d/postgres" && -x "$d/initdb" ]] || return 1
  printf '%s\n' "$d"
}

# Debian's PostgreSQL server, installed with apt where it is missing (root directly, else sudo).
# Sets PG_BIN, and PG_AS (the command prefix that runs a program as the cluster's owner).
provision_postgres() {
  if ! PG_BIN="$(pg_bin_dir)"; then
    command -v apt-get >/dev/null 2>&1 \
      || die "PostgreSQL server binaries not found under /usr/lib/postgresql and no apt-get: install PostgreSQL $POSTGRES_VERSION"
    log "installing Debian's PostgreSQL server (apt-get install postgresql; first time only) ..."
    mkdir -p "$LOGS"
    if ! { as_root apt-get update && as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends postgresql; } >"$LOGS/apt-postgresql.log" 2>&1; then
      tail_logs "$LOGS/apt-postgresql.log"
      die "could not install postgresql with apt-get (full log: $LOGS/apt-postgresql.log)"
    fi
    PG_BIN="$(pg_bin_dir)" || die "postgresql is installed but no server binaries are under /usr/lib/postgresql"
  fi
  # A clean environment: PG* variables of the caller must not reach the server or the clients.
  local -a clean_env=(env -i PATH=/usr/bin:/bin LC_ALL=C)
  if ((EUID == 0)); then
    if ! id -u "$PG_OS_USER" >/dev/null 2>&1; then
      log "creating the system user $PG_OS_USER to run PostgreSQL (it refuses to run as root)"
      useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin "$PG_OS_USER" || die "could not create the user $PG_OS_USER"
    fi
    need setpriv "run PostgreSQL as $PG_OS_USER"
    PG_AS=(setpriv "--reuid=$(id -u "$PG_OS_USER")" "--regid=$(id -g "$PG_OS_USER")" --clear-groups -- "${clean_env[@]}")
  else
    PG_AS=("${clean_env[@]}")
  fi
  PG_CLIENT=("${clean_env[@]}" PGCONNECT_TIMEOUT=5 PGAPPNAME=infra.sh)
}

# Creates the cluster on first use (initdb), and makes sure its owner can reach it.
init_postgres() {
  local owner
  mkdir -p "$PG_DIR" "$LOGS"
  if ((EUID == 0)); then
    owner="$(id -u "$PG_OS_USER")"
    [[ "$(stat -c %u "$PG_DIR")" == "$owner" ]] || chown "$PG_OS_USER:" "$PG_DIR"
    if [[ -d "$PG_DATA" && "$(stat -c %u "$PG_DATA")" != "$owner" ]]; then
      log "handing $PG_DATA over to $PG_OS_USER"
      chown -R "$PG_OS_USER:" "$PG_DATA"
    fi
    "${PG_AS[@]}" test -w "$PG_DIR" -a -x "$PG_DIR" \
      || die "the user $PG_OS_USER cannot reach $PG_DIR (a parent directory is not searchable by others; e.g. chmod o+x on it, or clone the repository elsewhere)"
  fi
  chmod 700 "$PG_DIR"
  if [[ -f "$PG_DATA/PG_VERSION" ]]; then
    local have want
    have="$(cat "$PG_DATA/PG_VERSION")"
    want="$("$PG_BIN/postgres" --version | sed -n 's/.* \([0-9][0-9]*\)\..*/\1/p')"
    [[ "$have" == "$want" ]] \
      || die "the cluster in $PG_DATA is PostgreSQL $have but the server is $want: run 'bash infra/infra.sh purge' (deletes the data)"
    return 0
  fi
  rm -rf "$PG_DATA"
  log "creating the PostgreSQL cluster in $PG_DATA (first time only)"
  if ! "${PG_AS[@]}" "$PG_BIN/initdb" -D "$PG_DATA" -U "$PG_ROLE" --auth=trust \
      --no-locale -E UTF8 --no-instructions >"$LOGS/initdb.log" 2>&1; then
    tail_logs "$LOGS/initdb.log"
    die "initdb failed (full log: $LOGS/initdb.log)"
  fi
}

# ----------------------------------------------------------------- kafka
write_kafka_conf() {
  mkdir -p "$KAFKA_DIR" "$KAFKA_DATA"
  cat >"$KAFKA_CONF.tmp" <<EOF
# Generated by infra/infra.sh at each start; edits are lost.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CTRL_PORT
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$CTRL_PORT,SASL_PLAINTEXT://$HOST:$SASL_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT,SASL_PLAINTEXT://$HOST:$SASL_PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER="$SASL_PASSWORD";
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:$SASL_USER
allow.everyone.if.no.acl.found=false
log.dirs=$KAFKA_DATA
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
EOF
  mv -f "$KAFKA_CONF.tmp" "$KAFKA_CONF"
}

start_kafka() {
  need java "run the Kafka broker"
  write_kafka_conf
  mkdir -p "$LOGS"
  if [[ ! -f "$KAFKA_DATA/meta.properties" ]]; then
    local cid
    cid="$(java -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool random-uuid 2>>"$LOGS/kafka-format.log" | tail -n 1)"
    [[ -n "$cid" ]] || { tail_logs "$LOGS/kafka-format.log"; die "could not make a Kafka cluster id"; }
    log "formatting Kafka storage in $KAFKA_DATA (cluster id $cid)"
    # Static quorum (controller.quorum.voters), so no --standalone: it would
    # require controller.quorum.bootstrap.servers and pin the controller port
    # into the metadata log.
    if ! java -cp "$KAFKA_LIBS/*" -Dlog4j2.configurationFile="$KAFKA_LOG4J" -Dkafka.logs.dir="$LOGS" -Dkafka.log.name=kafka-format \
        kafka.tools.StorageTool format -t "$cid" -c "$KAFKA_CONF" >>"$LOGS/kafka-format.log" 2>&1; then
      tail_logs "$LOGS/kafka-format.log"
      die "could not format the Kafka storage"
    fi
  fi
  [[ -f "$LOGS/kafka.log" ]] && mv -f "$LOGS/kafka.log" "$LOGS/kafka.log.prev"
  rm -f "$LOGS"/kafka.log.[0-9]*
  printf '%s %s\n' "$KAFKA_PORT" "$CTRL_PORT" >"$INFRA/kafka.port"
  printf '%s\n' "$SASL_PORT" >"$INFRA/kafka-sasl.port"
  (
    cd "$KAFKA_DIR"
    exec 9>&-
    exec nohup java -Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
      -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
      -Dlog4j2.configurationFile="$KAFKA_LOG4J" -Dkafka.logs.dir="$LOGS" -Dkafka.log.name=kafka \
      -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_CONF" \
      </dev/null >"$LOGS/kafka.out" 2>&1
  ) &
  printf '%s\n' "$!" >"$INFRA/kafka.pid"
  log "started Kafka (pid $!) on $HOST:$KAFKA_PORT, controller $HOST:$CTRL_PORT"
}

wait_kafka() {
  local pid deadline=$((SECONDS + KAFKA_TIMEOUT))
  pid="$(cat "$INFRA/kafka.pid")"
  while :; do
    if ! proc_alive "$pid"; then
      tail_logs "$LOGS/kafka.log" "$LOGS/kafka.out"
      rm -f "$INFRA/kafka.pid" "$INFRA/kafka.port" "$INFRA/kafka-sasl.port"
      die "Kafka exited during start (logs: $LOGS/kafka.log, $LOGS/kafka.out)"
    fi
    if port_open "$KAFKA_PORT" && grep -q 'Kafka Server started' "$LOGS/kafka.log" 2>/dev/null; then
      return 0
    fi
    if ((SECONDS >= deadline)); then
      tail_logs "$LOGS/kafka.log" "$LOGS/kafka.out"
      die "Kafka not ready on $HOST:$KAFKA_PORT after ${KAFKA_TIMEOUT}s; still running as pid $pid (stop it with: bash infra/infra.sh down)"
    fi
    sleep 0.5
  done
}

# --------------------------------------------------------------- postgres
start_postgres() {
  # Loopback TCP only (no Unix socket), trust for loopback only; regenerated at each start.
  cat >"$PG_DATA/pg_hba.conf" <<EOF
# Generated by infra/infra.sh at each start; edits are lost.
# TYPE  DATABASE  USER  ADDRESS       METHOD
host    all       all   127.0.0.1/32  trust
host    all       all   ::1/128       trust
EOF
  # A postmaster.pid left by a killed server whose process is gone (or a zombie not yet reaped,
  # or a reused pid) stops postgres from starting. Removing it is safe: postgres still refuses
  # to start while any old child holds the cluster's shared memory.
  local old
  old="$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)"
  if [[ -n "$old" ]] && ! is_ours postgres "$old"; then
    log "removing the stale $PG_DATA/postmaster.pid (pid $old is not our PostgreSQL)"
    rm -f "$PG_DATA/postmaster.pid"
  fi
  [[ -f "$LOGS/postgres.log" ]] && mv -f "$LOGS/postgres.log" "$LOGS/postgres.log.prev"
  printf '%s\n' "$PG_PORT" >"$INFRA/postgres.port"
  # The log leaves out the statements of failed commands (log_min_error_statement=panic): a lost
  # insert-only compare-and-set is a duplicate key error by design, and its statement is the
  # whole document.
  (
    cd "$PG_DIR"
    exec 9>&-
    exec nohup "${PG_AS[@]}" "$PG_BIN/postgres" -D "$PG_DATA" \
      -c listen_addresses="$HOST" \
      -c port="$PG_PORT" \
      -c unix_socket_directories= \
      -c max_connections=200 \
      -c logging_collector=off \
      -c log_min_error_statement=panic \
      </dev/null >"$LOGS/postgres.log" 2>&1
  ) &
  printf '%s\n' "$!" >"$INFRA/postgres.pid"
  log "started PostgreSQL (pid $!) on $HOST:$PG_PORT, cluster $PG_DATA"
}

# Waits until the server accepts connections, then creates FerretDB's database if missing.
wait_postgres() {
  local pid deadline=$((SECONDS + PG_TIMEOUT)) found
  pid="$(cat "$INFRA/postgres.pid")"
  while :; do
    if ! proc_alive "$pid"; then
      tail_logs "$LOGS/postgres.log"
      rm -f "$INFRA/postgres.pid" "$INFRA/postgres.port"
      die "PostgreSQL exited during start (log: $LOGS/postgres.log)"
    fi
    if "${PG_CLIENT[@]}" "$PG_BIN/pg_isready" -q -h "$HOST" -p "$PG_PORT" -U "$PG_ROLE" -d postgres -t 2; then
      break
    fi
    if ((SECONDS >= deadline)); then
      tail_logs "$LOGS/postgres.log"
      die "PostgreSQL not ready on $HOST:$PG_PORT after ${PG_TIMEOUT}s; still running as pid $pid (stop it with: bash infra/infra.sh down)"
    fi
    sleep 0.2
  done
  found="$("${PG_CLIENT[@]}" "$PG_BIN/psql" -X -q -t -A -h "$HOST" -p "$PG_PORT" -U "$PG_ROLE" -d postgres \
    -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" \
    || die "could not query PostgreSQL on $HOST:$PG_PORT (log: $LOGS/postgres.log)"
  if [[ "$found" != 1 ]]; then
    log "creating the PostgreSQL database $PG_DB"
    "${PG_CLIENT[@]}" "$PG_BIN/createdb" -h "$HOST" -p "$PG_PORT" -U "$PG_ROLE" "$PG_DB" \
      || die "could not create the database $PG_DB"
  fi
}

# --------------------------------------------------------------- ferretdb
start_ferretdb() {
  mkdir -p "$FERRETDB_DATA" "$FERRETDB_STATE" "$LOGS"
  printf '%s\n' "$MONGO_PORT" >"$INFRA/ferretdb.port"
  printf '%s\n' "$BACKEND" >"$INFRA/ferretdb.backend"
  local -a storage
  if [[ "$BACKEND" == postgresql ]]; then
    storage=(--handler=postgresql "--postgresql-url=postgres://$PG_ROLE@$HOST:$PG_PORT/$PG_DB")
  else
    storage=(--handler=sqlite "--sqlite-url=file:$FERRETDB_DATA/")
  fi
  # Telemetry is off three ways (flag, DO_NOT_TRACK, reporting URL on a dead
  # loopback port); the debug HTTP listener is off (--debug-addr=-).
  (
    cd "$INFRA/ferretdb"
    exec 9>&-
    export DO_NOT_TRACK=1 FERRETDB_TELEMETRY=disable
    unset PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE PGSERVICE PGSSLMODE PGOPTIONS
    exec nohup "$FERRETDB_BIN" \
      "${storage[@]}" \
      --state-dir="$FERRETDB_STATE" \
      --listen-addr="$HOST:$MONGO_PORT" \
      --debug-addr=- \
      --telemetry=disable \
      --test-telemetry-url="http://127.0.0.1:9/" \
      --log-level=warn \
      </dev/null >"$LOGS/ferretdb.log" 2>&1
  ) &
  printf '%s\n' "$!" >"$INFRA/ferretdb.pid"
  log "started FerretDB (pid $!) on $HOST:$MONGO_PORT"
}

wait_ferretdb() {
  local pid deadline=$((SECONDS + MONGO_TIMEOUT))
  pid="$(cat "$INFRA/ferretdb.pid")"
  while :; do
    if ! proc_alive "$pid"; then
      tail_logs "$LOGS/ferretdb.log"
      rm -f "$INFRA/ferretdb.pid" "$INFRA/ferretdb.port" "$INFRA/ferretdb.backend"
      die "FerretDB exited during start (log: $LOGS/ferretdb.log)"
    fi
    port_open "$MONGO_PORT" && return 0
    if ((SECONDS >= deadline)); then
      tail_logs "$LOGS/ferretdb.log"
      die "FerretDB not listening on $HOST:$MONGO_PORT after ${MONGO_TIMEOUT}s; still running as pid $pid (stop it with: bash infra/infra.sh down)"
    fi
    sleep 0.2
  done
}

# ------------------------------------------------------------ stop / env
# Stops our service $1 with signal $2 (default TERM; PostgreSQL: INT, its fast shutdown, which
# does not wait for clients to disconnect), then SIGKILL after STOP_TIMEOUT.
stop_service() {
  local svc="$1" sig="${2:-TERM}" pid deadline
  if ! pid="$(service_pid "$svc")"; then
    rm -f "$INFRA/$svc.pid" "$INFRA/$svc.port" "$INFRA/$svc.backend"
    [[ "$svc" != kafka ]] || rm -f "$INFRA/kafka-sasl.port"
    log "$svc: not running"
    return 0
  fi
  log "$svc: stopping pid $pid"
  kill -"$sig" "$pid" 2>/dev/null || true
  deadline=$((SECONDS + STOP_TIMEOUT))
  while is_ours "$svc" "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
  if is_ours "$svc" "$pid"; then
    log "$svc: still alive after ${STOP_TIMEOUT}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 5))
    while is_ours "$svc" "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
  fi
  rm -f "$INFRA/$svc.pid" "$INFRA/$svc.port" "$INFRA/$svc.backend"
  [[ "$svc" != kafka ]] || rm -f "$INFRA/kafka-sasl.port"
  log "$svc: stopped"
}

# The settings, using the ports of running services, else the configured ones.
print_env() {
  local kport mport pport=""
  kport="$KAFKA_PORT"
  mport="$MONGO_PORT"
  if service_pid kafka >/dev/null; then read -r kport _ <<<"$(recorded_port kafka) $KAFKA_PORT"; fi
  if service_pid ferretdb >/dev/null; then read -r mport _ <<<"$(recorded_port ferretdb) $MONGO_PORT"; fi
  if service_pid postgres >/dev/null; then read -r pport _ <<<"$(recorded_port postgres) $PG_PORT"; fi
  mkdir -p "$INFRA"
  {
    printf 'export INTERLOCK_KAFKA_BOOTSTRAP_SERVERS=%s:%s\n' "$HOST" "$kport"
    printf 'export INTERLOCK_MONGODB_URI=mongodb://%s:%s/\n' "$HOST" "$mport"
    # The PostgreSQL server itself (its maintenance database), for what runs on PostgreSQL
    # directly: the benchmark's DBOS peer creates a database of its own there for each run.
    # Printed only while ours runs (FerretDB on SQLite needs none).
    if [[ -n "$pport" ]]; then
      printf 'export INTERLOCK_POSTGRES_URI=postgresql://%s@%s:%s/postgres\n' "$PG_ROLE" "$HOST" "$pport"
    fi
    # The SASL listener, for the tests of authenticated clients (a broker started before it
    # existed has none: then nothing is printed).
    if [[ -f "$INFRA/kafka-sasl.port" ]]; then
      printf 'export INTERLOCK_TEST_KAFKA_SASL_SERVERS=%s:%s\n' "$HOST" "$(cat "$INFRA/kafka-sasl.port")"
      printf 'export INTERLOCK_TEST_KAFKA_SASL_USER=%s\n' "$SASL_USER"
      printf 'export INTERLOCK_TEST_KAFKA_SASL_PASSWORD=%s\n' "$SASL_PASSWORD"
    fi
  } >"$ENV_FILE.tmp"
  mv -f "$ENV_FILE.tmp" "$ENV_FILE"
  cat "$ENV_FILE"
}

lock() {
  mkdir -p "$INFRA"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$INFRA/.lock"
    flock -w 900 9 || die "another infra.sh holds $INFRA/.lock"
  fi
}

# ---------------------------------------------------------------- commands
cmd_up() {
  local -a ports=("$KAFKA_PORT" "$CTRL_PORT" "$SASL_PORT" "$MONGO_PORT")
  [[ "$BACKEND" != postgresql ]] || ports+=("$PG_PORT")
  [[ "$(printf '%s\n' "${ports[@]}" | sort -u | wc -l)" == "${#ports[@]}" ]] \
    || die "the ports must differ: Kafka $KAFKA_PORT, Kafka controller $CTRL_PORT, Kafka SASL $SASL_PORT, FerretDB $MONGO_PORT$([[ "$BACKEND" != postgresql ]] || echo ", PostgreSQL $PG_PORT")"
  lock
  local start_k=1 start_f=1 start_p=0 wait_k=0 wait_f=0 wait_p=0 pid rec p
  if pid="$(service_pid kafka)"; then
    rec="$(recorded_port kafka)"
    [[ "$rec" == "$KAFKA_PORT $CTRL_PORT" ]] \
      || die "our Kafka already runs (pid $pid) on ports '${rec:-unknown}', not $KAFKA_PORT $CTRL_PORT; run 'bash infra/infra.sh down' first"
    start_k=0
    port_open "$KAFKA_PORT" || wait_k=1  # still starting (an earlier up timed out)
  else
    for p in "$KAFKA_PORT" "$CTRL_PORT" "$SASL_PORT"; do
      port_open "$p" && die "port $HOST:$p (Kafka) is in use by a process that is not this checkout's Kafka; free it or set INTERLOCK_INFRA_KAFKA_PORT (controller: INTERLOCK_INFRA_KAFKA_CONTROLLER_PORT, SASL listener: INTERLOCK_INFRA_KAFKA_SASL_PORT)"
    done
  fi
  if pid="$(service_pid ferretdb)"; then
    rec="$(recorded_port ferretdb)"
    [[ "$rec" == "$MONGO_PORT" ]] \
      || die "our FerretDB already runs (pid $pid) on port '${rec:-unknown}', not $MONGO_PORT; run 'bash infra/infra.sh down' first"
    rec="$(cat "$INFRA/ferretdb.backend" 2>/dev/null || echo sqlite)"  # older infra.sh: SQLite only
    [[ "$rec" == "$BACKEND" ]] \
      || die "our FerretDB already runs (pid $pid) on its $rec backend, not $BACKEND (INTERLOCK_INFRA_FERRETDB_BACKEND); run 'bash infra/infra.sh down' first"
    start_f=0
    port_open "$MONGO_PORT" || wait_f=1
    [[ -f "$FERRETDB_BUILD_MARKER" && "$(cat "$FERRETDB_BUILD_MARKER")" == "$(ferretdb_build_id)" ]] \
      || log "note: the running FerretDB is not built with the current infra/ferretdb patches (INTERLOCK_INFRA_FERRETDB_PATCHES=$PATCHES); 'down' then 'up' rebuilds it"
  else
    port_open "$MONGO_PORT" && die "port $HOST:$MONGO_PORT (FerretDB) is in use by a process that is not this checkout's FerretDB; free it or set INTERLOCK_INFRA_MONGO_PORT"
  fi
  if pid="$(service_pid postgres)"; then
    rec="$(recorded_port postgres)"
    [[ "$rec" == "$PG_PORT" || "$BACKEND" != postgresql ]] \
      || die "our PostgreSQL already runs (pid $pid) on port '${rec:-unknown}', not $PG_PORT; run 'bash infra/infra.sh down' first"
    # (with the SQLite backend a running PostgreSQL is left alone)
    [[ "$BACKEND" != postgresql ]] || wait_p=1  # quick when ready; also makes sure the database exists
  elif [[ "$BACKEND" == postgresql ]]; then
    port_open "$PG_PORT" && die "port $HOST:$PG_PORT (PostgreSQL) is in use by a process that is not this checkout's PostgreSQL; free it or set INTERLOCK_INFRA_POSTGRES_PORT"
    start_p=1
  fi

  if ((start_k)); then provision_kafka; fi
  if ((start_f)); then provision_ferretdb; fi
  if ((start_p || wait_p)); then provision_postgres; fi
  if ((start_p)); then init_postgres; fi
  if ((start_k)); then start_kafka; wait_k=1; fi
  if ((start_p)); then start_postgres; wait_p=1; fi
  if ((wait_p)); then wait_postgres; ((start_p == 0)) || log "PostgreSQL ready"; fi
  if ((start_f)); then start_ferretdb; wait_f=1; fi
  if ((wait_f)); then wait_ferretdb; log "FerretDB ready ($BACKEND backend)"; fi
  if ((wait_k)); then wait_kafka; log "Kafka ready (${SECONDS}s since infra.sh started)"; fi
  if ((start_k == 0 && start_f == 0 && start_p == 0)); then log "Kafka and FerretDB ($BACKEND) already running"; fi
  print_env
}

cmd_down() {
  local purge=0 a
  for a in "$@"; do
    case "$a" in
      --purge) purge=1 ;;
      *) die "down: unknown option '$a' (only --purge)" ;;
    esac
  done
  lock
  stop_service kafka
  stop_service ferretdb
  stop_service postgres INT
  if ((purge)); then
    log "purging data: $KAFKA_DATA $INFRA/ferretdb $PG_DIR $KAFKA_CONF $ENV_FILE"
    rm -rf "$KAFKA_DATA" "$INFRA/ferretdb" "$PG_DIR" "$KAFKA_CONF" "$ENV_FILE"
  fi
}

cmd_status() {
  local pid rc=0 rec backend="$BACKEND"
  if pid="$(service_pid kafka)"; then
    rec="$(recorded_port kafka)"
    if port_open "${rec%% *}"; then
      echo "kafka: running (pid $pid) on $HOST:${rec%% *} (controller $HOST:${rec##* })"
    else
      echo "kafka: process running (pid $pid) but $HOST:${rec%% *} does not answer"; rc=1
    fi
  else
    echo "kafka: stopped"; rc=1
  fi
  if pid="$(service_pid ferretdb)"; then
    rec="$(recorded_port ferretdb)"
    backend="$(cat "$INFRA/ferretdb.backend" 2>/dev/null || echo sqlite)"
    if port_open "$rec"; then
      echo "ferretdb: running (pid $pid) on $HOST:$rec, $backend backend"
    else
      echo "ferretdb: process running (pid $pid) but $HOST:$rec does not answer"; rc=1
    fi
  else
    echo "ferretdb: stopped"; rc=1
  fi
  if pid="$(service_pid postgres)"; then
    rec="$(recorded_port postgres)"
    if port_open "$rec"; then
      echo "postgres: running (pid $pid) on $HOST:$rec, cluster $PG_DATA"
    else
      echo "postgres: process running (pid $pid) but $HOST:$rec does not answer"
      [[ "$backend" != postgresql ]] || rc=1
    fi
  else
    echo "postgres: stopped$([[ "$backend" == postgresql ]] || echo " (not needed: $backend backend)")"
    [[ "$backend" != postgresql ]] || rc=1
  fi
  [[ -f "$KAFKA_LIBS_MARKER" ]] && echo "kafka jars: cached in $KAFKA_LIBS" || echo "kafka jars: not fetched yet"
  if [[ -x "$FERRETDB_BIN" ]]; then
    echo "ferretdb binary: $FERRETDB_BIN ($(cat "$FERRETDB_BUILD_MARKER" 2>/dev/null || echo "built by an older infra.sh: unpatched"))"
  else
    echo "ferretdb binary: not built yet"
  fi
  return "$rc"
}

usage() {
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

main() {
  local cmd="${1:-}"
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    purge) cmd_down --purge "$@" ;;
    status) cmd_status "$@" ;;
    env) print_env ;;
    -h|--help|help) usage ;;
    *) usage; exit 2 ;;
  esac
}

main "$@"
