"""Settings common to every service, read from ``INTERLOCK_*`` environment variables.

Each service extends ``CommonSettings`` with its own class; tests pass settings explicitly.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.crypto import Keyring, KeyringError, keyring_from
from shared.topics import DEFAULT_PARTITIONS, Topics

DEFAULT_AGENTS_FILE = Path(__file__).resolve().parent.parent / "agents" / "agents.toml"


class CommonSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTERLOCK_", extra="ignore", frozen=True)

    environment: Literal["development", "test", "production"] = "development"
    kafka_bootstrap_servers: str = "127.0.0.1:19092"
    mongodb_uri: str = "mongodb://127.0.0.1:27117/"
    mongodb_database: str = "interlock"
    mongodb_timeout_ms: int = Field(default=10_000, ge=100, le=600_000)
    """No database operation waits longer than this, finding a server included (the driver's
    ``timeoutMS``): the gateway then answers 503 with ``Retry-After`` rather than holding the
    request, and a consumer retries its message, instead of both waiting on a saturated store."""
    mongodb_slow_command_ms: float | None = Field(default=None, gt=0)
    """Log every database command slower than this (``store.slow_command``, with its collection
    and the field names it filters on). None: only the ``interlock_store_command_seconds``
    histogram."""
    store_compression: bool = True
    """Write state-sized values (execution bodies, checkpoints) compressed once they are 1 KiB
    or more (shared/store/mongo/compression.py). Both forms are read either way; false keeps
    writing the plain form while pods of a release that cannot read it still run (a rolling
    upgrade from it: docs/architecture.md, "Upgrading to compressed state")."""
    store_init_at_start: bool = True
    """Create the store's indexes and run its migrations at start-up, as ``interlock store init``
    does. The manifests turn it off: there the store-init init container does it as the migrator,
    and each service's MongoDB user may do only what the service itself does
    (shared/store/access.py)."""
    webhook_allow_private_networks: bool = False
    """Let runs' webhooks call loopback, private and link-local addresses (a receiver inside the
    cluster, or on a laptop). Off, they reach only public addresses (shared/webhook_urls.py);
    the gateway and the notifier must agree."""
    topic_prefix: str = Field(default="", pattern=r"^[A-Za-z0-9._-]*$")
    """Prepended to every topic name; lets test runs share one broker without crosstalk."""
    topic_partitions: int = Field(default=DEFAULT_PARTITIONS, ge=1, le=1000)
    consumer_group_prefix: str = Field(default="interlock", pattern=r"^[A-Za-z0-9._-]+$")
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    """How the Kafka clients connect (``shared/kafka_security.py``): TLS, SASL, or both."""
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "SCRAM-SHA-512"
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: Path | None = None
    """The CA bundle that signed the brokers' certificates (default: the system's)."""
    kafka_ssl_certfile: Path | None = None
    """A client certificate, for brokers that authenticate clients by TLS (mTLS)."""
    kafka_ssl_keyfile: Path | None = None
    kafka_session_timeout_ms: int = Field(default=10_000, ge=3_000, le=300_000)
    """How soon Kafka gives a dead or frozen replica's partitions to another replica."""
    kafka_group_instance_id: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$"
    )
    """Static group membership (KIP-345): a name this replica keeps across restarts (the pod's
    name in Kubernetes). A replica that crashes and comes back within the session timeout takes
    its partitions back without a rebalance, so the other replicas never pause. The price: a
    replica stopped for good holds its partitions until the session timeout, since a static
    member does not leave its group. Unique per live replica; None: dynamic membership. It is
    the member's name as is: a replica is one member of its service's group, for every topic."""
    consumer_concurrency: int = Field(default=32, ge=1, le=10_000)
    """Messages each subscription of this replica handles at once: those of different executions
    run concurrently, those of one execution (one Kafka key) strictly in order. Each service
    sets a default that suits it (the sandbox's is the number of agent runs in flight)."""
    consumer_buffer: int | None = Field(default=None, ge=1, le=1_000_000)
    """How many fetched messages a subscription may hold (in flight or waiting behind an earlier
    message of their execution) before it pauses its partitions. None: four times
    ``consumer_concurrency``. It bounds the memory a backlog can take."""
    encryption_keys: SecretStr | None = None
    """``<key id>:<base64 of 32 bytes>``, comma-separated, newest first (``shared/crypto.py``):
    seals callers' custom headers on the bus and the gateway's page cursors. The gateway and the
    sandbox must hold the same keys. Required in production; elsewhere a process without it
    makes an in-memory key of its own."""
    agents_file: Path = DEFAULT_AGENTS_FILE
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["auto", "json", "console"] = "auto"
    health_port: int | None = Field(default=None, ge=0, le=65535)
    """Consumers (orchestrator, sandbox, notifier): serve ``/healthz`` and ``/readyz`` on this
    port (Kubernetes probes; the manifests use 8081). None: no health server."""
    health_host: str = "127.0.0.1"
    debug_tasks_token: SecretStr | None = Field(default=None, min_length=16)
    """Serve ``GET /debug/tasks`` on the health listener, to ``Authorization: Bearer`` this
    token only. None: the route does not exist (404)."""
    metrics_poll_seconds: float = Field(default=15.0, gt=0, le=3600)
    """How often the measured gauges (consumer lag, executions by status) are refreshed."""
    graceful_timeout_seconds: float = Field(default=15.0, gt=0, le=3600)
    """On SIGTERM, how long a consumer lets the message in hand finish before it stops (an
    unfinished one is not committed: another replica takes it up). Keep it below the pod's
    terminationGracePeriodSeconds."""

    rebalance_grace_seconds: float = Field(default=10.0, gt=0, le=600)
    """When Kafka moves a partition to another replica (one joined or left), how long the
    messages of it in flight here get to finish before they are cancelled and taken up by the
    partition's next owner (agent runs from their checkpoints). Every replica of the service
    waits for the slowest meanwhile, so keep it short."""
    consumer_commit_interval_ms: int = Field(default=200, ge=0, le=60_000)
    """A consumer commits what it finished at most this often (a rebalance and a stop commit at
    once): fewer commit requests under a steady load, and after a crash at most this much
    finished work is delivered again, which the idempotency guards absorb."""

    @model_validator(mode="after")
    def _sasl_needs_credentials(self) -> Self:
        sasl = self.kafka_security_protocol.startswith("SASL")
        if sasl and (self.kafka_sasl_username is None or self.kafka_sasl_password is None):
            raise ValueError(
                f"INTERLOCK_KAFKA_SECURITY_PROTOCOL={self.kafka_security_protocol} needs"
                " INTERLOCK_KAFKA_SASL_USERNAME and INTERLOCK_KAFKA_SASL_PASSWORD"
            )
        if (self.kafka_ssl_certfile is None) != (self.kafka_ssl_keyfile is None):
            raise ValueError(
                "INTERLOCK_KAFKA_SSL_CERTFILE and INTERLOCK_KAFKA_SSL_KEYFILE go together"
            )
        if self.encryption_keys is not None:
            Keyring.parse(self.encryption_keys.get_secret_value())  # fail at start-up, not later
        return self

    @functools.cached_property
    def keyring(self) -> Keyring:
        """The encryption keys; raises KeyringError in production when none are set."""
        if self.encryption_keys is None and self.environment == "production":
            raise KeyringError(
                "INTERLOCK_ENCRYPTION_KEYS is required in production (the gateway and the sandbox"
                " share it): make one with `interlock keys encryption-key`"
            )
        keys = self.encryption_keys
        return keyring_from(None if keys is None else keys.get_secret_value())

    @property
    def consumer_max_held(self) -> int:
        return max(self.consumer_buffer or 4 * self.consumer_concurrency, self.consumer_concurrency)

    @property
    def topics(self) -> Topics:
        return Topics(self.topic_prefix)

    def consumer_group(self, service: str) -> str:
        return f"{self.consumer_group_prefix}.{service}"
