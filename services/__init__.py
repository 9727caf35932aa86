"""Interlock's four services. Each imports ``shared``, never another service."""
