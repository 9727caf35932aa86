"""The MongoDB adapter (PyMongo's async API) of every store port. Runs on MongoDB, Atlas and
FerretDB.

Only broadly supported operations are used: single-document CRUD, unique indexes,
``find_one_and_update``-style conditional writes and simple sorted finds. No transactions and no
change streams.

Fields that queries filter or sort on are top-level; the whole model is kept as a JSON string in
``body``. Agents put arbitrary keys into inputs, suspend contexts
and results, and servers differ on keys containing ``.`` or starting with ``$`` (FerretDB rejects
them), so agent-provided data never becomes document keys.
"""

from shared.store.errors import StoreUnavailable
from shared.store.mongo.store import Document, MongoStore

__all__ = ["Document", "MongoStore", "StoreUnavailable"]
