"""Kafka TLS and SASL settings become one security description, used alike by the broker of
each service and by the plain aiokafka clients."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from faststream.security import SASLScram512
from pydantic import ValidationError

from shared.kafka_security import broker_security, client_options
from shared.settings import CommonSettings


def test_plain_connections_need_nothing() -> None:
    settings = CommonSettings(kafka_bootstrap_servers="k:9092")
    assert broker_security(settings) is None
    assert client_options(settings) == {"bootstrap_servers": "k:9092"}


def test_sasl_over_tls_with_scram() -> None:
    settings = CommonSettings(
        kafka_bootstrap_servers="k:9093",
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="interlock",
        kafka_sasl_password="s3cret",
    )
    security = broker_security(settings)
    assert isinstance(security, SASLScram512) and security.use_ssl
    options = client_options(settings)
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert options["sasl_plain_username"] == "interlock"
    assert options["sasl_plain_password"] == "s3cret"
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert "s3cret" not in repr(settings)  # a secret, kept out of logs and tracebacks


def test_sasl_without_tls_has_no_ssl_context() -> None:
    settings = CommonSettings(
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="PLAIN",
        kafka_sasl_username="u",
        kafka_sasl_password="p",
    )
    options = client_options(settings)
    assert options["security_protocol"] == "SASL_PLAINTEXT"
    assert options["sasl_mechanism"] == "PLAIN"
    assert options["ssl_context"] is None


def test_tls_with_a_ca_file(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text(SELF_SIGNED_CA)
    settings = CommonSettings(kafka_security_protocol="SSL", kafka_ssl_cafile=ca)
    options = client_options(settings)
    assert options["security_protocol"] == "SSL"
    assert options["ssl_context"].verify_mode is ssl.CERT_REQUIRED


@pytest.mark.parametrize(
    "fields",
    [
        {"kafka_security_protocol": "SASL_SSL"},
        {"kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_username": "u"},
        {"kafka_security_protocol": "SSL", "kafka_ssl_certfile": "/c.pem"},
    ],
)
def test_incomplete_credentials_are_refused_at_start_up(fields: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match="INTERLOCK_KAFKA_"):
        CommonSettings(**fields)  # type: ignore[arg-type]


SELF_SIGNED_CA = """\
-----BEGIN CERTIFICATE-----
MIIDBTCCAe2gAwIBAgIUSK0XiBiSnpbG8IWLCVlKZt65wYIwDQYJKoZIhvcNAQEL
BQAwEjEQMA4GA1UEAwwHdGVzdC1jYTAeFw0yNjExMzAwNTM2NTBaFw0zNjExMjcw
NTM2NTBaMBIxEDAOBgNVBAMMB3Rlc3QtY2EwggEiMA0GCSqGSIb3DQEBAQUAA4IB
DwAwggEKAoIBAQDdA6iN0i+eNbexJj2tg57UbX+RNsdQhB5PXQyburvkoh35SShL
GoUWRVypVEm1qmgAIVlSSs+jdo6/CNo5GNjq9nshIv3IGRy6VsxG7eg30SH7nkKt
yJIzpAfelwNdfpqrjMXN1fldZzAY46pX/yMyIEeS011BHhNDbvysYMMeXtDqgZY/
hc6SnwJDau74ANvBQoOegsCQN/GM2pgsFJO44Xq969vIYZkJ7S8tm+FQjJat8OKv
0Vq7uvev+ezAEkObEAuVICETc4geFzboamdvgEPkiXQJ815I5HxNG3tGL0UPFb58
ofYoc08VK3EsxeXK7k3/INXtRt83/M6SinljAgMBAAGjUzBRMB0GA1UdDgQWBBSr
Y64s8ruEKr3Ol2//tLKcbYfa6TAfBgNVHSMEGDAWgBSrY64s8ruEKr3Ol2//tLKc
bYfa6TAPBgNVHRMBAf8EBTADAQH/MA0GCSqGSIb3DQEBCwUAA4IBAQBMFEaoIwnD
Dt9B6PCphrwpgruk3OcRUY4J3xTtsJsoJBTXzIQtMpWDkQsM8/2aHMkOdDlJqyfE
7lhTFDKpnYoAlvvttqmmOBVx5tDd2xOxBBn8y3yJsdXShdV3mFtyD5YZ6nMhM80x
vVusBynBDRvNcJHl1TgRXCrnG/8EM+P+V90M6ujq9NmeJTP7Q4gKEzhgc5Zz0hNU
QupdGM5kFnFhJeTT3gcJ8AIFZRXpI9eP+arxq1XUHpS60iS4p2kJCqvyT+lvs277
XQ4xnSWL63LhOTkObrDvDYyzBi9NapnNH0VMjqcDSCBsB3W/g2lykyNSy2L/wfDc
fM1Dyq3UrfPz
-----END CERTIFICATE-----
"""
