"""Interlock's Python package beside the services.

- ``interlock.sdk``: what agent authors import (durable steps, the review policy);
- the ``interlock`` command (``cli.py``): run a service or all four in one process
  (``dev.py``), create topics and indexes, manage API keys, and start, watch and review
  executions (``client/``, on the HTTP API).
"""
