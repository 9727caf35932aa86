"""Which URLs a run's webhook may call: the guard against server-side request forgery.

A run's ``webhook`` is a URL a client chose, which Interlock's notifier then calls from inside
the cluster: left unguarded, any key holder could have it POST to the metadata service, the
broker's admin port or a database. So a webhook must be ``http`` or ``https``, name a host, and
reach only public addresses: loopback, private, link-local (the cloud metadata service),
carrier-grade NAT, multicast and reserved ranges are refused, unless the operator allows
private networks (``INTERLOCK_WEBHOOK_ALLOW_PRIVATE_NETWORKS``: a receiver inside the cluster,
or a laptop). The gateway checks when a run asks (a clear 422 at once), and the notifier checks
again before every attempt, with the addresses the name resolves to then: a name may be
pointed elsewhere in between (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

MAX_URL_CHARS = 4096
RESOLVE_TIMEOUT_SECONDS = 5.0
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


class WebhookUrlRefused(ValueError):
    """The URL may not be called; the message says why, for the client (never a secret)."""


class HostUnresolved(WebhookUrlRefused):
    """The URL's host resolves to nothing now: it may later (DNS blinks, a record not yet made)."""


def host_of(url: str) -> str:
    """The host ``url`` names, once its form is one a webhook may have; raises
    ``WebhookUrlRefused`` otherwise."""
    if len(url) > MAX_URL_CHARS:
        raise WebhookUrlRefused(f"a webhook URL has at most {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port out of range or not a number
    except ValueError:
        raise WebhookUrlRefused("the webhook is not a valid URL") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise WebhookUrlRefused("a webhook URL starts with http:// or https://")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise WebhookUrlRefused("a webhook URL names a host")
    return host


def address_refusal(address: str) -> str | None:
    """Why a webhook may not reach ``address`` (an IP literal), or None when it is public."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_unspecified:
        return "a reserved address"  # 0.0.0.0 and :: reach this host
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address (such as the cloud metadata service)"
    if ip.is_private or ip in _SHARED_ADDRESS_SPACE:
        return "a private address"
    if ip.is_multicast or ip.is_reserved or ip.is_unspecified or not ip.is_global:
        return "a reserved address"
    return None


_SHARED_ADDRESS_SPACE = ipaddress.ip_network("100.64.0.0/10")
"""Carrier-grade NAT (RFC 6598): not global, and not ``is_private`` on every Python."""


def check_form(url: str, *, allow_private: bool) -> str:
    """Refuse what can be told without resolving: a form no webhook has, a literal address or a
    local name that is not public (unless ``allow_private``). Returns the host."""
    host = host_of(url)
    if allow_private:
        return host
    if host.lower() in _LOCAL_NAMES or host.lower().endswith(".localhost"):
        raise WebhookUrlRefused(f"the webhook's host {host} is a loopback address")
    try:
        why = address_refusal(host)
    except ValueError:
        return host  # a name: resolved by ``check``
    if why is not None:
        raise WebhookUrlRefused(f"the webhook's host {host} is {why}")
    return host


async def resolved(host: str) -> list[str]:
    """The addresses ``host`` resolves to now (an IP literal: itself)."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(RESOLVE_TIMEOUT_SECONDS):
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, TimeoutError):
        raise HostUnresolved(f"the webhook's host {host} does not resolve") from None
    return sorted({str(info[4][0]) for info in infos})


async def check(url: str, *, allow_private: bool) -> None:
    """Refuse ``url`` (``WebhookUrlRefused``) unless a webhook may call it now: its form, and
    every address its host resolves to (one private address among public ones is refused too:
    the client would pick which one is called)."""
    host = check_form(url, allow_private=allow_private)
    if allow_private:
        return
    for address in await resolved(host):
        why = address_refusal(address)
        if why is not None:
            raise WebhookUrlRefused(f"the webhook's host {host} resolves to {why}")
