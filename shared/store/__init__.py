"""Storage: the ports and their models here (no driver imports), one package per adapter.

- ``shared/store/*.py``: the ports (``typing.Protocol``) and what they exchange;
- ``shared/store/mongo/``: MongoDB, Atlas and FerretDB (PyMongo's async API);
- ``shared/store/sqlite/``: SQLite files, for ``interlock dev``;
- ``shared/store/memory/``: in memory, for unit tests.

Each adapter imports only the ports and its own driver; the contract suite (``tests/contract``)
runs on all three.
"""
