"""One bounded HTTP POST for the webhook and Slack channels, and which outcomes are worth
retrying.

Failure reasons end up in delivery records that the API lists, so they never include the URL:
a Slack incoming-webhook URL is itself a credential.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import httpx

from shared.notifications.model import DeliveryFailed

RETRYABLE_CLIENT_ERRORS = frozenset({408, 409, 425, 429})
"""4xx answers that mean "not now" rather than "never"."""

_EXCERPT = 200


def is_retryable_status(status: int) -> bool:
    """Whether a non-2xx answer may succeed on a later attempt."""
    if 400 <= status < 500:
        return status in RETRYABLE_CLIENT_ERRORS
    # 3xx: the endpoint moved; following it would send the body somewhere nobody configured
    # (the Standard Webhooks advice is to update the URL), so it fails until reconfigured.
    return not 300 <= status < 400


def describe(response: httpx.Response, body: bytes) -> str:
    """A short reason for a refused delivery: status, the start of the body, Retry-After."""
    reason = f"HTTP {response.status_code}"
    if response.reason_phrase:
        reason += f" {response.reason_phrase}"
    excerpt = " ".join(body.decode(errors="replace").split())
    if excerpt:
        reason += f": {excerpt[:_EXCERPT]}"
    retry_after = response.headers.get("retry-after")
    if retry_after:
        reason += f" (Retry-After: {retry_after[:40]})"
    return reason


async def _post(
    client: httpx.AsyncClient, url: str, content: bytes, headers: Mapping[str, str], timeout: float
) -> None:
    async with client.stream(
        "POST", url, content=content, headers=headers, timeout=timeout
    ) as response:
        if response.is_success:
            return
        # Read only the start of a refusal: an endpoint's error page can be any size.
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= _EXCERPT * 4:
                break
        raise DeliveryFailed(
            describe(response, body), retryable=is_retryable_status(response.status_code)
        )


async def post(
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    timeout: float,
    client: httpx.AsyncClient | None,
) -> None:
    """POST ``content``; return on a 2xx answer, raise ``DeliveryFailed`` otherwise.

    ``timeout`` bounds the whole exchange: httpx's own timeout applies per phase (connect, each
    read), so a receiver trickling bytes could outlast it without the outer bound.
    """
    try:
        async with asyncio.timeout(timeout):
            if client is None:
                async with httpx.AsyncClient() as own:
                    await _post(own, url, content, headers, timeout)
            else:
                await _post(client, url, content, headers, timeout)
    except (TimeoutError, httpx.TimeoutException):
        raise DeliveryFailed(f"no answer within {timeout:g}s", retryable=True) from None
    except (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError) as exc:
        # The configured URL or our own request is unusable: no attempt can fix that.
        raise DeliveryFailed(
            f"cannot send to the configured URL ({type(exc).__name__})", retryable=False
        ) from exc
    except httpx.TransportError as exc:
        raise DeliveryFailed(
            f"connection failed: {str(exc) or type(exc).__name__}", retryable=True
        ) from exc
    except httpx.HTTPError as exc:  # e.g. an answer whose encoding cannot be decoded
        raise DeliveryFailed(f"unreadable answer ({type(exc).__name__})", retryable=True) from exc
