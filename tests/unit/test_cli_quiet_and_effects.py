"""``--quiet`` for shell variables, and ``interlock effects`` (the dev effects sink), against the
real gateway app in-process (the ``cli`` fixture of test_cli)."""

from __future__ import annotations

from interlock.effects_sink import EffectsLedger, effects_router
from tests.unit.test_cli import Cli, cli  # noqa: F401 (the fixture)


def test_invoke_quiet_prints_only_the_id_and_keeps_the_exit_code(cli: Cli) -> None:  # noqa: F811
    waiting = cli("invoke", "refund-approval", "Refund claim CLM-4821", "--quiet")
    assert waiting.exit_code == 3, waiting.output
    execution_id = waiting.stdout.strip()
    assert "\n" not in execution_id
    assert cli.api("GET", f"/executions/{execution_id}")["status"] == "suspended"
    both = cli("invoke", "refund-approval", "Refund claim CLM-4821", "--quiet", "--json")
    assert both.exit_code == 2 and "not both" in both.stderr


def test_effects_lists_what_the_sink_received(cli: Cli) -> None:  # noqa: F811
    missing = cli("effects")
    assert missing.exit_code == 2 and "only `interlock dev`" in missing.stderr, missing.output

    ledger = EffectsLedger(":memory:")
    cli.client.app.include_router(effects_router(ledger))  # type: ignore[attr-defined]
    ledger.apply("email", "exec-1:send_email:0", {"to": "p@example.com", "subject": "Stage 1"})
    ledger.apply("email", "exec-1:send_email:0", {"to": "p@example.com", "subject": "Stage 1"})
    ledger.apply("payment", "exec-2:pay:0", {"amount": 240})

    shown = cli("effects")
    assert shown.exit_code == 0, shown.output
    assert "3 received, 2 took effect" in shown.stdout
    assert "Stage 1 to p@example.com" in shown.stdout and '"amount": 240' in shown.stdout
    # Two "applied" rows and one repeat (whose outcome says "applied" too).
    assert shown.stdout.count("repeat: not applied again") == 1
    assert shown.stdout.count("applied") == 3
