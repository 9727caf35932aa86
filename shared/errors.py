"""The root of Interlock's exceptions. Each error knows whether retrying can help."""

from __future__ import annotations


class InterlockError(Exception):
    """Base of every error Interlock raises on purpose."""

    retryable: bool = False


class RetryableError(InterlockError):
    """A dependency (broker, database) failed; the same message may succeed later."""

    retryable = True


class RejectedMessage(InterlockError):
    """A message that can never be processed: it goes to the dead-letter topic with ``reason``."""

    retryable = False

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ConcurrencyConflict(RetryableError):
    """A compare-and-set lost a race; re-reading and re-applying resolves it."""


class Fenced(InterlockError):
    """This attempt was superseded by a newer one (another replica took over): it must stop
    without writing anything more. Not retryable: the newer attempt does the work."""
