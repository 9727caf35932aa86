"""Storage ports and their adapters (MongoDB, in-memory)."""
