"""API keys behave the same in memory and in MongoDB: hashed, scoped, revocable."""

from __future__ import annotations

from shared.store.api_keys import Role, authenticate, create_key
from shared.store.ports import Store


async def test_a_created_key_authenticates_and_only_its_hash_is_stored(store: Store) -> None:
    key, secret = await create_key(store.api_keys, project_id="p1", role=Role.OWNER, name="ci")
    assert secret.startswith(f"ilk_{key.key_id}_") and len(secret) > 50
    assert secret not in repr(await store.api_keys.get(key.key_id))
    found = await authenticate(store.api_keys, secret)
    assert found is not None and (found.project_id, found.role) == ("p1", Role.OWNER)


async def test_wrong_malformed_and_revoked_secrets_do_not_authenticate(store: Store) -> None:
    key, secret = await create_key(store.api_keys, project_id="p1", role=Role.MEMBER, name="m")
    tampered = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    for attempt in (
        tampered,
        "",
        "Bearer x",
        "ilk_",
        f"ilk_{key.key_id}",
        "ilk_zz_zz",
        secret + "x",
    ):
        assert await authenticate(store.api_keys, attempt) is None, attempt
    assert await store.api_keys.revoke("other-project", key.key_id) is False
    assert await store.api_keys.revoke("p1", key.key_id) is True
    assert await store.api_keys.revoke("p1", key.key_id) is True  # idempotent
    assert await authenticate(store.api_keys, secret) is None
    assert await store.api_keys.revoke("p1", "0123456789abcdef") is False


async def test_keys_are_listed_per_project(store: Store) -> None:
    for project, name in (("p1", "a"), ("p1", "b"), ("p2", "c")):
        await create_key(store.api_keys, project_id=project, role=Role.READ_ONLY, name=name)
    assert [k.name for k in await store.api_keys.list("p1")] == ["a", "b"]
    assert [k.name for k in await store.api_keys.list("p3")] == []


async def test_a_fixed_secret_is_for_the_bootstrap_key_and_must_look_like_one(store: Store) -> None:
    secret = "ilk_00000000000000de_development-only-key-for-make-dev-000000"
    key, returned = await create_key(
        store.api_keys, project_id="demo", role=Role.OWNER, name="dev", secret=secret
    )
    assert returned == secret and key.key_id == "00000000000000de"
    assert await authenticate(store.api_keys, secret) is not None
