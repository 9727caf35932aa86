"""SQLite adapter of the store ports, for the single-process ``interlock dev`` mode.

Passes the same contract suite (tests/contract) as the in-memory fake and the MongoDB adapter.
Like the MongoDB adapter it keeps each whole model as JSON text in a ``body`` column (agent data
can have any keys) and copies out only the fields that queries filter or sort on. Every write
is one statement, which SQLite makes atomic: the compare-and-set on executions is an ``UPDATE``
conditional on the version, and first-writer-wins records (claims, steps, approvals) are an
``INSERT ... ON CONFLICT DO NOTHING`` under a primary key, read back when it changed nothing.
"""

from shared.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
