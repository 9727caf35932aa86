"""Pure domain logic shared by the gateway and the orchestrator: no I/O here."""
