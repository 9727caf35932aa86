"""How Interlock's Kafka clients authenticate and encrypt: TLS and SASL from the settings.

One description (FastStream's security object) serves the broker of every service and, through
FastStream's own translation, the plain aiokafka clients (topic creation, the lag gauge), so
the two never disagree about how to reach the cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiokafka.helpers import create_ssl_context
from faststream.kafka.security import parse_security
from faststream.security import BaseSecurity, SASLPlaintext, SASLScram256, SASLScram512

if TYPE_CHECKING:
    from shared.settings import CommonSettings

SASL_MECHANISMS = {
    "PLAIN": SASLPlaintext,
    "SCRAM-SHA-256": SASLScram256,
    "SCRAM-SHA-512": SASLScram512,
}


def broker_security(settings: CommonSettings) -> BaseSecurity | None:
    """FastStream's security for the settings' protocol; None for plain connections."""
    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return None
    use_ssl = protocol.endswith("SSL")
    ssl_context = None
    if use_ssl:
        # The system's trust store unless a CA file is given; a client certificate for mTLS.
        ssl_context = create_ssl_context(
            cafile=str(settings.kafka_ssl_cafile) if settings.kafka_ssl_cafile else None,
            certfile=str(settings.kafka_ssl_certfile) if settings.kafka_ssl_certfile else None,
            keyfile=str(settings.kafka_ssl_keyfile) if settings.kafka_ssl_keyfile else None,
        )
    if protocol == "SSL":
        return BaseSecurity(ssl_context=ssl_context, use_ssl=True)
    username = settings.kafka_sasl_username
    password = settings.kafka_sasl_password
    assert username is not None and password is not None  # the settings validate this
    mechanism = SASL_MECHANISMS[settings.kafka_sasl_mechanism]
    return mechanism(
        username, password.get_secret_value(), ssl_context=ssl_context, use_ssl=use_ssl
    )


def client_options(settings: CommonSettings) -> dict[str, Any]:
    """The same, as keyword arguments of aiokafka's clients (admin, consumer, producer)."""
    return {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        **parse_security(broker_security(settings)),
    }
