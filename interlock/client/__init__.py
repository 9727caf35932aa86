"""The reviewer CLI's client side: gateway HTTP client, configuration, rendering, review prompts.

Only ``interlock.cli`` imports the Typer commands (``commands``); the rest is plain Python so it
can be reused (and tested) without a terminal.
"""
