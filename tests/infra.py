"""Where the tests find Kafka and MongoDB.

In order: the ``INTERLOCK_KAFKA_BOOTSTRAP_SERVERS`` / ``INTERLOCK_MONGODB_URI`` settings when
given (``make test`` points them at the broker and FerretDB that ``infra/infra.sh`` started);
otherwise testcontainers, where a Docker engine answers; otherwise the test fails and says how to
provide them. Integration tests never skip silently.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

KAFKA_ENV = "INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"
MONGO_ENV = "INTERLOCK_MONGODB_URI"
HOW_TO = "run `make infra-up` and export what it prints, or run the suite with `make test`"


def _docker_available() -> bool:
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:  # any failure to reach a Docker engine means "no Docker" here
        return False


@contextmanager
def kafka_bootstrap() -> Iterator[str]:
    given = os.environ.get(KAFKA_ENV)
    if given:
        yield given
        return
    if not _docker_available():
        raise RuntimeError(
            f"no Kafka: {KAFKA_ENV} is not set and no Docker engine answers; {HOW_TO}"
        )
    from testcontainers.community.kafka import KafkaContainer

    with KafkaContainer().with_kraft() as container:
        yield container.get_bootstrap_server()


@contextmanager
def mongodb_uri() -> Iterator[str]:
    given = os.environ.get(MONGO_ENV)
    if given:
        yield given
        return
    if not _docker_available():
        raise RuntimeError(
            f"no MongoDB: {MONGO_ENV} is not set and no Docker engine answers; {HOW_TO}"
        )
    from testcontainers.community.mongodb import MongoDbContainer

    with MongoDbContainer("mongo:7") as container:
        yield container.get_connection_url()
