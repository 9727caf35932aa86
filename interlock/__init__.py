"""The ``interlock`` command: run a service, create topics, and (later) review executions."""
