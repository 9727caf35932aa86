"""Example agents shipped with Interlock, registered in ``agents.toml``."""
