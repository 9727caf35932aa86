"""A loopback HTTP service that records side effects with their idempotency keys.

``POST /effects/{kind}`` with an ``Idempotency-Key`` header applies the effect the first time a
key is seen and only records an attempt after that (as payment and email APIs do).
``GET /calls`` returns every call; ``POST /reset`` forgets them. Run it as a process:
``python -m tests.e2e.effects_server PORT [DELAY_MS]``. With a delay, an effect is applied at
once and answered only after the delay, as a slow remote API's would: a caller that dies
meanwhile has had its effect applied without knowing it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_lock = threading.Lock()
_calls: list[dict[str, Any]] = []
_applied: dict[str, str] = {}
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
        with _lock:
            self._reply(200, {"calls": list(_calls)})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/reset":
            with _lock:
                _calls.clear()
                _applied.clear()
            self._reply(200, {})
            return
        if not self.path.startswith("/effects/"):
            self._reply(404, {"error": "not found"})
            return
        key = self.headers.get("Idempotency-Key")
        if not key:
            self._reply(400, {"error": "Idempotency-Key header required"})
            return
        with _lock:
            applied = key not in _applied
            if applied:
                _applied[key] = f"msg-{uuid.uuid4().hex[:12]}"
            _calls.append(
                {
                    "kind": self.path.removeprefix("/effects/"),
                    "key": key,
                    "body": body,
                    "applied": applied,
                }
            )
            message_id = _applied[key]
        time.sleep(_delay_seconds)
        self._reply(200, {"message_id": message_id, "applied": applied})


def main() -> None:
    global _delay_seconds
    _delay_seconds = float(sys.argv[2]) / 1000 if len(sys.argv) > 2 else 0.0
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
