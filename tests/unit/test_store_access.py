"""The declaration of who may do what on which collection (shared/store/access.py) is whole and
well-formed, and the roles file the MongoDB sidecar reads is the one it renders.

When the roles file check fails after a change to shared/store/access.py: ``make store-roles``
(``python -m scripts.store_roles``) rewrites deploy/k8s/base/mongodb/service-roles.json; commit
the result. What each process really sends is checked end to end by
tests/e2e/test_store_access.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

from scripts import store_roles
from shared.store.access import (
    ACTIONS,
    CREATE_COLLECTION,
    CREATE_INDEX,
    DEVELOPMENT_GRANTS,
    PRINCIPALS,
    SERVICES,
)

REPO = Path(__file__).resolve().parents[2]
ADAPTERS = [
    *sorted((REPO / "shared" / "store" / "mongo").glob("*.py")),
    REPO / "services" / "sandbox" / "mongo_checkpoints.py",
]
SANDBOX_MUST_NOT_REACH = {
    "api_keys",
    "approvals",
    "approval_slots",
    "decision_claims",
    "spent_links",
    "notification_deliveries",
    "notification_outbox",
    "notification_claims",
    "threads",
    "store_migrations",
}


def string_constants(tree: ast.Module) -> dict[str, str]:
    """The module's ``NAME = "text"`` assignments, and those it imports from the repository's
    own modules (``from shared.store.mongo.checkpoint_erasure import CHECKPOINTS``)."""
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or node.module is None:
            continue
        source = REPO / (node.module.replace(".", "/") + ".py")
        if not source.is_file():
            continue
        theirs = string_constants(ast.parse(source.read_text(encoding="utf-8")))
        constants |= {a.asname or a.name: theirs[a.name] for a in node.names if a.name in theirs}
    return constants


def collections_named_in(path: Path) -> set[str]:
    """Every ``database["name"]`` (or ``database[NAME]``, a constant of the module or imported
    by it) in one adapter."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = string_constants(tree)
    named = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            continue
        if node.value.id != "database":
            continue
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            named.add(node.slice.value)
        elif isinstance(node.slice, ast.Name):
            named.add(constants[node.slice.id])
    return named


def all_named() -> set[str]:
    return set().union(*(collections_named_in(path) for path in ADAPTERS))


def declared() -> set[str]:
    return {c for grants in PRINCIPALS.values() for c in grants} | {
        c for grants in DEVELOPMENT_GRANTS.values() for c in grants
    }


def test_the_adapters_are_read_for_collections() -> None:
    # The parse finds the collections of both kinds of adapter (literal and constant names).
    assert {"executions", "approval_slots", "notification_outbox"} <= all_named()
    assert {"checkpoint_heads", "checkpoint_writes"} <= all_named()


def test_every_collection_the_adapters_name_is_declared_and_nothing_else() -> None:
    named = all_named()
    assert named - declared() == set(), "collections no principal may reach: declare them"
    assert declared() - named == set(), "declared collections no adapter names: a typo?"


def test_every_grant_is_a_known_action_and_none_is_empty() -> None:
    for principal, grants in [*PRINCIPALS.items(), *DEVELOPMENT_GRANTS.items()]:
        for collection, actions in grants.items():
            assert actions, f"{principal}: no action on {collection}"
            assert actions <= ACTIONS, f"{principal} on {collection}: {actions - ACTIONS}"


def test_only_the_migrator_and_the_keys_command_manage_indexes() -> None:
    for principal, grants in PRINCIPALS.items():
        managing = {
            c for c, actions in grants.items() if {CREATE_INDEX, CREATE_COLLECTION} & actions
        }
        if principal == "keys":
            assert managing == {"api_keys"}
        elif principal != "migrator":
            assert managing == set(), f"{principal} manages {managing}: that is the migrator's"


def test_every_service_has_a_principal_and_development_widens_only_the_gateway() -> None:
    assert set(SERVICES) <= set(PRINCIPALS)
    assert set(DEVELOPMENT_GRANTS) == {"gateway"}
    assert set(DEVELOPMENT_GRANTS["gateway"]) == {"api_keys"}


def test_the_sandbox_reaches_no_key_approval_claim_link_or_notification() -> None:
    reached = set(PRINCIPALS["sandbox"]) | set(DEVELOPMENT_GRANTS.get("sandbox", {}))
    assert reached & SANDBOX_MUST_NOT_REACH == set()


def test_the_committed_roles_file_is_what_the_declaration_renders() -> None:
    committed = store_roles.PATH.read_text(encoding="utf-8")
    assert committed == store_roles.render(), (
        f"{store_roles.PATH.relative_to(REPO)} is stale: run `make store-roles` and commit it"
    )
