"""What a run keeps with its checkpoint: the execution's durable steps, so the next run gets them
with the checkpoint it reads anyway, instead of a query by ``execution_id`` (FerretDB scans a
collection for any filter but ``_id``), and the attempt that wrote it, so a superseded attempt
that writes over a newer one's checkpoint finds out, puts it back and stops (``may_replace``).

Each step is still stored on its own the moment it completes (``interlock/sdk/``): the index is
a copy for reading, written with the checkpoint when the run exits. A run that died before its
checkpoint left its steps stored but not indexed: the next attempt of that epoch looks up by key
what the index does not list (``StepRun.read_on_miss``). An index too large to keep with the
checkpoint is left out, and the next run loads the steps with the query.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from interlock.sdk.runtime import StepRun
from shared.store.ports import StepRecord

MAX_INDEX_BYTES = 256 * 1024
"""Beyond this the index stays out of the checkpoint (MongoDB caps a document at 16 MiB)."""


class StepIndex:
    def __init__(self) -> None:
        self.run: StepRun | None = None

    def kept(self) -> dict[str, Any]:
        """What goes with the checkpoint: every step the run knows (those it was given, served
        or stored), or ``None`` for the steps when they are too large to carry (the next run
        then loads them by query)."""
        if self.run is None:
            return {"steps": None}
        attempt = [self.run.epoch, self.run.attempt]
        steps = [record.model_dump(mode="json") for record in list(self.run.cache.values())]
        if len(json.dumps(steps)) > MAX_INDEX_BYTES:
            return {"steps": None, "attempt": attempt}
        return {"steps": steps, "attempt": attempt}

    def may_replace(self, kept: dict[str, Any] | None) -> bool:
        """May this run's checkpoint replace a head that kept ``kept``? Not one a newer attempt
        (of this epoch or a later one) wrote: this run was superseded."""
        theirs = (kept or {}).get("attempt")
        if self.run is None or not isinstance(theirs, list) or len(theirs) != 2:
            return True
        return (int(theirs[0]), int(theirs[1])) <= (self.run.epoch, self.run.attempt)

    @staticmethod
    def read(kept: dict[str, Any] | None) -> dict[str, StepRecord] | None:
        """The steps a checkpoint lists: empty when there is no checkpoint yet (none stored
        but by a crashed attempt of this epoch); None when it lists none and they must be
        loaded by query."""
        if kept is None:
            return None
        if kept == {}:
            return {}
        steps = kept.get("steps")
        if not isinstance(steps, list):
            return None
        try:
            records = [StepRecord.model_validate(step) for step in steps]
        except ValidationError:
            return None
        return {record.key: record for record in records}
