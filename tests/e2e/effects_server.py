"""A loopback HTTP service that records side effects with their idempotency keys.

``POST /effects/{kind}`` with an ``Idempotency-Key`` header applies the effect the first time a
key is seen and only records an attempt after that (as payment and email APIs do): the ledger is
the dev effects sink's (``interlock/effects_sink.py``), kept in memory. ``GET /calls`` returns
every call. Run it as a process: ``python -m tests.e2e.effects_server PORT [DELAY_MS]``. With a
delay, an effect is applied at once and answered only after the delay, as a slow remote API's
would: a caller that dies meanwhile has had its effect applied without knowing it. (A plain
threaded server rather than the sink's FastAPI router: a delayed answer holds only its thread.)
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from interlock.effects_sink import EffectsLedger

_ledger = EffectsLedger(":memory:")
_delay_seconds = 0.0


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return  # keep the test output clean

    def _reply(self, status: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        # A caller killed while it waited (the chaos scenarios do that) is gone: nothing to tell.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(payload)

    def do_GET(self) -> None:
        if self.path != "/calls":
            self._reply(404, {"error": "not found"})
            return
        self._reply(200, _ledger.calls().model_dump(mode="json"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.startswith("/effects/"):
            self._reply(404, {"error": "not found"})
            return
        key = self.headers.get("Idempotency-Key")
        if not key:
            self._reply(400, {"error": "Idempotency-Key header required"})
            return
        answer = _ledger.apply(self.path.removeprefix("/effects/"), key, body)
        time.sleep(_delay_seconds)
        self._reply(200, answer.model_dump())


def main() -> None:
    global _delay_seconds
    _delay_seconds = float(sys.argv[2]) / 1000 if len(sys.argv) > 2 else 0.0
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
