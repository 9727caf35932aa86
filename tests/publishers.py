"""A publisher for unit tests: keeps what was published, in order, instead of sending it."""

from __future__ import annotations

from pydantic import BaseModel


class RecordingPublisher:
    def __init__(self) -> None:
        self.published: list[BaseModel] = []

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        self.published.append(event)
