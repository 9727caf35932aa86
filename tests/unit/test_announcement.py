"""What ``interlock dev`` / ``interlock up`` print once ready: the key and URLs come last."""

from __future__ import annotations

from interlock.announcement import READY_LINE, announcement

KEY = "ilk_00000000000000de_development-key-not-for-production-use-000"


def test_dev_mode_lists_every_url_and_ends_with_the_key() -> None:
    text = announcement("http://127.0.0.1:8100", KEY, effects_sink=True, log_hint="quiet logs")
    assert text.startswith(f"{READY_LINE}: http://127.0.0.1:8100\nquiet logs\n")
    for url in ("/docs", "/reviews", "/dev/effects"):
        assert f"http://127.0.0.1:8100{url}" in text
    assert "keys create --project demo --role PROJECT_OWNER" in text
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines[-2].strip() == KEY and lines[-1] == "Press Ctrl-C to stop."


def test_without_a_key_it_says_how_to_make_one_and_hosts_no_sink() -> None:
    text = announcement("http://127.0.0.1:8000", None)
    assert "ilk_" not in text and "/dev/effects" not in text
    assert "No API key yet" in text and "keys create" in text
