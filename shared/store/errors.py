"""Errors every store adapter raises for the same reasons, whatever its driver."""

from __future__ import annotations

from shared.errors import Transient


class StoreUnavailable(Transient):
    """The database did not answer or refused the operation for a transient reason."""
