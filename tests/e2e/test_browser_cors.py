"""A real browser's CORS, against ``interlock dev``: headless Chromium loads a page served from
another origin than the gateway's, whose script calls the LangGraph API as LangChain's UIs do
(``/info`` with no key; ``threads.create`` with ``x-api-key`` and JSON, which needs a
preflight; a run whose ``Content-Location`` it reads; a search sent as ``text/plain``). From a
page of this machine (development's default) every call succeeds and every header it reads is
there; from a page of another origin (127.0.0.2, which development does not allow) the browser
blocks what needs a key. Nothing here trusts our reading of the CORS rules: Chromium applies
them."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.test_review_page import browser  # noqa: F401 -- the headless Chromium fixture
from tests.ports import free_port
from tests.quickstart.test_dev_mode import FLOWS_RATE, KEY, Dev

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PAGE = """<!doctype html>
<html><body><pre id="result"></pre><script>
const params = new URLSearchParams(location.search);
const api = params.get("api");
const key = params.get("key");
async function attempt(name, call) {
  try {
    return [name, await call()];
  } catch (error) {
    return [name, `blocked: ${error.name}`];
  }
}
async function main() {
  const results = Object.fromEntries([
    await attempt("info", async () => (await fetch(`${api}/info`)).status),
    await attempt("create", async () => {
      const answer = await fetch(`${api}/threads`, {
        method: "POST",
        headers: { "x-api-key": key, "content-type": "application/json" },
        body: JSON.stringify({ metadata: { from: "browser" } }),
      });
      const thread = await answer.json();
      const run = await fetch(`${api}/threads/${thread.thread_id}/runs`, {
        method: "POST",
        headers: { "x-api-key": key, "content-type": "application/json" },
        body: JSON.stringify({
          assistant_id: "refund-approval",
          input: { messages: [{ role: "user", content: "Refund claim CLM-4821" }] },
        }),
      });
      return { status: run.status, location: run.headers.get("Content-Location") };
    }),
    await attempt("search", async () => {
      const answer = await fetch(`${api}/threads/search`, {
        method: "POST",
        headers: { "x-api-key": key, "content-type": "text/plain;charset=UTF-8" },
        body: JSON.stringify({ metadata: { from: "browser" } }),
      });
      return { status: answer.status, found: (await answer.json()).length };
    }),
  ]);
  document.getElementById("result").textContent = JSON.stringify(results);
}
main();
</script></body></html>
"""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    running = Dev(tmp_path_factory.mktemp("dev-browser") / "data", extra_env=FLOWS_RATE)
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The page, served from two origins: this machine by name, and 127.0.0.2."""
    folder = tmp_path_factory.mktemp("page")
    (folder / "page.html").write_text(PAGE)
    handler = functools.partial(_QuietHandler, directory=str(folder))
    servers = {}
    for name, host in (("local", "127.0.0.1"), ("other", "127.0.0.2")):
        server = http.server.ThreadingHTTPServer((host, free_port()), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[name] = server
    port = {name: server.server_address[1] for name, server in servers.items()}
    try:
        yield {
            "local": f"http://localhost:{port['local']}/page.html",
            "other": f"http://127.0.0.2:{port['other']}/page.html",
        }
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """The test reads what the page did, not the server's log."""


def results(driver: WebDriver, page: str, dev: Dev) -> dict[str, Any]:
    api = f"{dev.url}/langgraph/projects/demo/workspaces/default"
    driver.get(f"{page}?api={api}&key={KEY}")
    shown = WebDriverWait(driver, 60).until(lambda d: d.find_element(By.ID, "result").text or None)
    answered: dict[str, Any] = json.loads(shown)
    return answered


def test_a_page_of_this_machine_calls_the_langgraph_api_in_development(
    browser: WebDriver,  # noqa: F811 -- the fixture imported above
    dev: Dev,
    pages: dict[str, str],
) -> None:
    answered = results(browser, pages["local"], dev)
    assert answered["info"] == 200, answered
    assert answered["create"]["status"] == 200, answered
    # Exposed: the JS client's onRunCreated reads the run from it.
    assert "/runs/" in (answered["create"]["location"] or ""), answered
    assert answered["search"] == {"status": 200, "found": 1}, answered


def test_a_page_of_another_origin_is_blocked_by_the_browser(
    browser: WebDriver,  # noqa: F811
    dev: Dev,
    pages: dict[str, str],
) -> None:
    answered = results(browser, pages["other"], dev)
    # x-api-key is no header a page may send without asking: the gateway refuses the preflight
    # and the call never leaves the browser. Even /info, which asks nothing, cannot be read.
    assert answered["create"] == "blocked: TypeError", answered
    assert answered["search"] == "blocked: TypeError", answered
    assert answered["info"] == "blocked: TypeError", answered
