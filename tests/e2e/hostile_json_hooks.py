"""Schemathesis hooks for the fuzz test's hostile run (``SCHEMATHESIS_HOOKS``): every JSON body
it generates is sent with ``1e400``, ``-1e400`` or ``"\\ud800"`` in it (issue 31: Python's json
reads the first two as infinities and the last as a lone surrogate, and each was a 500), as the
whole body, as the value of each of its fields in turn, or deep inside one; and the check
``hostile_json_is_a_400`` asks for the 400 problem that names it.

The values are JSON text that no Python value serializes to (``json.dumps`` writes an infinity
as ``Infinity``), so the body is generated with a placeholder string where the value goes and
sent as bytes with the value written in."""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from hypothesis import strategies as st

from services.gateway.limits import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_JSON_STRING

HOSTILE = {
    b"1e400": "json-number-out-of-range",
    b"-1e400": "json-number-out-of-range",
    b'"\\ud800"': "json-unpaired-surrogate",
}
"""Each value, as JSON text, and the problem type it is answered with."""

PLACEHOLDER = "\x00hostile-json\x00"
PLACEHOLDER_JSON = json.dumps(PLACEHOLDER).encode()
PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://interlock.dev/problems/"


def placements(body: Any) -> list[Any]:
    """``body`` with the placeholder as the whole of it, as each field's value, and one level
    down in each field that is an object (a thread's metadata, a command's resume...)."""
    placed: list[Any] = [PLACEHOLDER]
    if isinstance(body, dict):
        for key, value in body.items():
            placed.append({**body, key: PLACEHOLDER})
            if isinstance(value, dict):
                placed.append({**body, key: {**value, "probe": PLACEHOLDER}})
            elif isinstance(value, list):
                placed.append({**body, key: [*value, PLACEHOLDER]})
        placed.append({**body, "probe": {"deep": [PLACEHOLDER]}})
    elif isinstance(body, list):
        placed.append([*body, PLACEHOLDER])
    return placed


def written(body: Any, value: bytes) -> bytes:
    return json.dumps(body).encode().replace(PLACEHOLDER_JSON, value)


def hostile_value_of(body: object) -> bytes | None:
    """Which hostile value a body sent by this module carries (None: not one of ours)."""
    if not isinstance(body, bytes):
        return None
    for value in sorted(HOSTILE, key=len, reverse=True):
        if value in body:
            return value
    return None


def longest_string(value: Any) -> int:
    """The length in characters of the longest string or key anywhere in a parsed body."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max((max(len(k), longest_string(v)) for k, v in value.items()), default=0)
    if isinstance(value, list):
        return max(map(longest_string, value), default=0)
    return 0


def problems_in(body: bytes) -> set[str]:
    """Every problem a body of ours may rightly be answered with: the gateway names the first
    limit it finds, and a generated body may break one more than ours (a string past the
    gateway's length limit, which its scan tries first)."""
    problems = set(HOSTILE.values())
    if longest_string(json.loads(body)) > DEFAULT_MAX_JSON_STRING:
        problems.add("json-string-too-long")
    return problems


@schemathesis.hook
def flatmap_body(context: schemathesis.HookContext, body: Any) -> st.SearchStrategy[Any]:
    try:
        json.dumps(body)
    except (TypeError, ValueError):
        return st.just(body)  # not a JSON body: nothing to put a value in
    return st.tuples(st.sampled_from(placements(body)), st.sampled_from(sorted(HOSTILE))).map(
        lambda chosen: written(*chosen)
    )


@schemathesis.check
def hostile_json_is_a_400(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case[Any]
) -> bool | None:
    # Schemathesis reads a true result as "skipped" and records only the checks that ran: the
    # test counts the runs of this one per operation.
    value = hostile_value_of(case.body)
    if value is None:
        return True
    assert isinstance(case.body, bytes)
    slug = HOSTILE[value]
    sent = f"{value.decode()} in {case.body!r}"[:300]
    if len(case.body) > DEFAULT_MAX_BODY_BYTES:
        # A generated string of escapes (``\\u0098`` is six bytes a character) can pass the
        # body's cap while its characters stay under the string limit: the gateway refuses the
        # size before it reads a byte, which is the answer then.
        if response.status_code != 413:
            raise AssertionError(f"{response.status_code}, not 413, for {len(case.body)} bytes")
        return None
    if response.status_code != 400:
        raise AssertionError(f"{response.status_code}, not 400, for {sent}: {response.text[:300]}")
    content_type = response.headers.get("content-type", [])
    if content_type != [PROBLEM_JSON]:
        raise AssertionError(f"content type {content_type} for {sent}")
    problem = response.json()
    # A generated body may hold a value of the same kind already (a 25-digit integer, a lone
    # surrogate in a key) or an over-long string, which the scan may name first.
    if problem.get("type") not in {TYPE_BASE + slug for slug in problems_in(case.body)}:
        raise AssertionError(f"problem {problem.get('type')}, not {slug}, for {sent}")
    return None
