"""Who may do what on which MongoDB collection: the least privileges of each Interlock process.

Each service connects as a user of its own whose role grants exactly these actions
(deploy/k8s/base/mongodb/service-roles.json is rendered from here, ``make store-roles``), so a
compromised process reaches only what its code uses. The sandbox runs agent code: it can read
and write executions' working data (steps, attempts, progress, checkpoints) and read
executions, nothing of keys, approvals, decision claims, links or notifications.

The actions are MongoDB's privilege actions, and follow from the commands the adapters send
(shared/store/mongo/, services/sandbox/mongo_checkpoints.py):

- ``find``: find, getMore, count and aggregate; also the query part of findAndModify;
- ``insert``: insert, and every upsert (``replace_one`` / ``update_one`` / findAndModify with
  ``upsert=True``), which may insert;
- ``update``: update and findAndModify;
- ``remove``: delete;
- ``createIndex`` / ``createCollection``: only the migrator's (``interlock store init``).

tests/e2e/test_store_access.py runs the flows on separate processes and checks every command
each one sent against this; tests/unit/test_store_access.py that every collection the adapters
name is declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FIND = "find"
INSERT = "insert"
UPDATE = "update"
REMOVE = "remove"
CREATE_INDEX = "createIndex"
CREATE_COLLECTION = "createCollection"

ACTIONS = frozenset({FIND, INSERT, UPDATE, REMOVE, CREATE_INDEX, CREATE_COLLECTION})

Grants = Mapping[str, frozenset[str]]
"""collection -> privilege actions."""


def grant(**collections: tuple[str, ...]) -> dict[str, frozenset[str]]:
    return {name: frozenset(actions) for name, actions in collections.items()}


def union(*grants: Grants) -> dict[str, frozenset[str]]:
    merged: dict[str, frozenset[str]] = {}
    for one in grants:
        for collection, actions in one.items():
            merged[collection] = merged.get(collection, frozenset()) | actions
    return merged


# --- what each port's operations need (shared/store/ports.py) -------------------------------

EXECUTION_READS = grant(
    # A read writes the head it found trailing the log (findAndModify, upsert).
    executions=(FIND, UPDATE, INSERT),
    execution_versions=(FIND,),
)
EXECUTION_CREATES = grant(executions=(INSERT,))  # the head, insert-if-absent
UNDELIVERED_MARKS = grant(
    # The gateway's only compare-and-set: a request it could not publish is marked (and the
    # mark cleared on a retry), a pending execution's next version and its marker.
    execution_versions=(INSERT,),
    undelivered_executions=(INSERT, UPDATE, REMOVE),
)
EXECUTION_TRANSITIONS = grant(
    # Every compare-and-set: the next version, and once an execution ends its older versions
    # cut down to stubs (update); the waiting markers (markers.py) upserted around a version's
    # write and removed after it.
    execution_versions=(INSERT, UPDATE),
    suspended_executions=(INSERT, UPDATE, REMOVE),
    undelivered_executions=(INSERT, UPDATE, REMOVE),
)
PENDING_REVIEWS = grant(
    # The list reads the suspension markers and removes stale ones.
    suspended_executions=(FIND, REMOVE),
)
SWEEPS = grant(
    # Deadlines and undelivered requests read their markers, repair or remove them.
    suspended_executions=(FIND, INSERT, UPDATE, REMOVE),
    undelivered_executions=(FIND, REMOVE),
)
DECISION_CLAIMS = grant(decision_claims=(FIND, INSERT))
APPROVALS = grant(
    # Insert-only: an approval, then its slot; read back by _id.
    approvals=(FIND, INSERT),
    approval_slots=(FIND, INSERT),
)
KEY_READS = grant(api_keys=(FIND,))
SPENT_LINKS = grant(spent_links=(FIND, INSERT))
THREADS = grant(
    # Created by insert; a metadata update, a turn's note and the deletion mark are updates of
    # the one document (findAndModify or update, by _id), after a read.
    threads=(FIND, INSERT, UPDATE),
)
THREAD_RETENTION = grant(
    # The sweep: the expired threads (a find), each given a later expiry (an update) or marked
    # deleted (find, findAndModify, by _id, no upsert); a tombstone's erasure said done (an
    # update), by the sweep and by the handler of thread.delete_requested.
    threads=(FIND, UPDATE),
)
MEMORIES = grant(
    # Agents' memory (shared/store/mongo/memories.py): a put is an upsert by _id, a refreshing
    # read a bulk update of expiries, a delete by _id. The gateway serves LangGraph's /store
    # routes; the sandbox hands the store to every graph.
    agent_memories=(FIND, INSERT, UPDATE, REMOVE),
)
MEMORY_EXPIRY = grant(agent_memories=(FIND, REMOVE))  # the sweep: expired items, deleted by _id
CRONS = grant(
    # LangGraph's /runs/crons routes (shared/store/mongo/crons.py): a cron is inserted under its
    # id, changed by a $set of named fields, deleted by _id.
    crons=(FIND, INSERT, UPDATE, REMOVE),
)
CRON_SWEEP = grant(
    # The orchestrators' sweep (services/orchestrator/crons.py): the crons due (a find), moved
    # on (an update); a tick's claim inserted under its id, read back while unstarted, marked
    # started; the thread a stateless tick runs on, created (an insert, a read on a conflict);
    # a thread tick's turn noted on its thread (an update: THREAD_RETENTION's).
    crons=(FIND, UPDATE),
    cron_ticks=(FIND, INSERT, UPDATE, REMOVE),  # and old started claims deleted by _id
    threads=(FIND, INSERT),
)
AGENT_VERSION_READS = grant(agent_versions=(FIND,))
AGENT_VERSION_PUBLISH = grant(agent_versions=(INSERT, UPDATE))  # replace_one, upsert
PROGRESS_READS = grant(execution_progress=(FIND,))
PROGRESS_APPENDS = grant(execution_progress=(INSERT,))
STEPS = grant(steps=(FIND, INSERT))
ATTEMPTS = grant(attempts=(FIND, INSERT))
CHECKPOINTS = grant(
    # A head is replaced with findAndModify (upsert), put back by a fenced run, and archived
    # into checkpoints (upsert); write sets are insert-only. adelete_thread (remove) is on no
    # path of the sandbox, so no remove.
    checkpoint_heads=(FIND, INSERT, UPDATE),
    checkpoints=(FIND, INSERT, UPDATE),
    checkpoint_write_sets=(FIND, INSERT),
    checkpoint_writes=(FIND,),  # the point-read saver's, read only
)
NOTIFICATION_READS = grant(notification_deliveries=(FIND,))
NOTIFICATION_DELIVERY = grant(
    # The outbox is the notifier's queue; the history is upserted; claims are insert-only.
    notification_outbox=(FIND, INSERT, UPDATE, REMOVE),
    notification_deliveries=(FIND, INSERT, UPDATE),
    notification_claims=(INSERT,),
)
ERASURE = grant(
    # Erasing ended executions (shared/store/mongo/erasure.py): one delete per collection, by
    # key; a delete's filter needs no find.
    executions=(REMOVE,),
    execution_versions=(REMOVE,),
    suspended_executions=(REMOVE,),
    undelivered_executions=(REMOVE,),
    decision_claims=(REMOVE,),
    steps=(REMOVE,),
    attempts=(REMOVE,),
    execution_progress=(REMOVE,),
    approvals=(REMOVE,),
    approval_slots=(REMOVE,),
    spent_links=(REMOVE,),
    notification_outbox=(REMOVE,),
    notification_deliveries=(REMOVE,),
    notification_claims=(REMOVE,),
    # And their LangGraph checkpoints (shared/store/mongo/checkpoint_erasure.py), by thread.
    checkpoints=(REMOVE,),
    checkpoint_heads=(REMOVE,),
    checkpoint_write_sets=(REMOVE,),
    checkpoint_writes=(REMOVE,),
)
INDEXED = (
    "executions",
    "execution_versions",
    "suspended_executions",
    "undelivered_executions",
    "steps",
    "attempts",
    "api_keys",
    "execution_progress",
    "notification_outbox",
    "notification_deliveries",
    "threads",
    "spent_links",  # by execution, for erasing
    "agent_memories",
    "crons",
    "cron_ticks",
)
"""The collections ``ensure_indexes`` gives indexes (creating the collection if need be)."""
MIGRATIONS = grant(
    # The adoptions and backfills each ensure_indexes runs (shared/store/mongo/*.py).
    store_migrations=(FIND, INSERT, UPDATE),
    executions=(FIND,),
    suspended_executions=(INSERT, UPDATE),
    undelivered_executions=(INSERT, UPDATE),
    approvals=(FIND, UPDATE),
    approval_slots=(FIND, INSERT),
    notification_deliveries=(FIND,),
    notification_outbox=(INSERT,),
    threads=(FIND, INSERT, UPDATE),
)

# --- each process -----------------------------------------------------------------------------

PRINCIPALS: dict[str, dict[str, frozenset[str]]] = {
    "gateway": union(
        KEY_READS,
        EXECUTION_READS,
        EXECUTION_CREATES,  # invoke
        UNDELIVERED_MARKS,
        PENDING_REVIEWS,
        DECISION_CLAIMS,
        APPROVALS,
        SPENT_LINKS,
        THREADS,
        MEMORIES,
        CRONS,
        AGENT_VERSION_READS,
        PROGRESS_READS,
        NOTIFICATION_READS,
    ),
    "orchestrator": union(
        # It creates the executions outside producers request, and makes every transition.
        EXECUTION_READS,
        EXECUTION_CREATES,
        EXECUTION_TRANSITIONS,
        SWEEPS,
        DECISION_CLAIMS,
        ERASURE,  # a deleted thread's ended turns
        THREAD_RETENTION,  # threads past their ttl
        MEMORY_EXPIRY,  # memory items past their ttl
        CRON_SWEEP,  # scheduled runs
    ),
    "sandbox": union(
        EXECUTION_READS,
        STEPS,
        ATTEMPTS,
        PROGRESS_APPENDS,
        AGENT_VERSION_PUBLISH,
        CHECKPOINTS,
        MEMORIES,
    ),
    "notifier": NOTIFICATION_DELIVERY,
    # `interlock store init`, the store-init init container of every pod: the indexes and the
    # migrations, which the services then need not be allowed to run.
    "migrator": union(
        grant(**{name: (CREATE_INDEX, CREATE_COLLECTION) for name in INDEXED}), MIGRATIONS
    ),
    # `interlock keys create / list / revoke`, run by an operator: the keys and nothing else.
    "keys": grant(api_keys=(FIND, INSERT, UPDATE, CREATE_INDEX)),
}
"""Every process's privileges: collection -> actions."""

DEVELOPMENT_GRANTS: dict[str, dict[str, frozenset[str]]] = {
    # With INTERLOCK_DEV_API_KEY (the development environment only) the gateway stores the
    # well-known development key at start-up: an upsert.
    "gateway": grant(api_keys=(INSERT, UPDATE)),
}
"""Added to a principal's role only where the deployment runs in development."""

SERVICES = ("gateway", "orchestrator", "sandbox", "notifier")


def user_of(principal: str) -> str:
    """The MongoDB user (and role) name of a principal."""
    return f"interlock-{principal}"


def roles_document() -> dict[str, Any]:
    """What deploy/k8s/base/mongodb/service-roles.json holds: per principal its user and role
    name and its privileges (collection -> sorted actions), for init-replset.js."""

    def privileges(grants: Grants) -> dict[str, list[str]]:
        return {collection: sorted(grants[collection]) for collection in sorted(grants)}

    return {
        "principals": {
            principal: {
                "user": user_of(principal),
                "role": user_of(principal),
                "privileges": privileges(grants),
                "development_privileges": privileges(DEVELOPMENT_GRANTS.get(principal, {})),
            }
            for principal, grants in PRINCIPALS.items()
        }
    }
