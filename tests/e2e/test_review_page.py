"""The Pending Reviews page (``/reviews``) in headless Chromium, against the four services as
separate processes over real Kafka and FerretDB.

A reviewer signs in with an API key, sees an execution appear in the list without reloading
(with a line of its context), opens its Review Request window, decides, and follows it to its
outcome, told in words; the API then shows what the page sent. Signing out forgets the key; a
long argument wraps inside its box; invisible characters (bidi controls, NUL) show as <U+XXXX>.

Chromium and chromedriver come from Debian's packages (``scripts/test.sh`` installs them);
without them these tests fail, they do not skip. Each test uses a workspace of
its own, so the list shows only the executions it started. Screenshots go to
``INTERLOCK_TEST_ARTIFACTS`` (default ``.artifacts/``), and so does the page of a failed test.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn
from pydantic import BaseModel
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from interlock.dev import DEV_API_KEY
from services.gateway import app as gateway_app
from services.gateway.app import DEV_PROJECT, GatewaySettings, create_app
from shared.store.memory import InMemoryStore
from tests.e2e.cluster import REPO, Cluster
from tests.e2e.conftest import ledger_entries
from tests.ports import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

T = TypeVar("T")

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",  # root in a container: Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1100",
]
PROJECT = "proj-reviews-page"
WAIT = 60.0
"""Seconds any one expected change of the page may take: the machine is shared with other e2e
runs, and an execution first has to travel through Kafka, the orchestrator and the sandbox."""
SESSION_KEY = "interlock.reviews.session"
ARTIFACTS = Path(os.environ.get("INTERLOCK_TEST_ARTIFACTS") or REPO / ".artifacts")


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
def browser(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[WebDriver]:
    """A fresh headless Chromium (its own profile) per test, driven by Debian's chromedriver."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(
            f"the review page tests need headless Chromium, and {' and '.join(missing)} is"
            " missing: run `apt-get install chromium chromium-driver` (`make test` does)",
            pytrace=False,
        )
    # Selenium Manager would otherwise look for a driver and a browser on the network.
    monkeypatch.setenv("SE_OFFLINE", "true")
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    failed_before = request.session.testsfailed
    try:
        yield driver
    finally:
        if request.session.testsfailed > failed_before:
            _keep_failed_page(driver, request.node.name)
        driver.quit()


def _keep_failed_page(driver: WebDriver, test_name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", test_name)
    driver.save_screenshot(str(ARTIFACTS / f"FAILED-{stem}.png"))
    console = "\n".join(str(e) for e in driver.get_log("browser"))
    (ARTIFACTS / f"FAILED-{stem}.console.txt").write_text(console)
    (ARTIFACTS / f"FAILED-{stem}.html").write_text(driver.page_source)


@pytest.fixture
async def owner_key(cluster: Cluster) -> str:
    return await cluster.key(PROJECT)


@pytest.fixture
async def read_only_key(cluster: Cluster) -> str:
    return await cluster.key(PROJECT, "PROJECT_READ_ONLY")


@pytest.fixture
async def other_owner_keys(cluster: Cluster) -> list[str]:
    return [await cluster.key(PROJECT) for _ in range(2)]


@pytest.fixture
def workspace() -> str:
    return f"ws-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def api(cluster: Cluster, owner_key: str, workspace: str) -> Iterator[Api]:
    with httpx.Client(
        base_url=cluster.base_url,
        timeout=20,
        headers={"Authorization": f"Bearer {owner_key}"},
    ) as client:
        yield Api(client, workspace)


@pytest.fixture
def page(browser: WebDriver, cluster: Cluster) -> ReviewPage:
    return ReviewPage(browser, cluster.base_url)


class NoBroker:
    """The development gateway's bus in test_development_fills_in_the_project: the page only
    signs in and reads an empty list, so nothing is published or heard."""

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        raise AssertionError("signing in publishes nothing")

    def add_listener(self, topic: str, listener: object) -> None:
        """Nothing is ever heard."""


@pytest.fixture
def development_gateway(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A gateway configured as ``interlock dev`` configures it (development, with the
    development key), on the in-memory store, served on a loopback port: what a new user's
    browser meets first. Its URL."""
    # create_app would reconfigure structlog for the whole process (see test_cli.py).
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(environment="development", dev_api_key=DEV_API_KEY)
    app = create_app(settings, store=InMemoryStore(), publisher=NoBroker())
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    thread = threading.Thread(target=server.run, name="development-gateway", daemon=True)
    thread.start()
    try:
        # uvicorn only sets a flag once it listens (as in tests/live_gateway.py): poll it.
        ticks = threading.Event()
        for _ in range(500):
            if server.started or not thread.is_alive():
                break
            ticks.wait(0.02)
        assert server.started, "the development gateway did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


class Api:
    """What the tests set up and check over HTTP, as an owner of PROJECT."""

    def __init__(self, client: httpx.Client, workspace: str) -> None:
        self.client = client
        self.workspace = workspace

    def invoke(self, agent: str, message: str, **extra: Any) -> str:
        url = f"/api/v1/projects/{PROJECT}/workspaces/{self.workspace}/invoke"
        response = self.client.post(url, json={"agent": agent, "message": message, **extra})
        assert response.status_code == 202, response.text
        return str(response.json()["execution_id"])

    def resume(self, execution_id: str, body: dict[str, Any]) -> None:
        url = f"/api/v1/projects/{PROJECT}/executions/{execution_id}/resume"
        response = self.client.post(url, params={"workspace_id": self.workspace}, json=body)
        assert response.status_code == 202, response.text

    def get(self, execution_id: str, what: str = "") -> dict[str, Any]:
        url = f"/api/v1/projects/{PROJECT}/executions/{execution_id}{what}"
        response = self.client.get(url, params={"workspace_id": self.workspace})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


class ReviewPage:
    """The page as a reviewer uses it, by the ids and labels the page gives its parts."""

    def __init__(self, driver: WebDriver, base_url: str) -> None:
        self.driver = driver
        self.base_url = base_url

    def wait(self, what: str, condition: Callable[[WebDriver], T], timeout: float = WAIT) -> T:
        try:
            return WebDriverWait(
                self.driver, timeout, ignored_exceptions=[StaleElementReferenceException]
            ).until(condition)
        except TimeoutException:
            text = self.driver.find_element(By.TAG_NAME, "body").text
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}; the page shows:\n{text}"
            ) from None

    def by_id(self, element_id: str) -> WebElement:
        return self.driver.find_element(By.ID, element_id)

    def text_of(self, element_id: str) -> str:
        return self.by_id(element_id).text

    def wait_text(self, element_id: str, expected: str, timeout: float = WAIT) -> str:
        def shown(driver: WebDriver) -> str | None:
            element = driver.find_element(By.ID, element_id)
            return element.text if element.is_displayed() and expected in element.text else None

        return self.wait(f"#{element_id} to show {expected!r}", shown, timeout)

    def sign_in(self, key: str, project: str, workspace: str) -> None:
        self.driver.get(f"{self.base_url}/")  # the root sends a browser to /reviews
        self.wait("the sign-in form", lambda d: d.find_element(By.ID, "api-key").is_displayed())
        assert self.driver.current_url.endswith("/reviews")
        for field, value in (("api-key", key), ("project", project), ("workspace", workspace)):
            self.by_id(field).clear()
            self.by_id(field).send_keys(value)
        self.driver.find_element(By.CSS_SELECTOR, "#sign-in-form button[type=submit]").click()

    def row(self, execution_id: str) -> WebElement:
        return self.wait(
            f"execution {execution_id} in the list",
            lambda d: next(iter(self._rows(execution_id)), None),
        )

    def _rows(self, execution_id: str) -> list[WebElement]:
        selector = f'#review-rows tr[data-execution-id="{execution_id}"]'
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def listed(self) -> list[str]:
        rows = self.driver.find_elements(By.CSS_SELECTOR, "#review-rows tr")
        return [r.get_attribute("data-execution-id") or "" for r in rows]

    def wait_row_gone(self, execution_id: str) -> None:
        self.wait(
            f"execution {execution_id} to leave the list", lambda d: not self._rows(execution_id)
        )

    def open_review(self, execution_id: str) -> WebElement:
        self.row(execution_id).find_element(By.LINK_TEXT, "Review").click()
        dialog = self.by_id("review-dialog")
        self.wait(
            "the Review Request window", lambda d: self.by_id("review-content").is_displayed()
        )
        self.wait_text("review-execution-id", execution_id)
        return dialog

    def choose(self, select_id: str, value: str) -> None:
        Select(self.by_id(select_id)).select_by_value(value)

    def choices(self, select_id: str) -> list[str]:
        options = Select(self.by_id(select_id)).options
        return [o.get_attribute("value") or "" for o in options if o.get_attribute("value")]

    def type_into(self, element_id: str, text: str) -> None:
        field = self.by_id(element_id)
        field.clear()
        field.send_keys(text)

    def submit(self) -> None:
        self.by_id("submit-decision").click()

    def screenshot(self, element: WebElement, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / name
        path.unlink(missing_ok=True)
        assert element.screenshot(str(path)), f"no screenshot written to {path}"
        return path

    def wait_api(self, what: str, condition: Callable[[], T]) -> T:
        """Wait for the API (not the page) to show something, at WebDriverWait's pace."""
        return self.wait(what, lambda _: condition())

    def record_activity(self) -> None:
        """Keep every line the live window's activity shows, however briefly."""
        self.driver.execute_script(
            """
            const line = document.getElementById("progress-activity");
            window.__interlockActivity = [];
            new MutationObserver(() => {
              const seen = window.__interlockActivity;
              if (seen[seen.length - 1] !== line.textContent) seen.push(line.textContent);
            }).observe(line, { childList: true, characterData: true, subtree: true });
            """
        )

    def activity(self) -> list[str]:
        return list(self.driver.execute_script("return window.__interlockActivity"))

    def text_content(self, element: WebElement) -> str:
        """The DOM's text, hidden parts included (Selenium's .text is what a reader sees)."""
        return str(self.driver.execute_script("return arguments[0].textContent", element))

    def session_storage(self) -> Any:
        return self.driver.execute_script(f"return sessionStorage.getItem('{SESSION_KEY}')")

    def mark_document(self) -> None:
        """Tag the loaded document: a reload or navigation would lose the tag."""
        self.driver.execute_script("window.__interlockTestMark = 'still here'")

    def document_is_marked(self) -> bool:
        return bool(
            self.driver.execute_script("return window.__interlockTestMark === 'still here'")
        )

    def script_errors(self) -> list[str]:
        """Console errors other than failed requests (which the page reports in words): a CSP
        violation or an exception in app.js shows up here."""
        return [
            str(entry["message"])
            for entry in self.driver.get_log("browser")
            if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
        ]


def assert_screenshot(path: Path) -> None:
    assert path.exists(), f"{path} was not written"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    # A blank or one-colour image compresses to a few hundred bytes; the window is text-rich.
    assert len(data) > 10_000, f"{path} is only {len(data)} bytes"


# --- tests ---------------------------------------------------------------------------------------


def test_a_refund_reviewed_from_the_live_list_to_its_outcome(
    page: ReviewPage, api: Api, owner_key: str, workspace: str
) -> None:
    page.sign_in(owner_key, PROJECT, workspace)
    page.wait_text("no-reviews", "No pending reviews")
    assert owner_key in str(page.session_storage())
    page.mark_document()

    execution_id = api.invoke("refund-approval", "Refund claim CLM-4821")
    row = page.row(execution_id)  # arrives by polling, without a reload
    assert page.document_is_marked()
    assert "refund-approval" in row.text
    assert "Approve refund of $240 for order #98765" in row.text
    # The context a reviewer triages by, in one line under the reason.
    summary = row.find_element(By.CSS_SELECTOR, ".context-summary")
    assert summary.text == "claim_id: CLM-4821"
    assert_screenshot(page.screenshot(page.by_id("reviews"), "pending-reviews-list.png"))

    dialog = page.open_review(execution_id)
    assert page.text_of("review-message") == "Refund claim CLM-4821"
    assert page.text_of("review-reason") == "Approve refund of $240 for order #98765"
    context = page.text_of("review-context")
    assert "claim_id" in context and "CLM-4821" in context
    assert "task_description" in context
    assert "allowed_decisions" not in context  # shown as the choices instead
    assert page.choices("decision") == ["approve", "reject"]

    page.choose("decision", "approve")
    page.type_into("reviewer-notes", "verified identity on the phone")
    assert_screenshot(page.screenshot(dialog, "review-window-refund.png"))
    page.record_activity()
    page.submit()

    page.wait_text("progress-title", "Decision submitted")
    page.wait_text("progress-status", "completed")
    outcome = page.wait_text("outcome", "Refunded $240")
    assert "Completed" in outcome
    assert "Approved by key:" in outcome
    assert "Reviewer notes: verified identity on the phone" in outcome
    # Only the execution stream reports the agent's steps: the window follows it, not a poll.
    # Once it ends, the line says how, in words.
    page.wait_text("progress-activity", "Finished: the execution completed.")
    assert "Agent finished step: issue_refund" in page.activity()
    assert not page.by_id("decision-form").is_displayed()
    assert_screenshot(page.screenshot(dialog, "review-page-outcome-refund.png"))

    done = api.get(execution_id)
    assert done["status"] == "completed"
    assert done["result"]["outcome"] == "refunded"
    [decision] = api.get(execution_id, "/audit")["decisions"]
    assert decision["decision"] == "approve"
    assert decision["reviewer_notes"] == "verified identity on the phone"

    page.by_id("close-review").click()
    page.wait_row_gone(execution_id)
    page.wait_text("no-reviews", "No pending reviews")
    assert page.document_is_marked()
    assert page.script_errors() == []


def test_an_interrupt_that_declares_no_decisions_is_answered_with_its_value(
    page: ReviewPage, api: Api, owner_key: str, workspace: str
) -> None:
    """``edit-draft`` asks for an edit, not a decision (LangGraph's "review and edit state"): the
    window offers an answer box shaped by its answer_schema, refuses a value that does not
    fit (the gateway's 400, in words), and the agent receives the edit itself."""
    page.sign_in(owner_key, PROJECT, workspace)
    execution_id = api.invoke("edit-draft", "Where is my order?")
    page.row(execution_id)
    page.open_review(execution_id)
    assert json.loads(page.by_id("resume").get_attribute("value") or "") == {"edited_text": ""}
    assert "edited_text" in page.text_of("resume-hint")

    page.by_id("resume").clear()
    page.type_into("resume", '{"edited_text": ""}')  # JSON, but not what the schema takes
    page.submit()
    page.wait_text("submit-error", "answer_schema")
    page.by_id("resume").clear()
    page.type_into("resume", '{"edited_text": "Your order ships on Monday."}')
    page.submit()

    page.wait_text("progress-status", "completed")
    done = api.get(execution_id)
    assert done["result"]["sent"] == "Your order ships on Monday."
    [decision] = api.get(execution_id, "/audit")["decisions"]
    assert decision["resume"] == {"edited_text": "Your order ships on Monday."}
    assert page.script_errors() == []


def test_a_later_turn_of_a_session_is_reviewed_beside_the_conversation_so_far(
    page: ReviewPage, api: Api, owner_key: str, workspace: str
) -> None:
    """Turn 2 of a session waits for a review: the window shows what turn 1 said, and the
    answer resumes turn 2, which knows turn 1."""
    first = api.invoke("conversation", "my name is Ada", session_id="review-session")
    deadline = time.monotonic() + WAIT
    while api.get(first)["status"] != "completed":
        assert time.monotonic() < deadline, api.get(first)
        time.sleep(0.2)
    second = api.invoke("conversation", "refund my order please", session_id="review-session")
    page.sign_in(owner_key, PROJECT, workspace)
    page.row(second)
    page.open_review(second)
    page.wait_text("review-conversation-title", "turn 2 of session review-session")
    assert "my name is Ada" in page.text_of("review-conversation")
    page.choose("decision", "approve")
    page.submit()
    page.wait_text("progress-status", "completed")
    answer = api.get(second)["result"]["messages"][-1]["content"]
    assert answer.endswith("before: ['my name is Ada']; reviewer said approve"), answer
    assert page.script_errors() == []


def test_tool_calls_answered_one_by_one_with_an_edit_and_a_rejection(
    page: ReviewPage, api: Api, cluster: Cluster, owner_key: str, workspace: str
) -> None:
    page.sign_in(owner_key, PROJECT, workspace)
    execution_id = api.invoke("outreach-email", "send 3 emails")
    row = page.row(execution_id)
    assert "3 tool calls to review: send_email \N{MULTIPLICATION SIGN}3" in row.text
    summary = row.find_element(By.CSS_SELECTOR, ".context-summary").text
    assert summary == (
        "send_email (to: prospect1@example.com); send_email (to: prospect2@example.com);"
        " send_email (to: prospect3@example.com)"
    )
    # Next to an agent's own interrupt, whose line is the first plain facts of its context.
    refund = page.row(api.invoke("refund-approval", "Refund claim CLM-1002"))
    assert refund.find_element(By.CSS_SELECTOR, ".context-summary").text == "claim_id: CLM-1002"
    assert_screenshot(page.screenshot(page.by_id("reviews"), "review-page-list-context.png"))

    dialog = page.open_review(execution_id)
    actions = dialog.find_elements(By.CSS_SELECTOR, "fieldset.action")
    assert [a.find_element(By.TAG_NAME, "legend").text for a in actions] == [
        f"Action {i} of 3: send_email" for i in (1, 2, 3)
    ]
    assert "Send an email to prospect2@example.com" in actions[1].text
    for position in (1, 2, 3):
        assert page.choices(f"action-{position}-decision") == ["approve", "edit", "reject"]

    page.choose("action-1-decision", "approve")
    page.choose("action-2-decision", "edit")
    args = json.loads(page.by_id("action-2-args").get_attribute("value") or "")
    assert args["to"] == "prospect2@example.com"  # the editor starts from the proposed call

    # Broken JSON is caught in the page: the field says why and nothing is sent.
    page.type_into("action-2-args", '{"to": "reviewed@example.com",')
    page.choose("action-3-decision", "reject")
    page.type_into("action-3-message", "not this prospect")
    page.submit()
    assert page.wait_text("action-2-args-error", "Invalid JSON").startswith("Invalid JSON")
    assert page.by_id("action-2-args").get_attribute("aria-invalid") == "true"
    assert api.get(execution_id)["decisions"] == []

    page.type_into("action-2-args", json.dumps({**args, "to": "reviewed@example.com"}))
    assert not page.by_id("action-2-args-error").is_displayed()  # it spoke of the old value
    page.type_into("reviewer-notes", "second prospect moved")
    assert_screenshot(page.screenshot(dialog, "review-window-actions.png"))
    page.record_activity()
    page.submit()

    page.wait_text("progress-title", "Decision submitted")
    page.wait_text("progress-status", "completed")
    page.wait_text("progress-activity", "Finished: the execution completed.")
    # The outcome in words, from the decision record; LangChain's words to the model (its tool
    # message for a rejected call) stay in the agent's message, closed.
    outcome = page.wait_text("outcome", "Tool calls reviewed by key:")
    assert "send_email (call 1): approved" in outcome
    assert (
        "send_email (call 2): edited arguments: to: prospect2@example.com"
        " \N{RIGHTWARDS ARROW} reviewed@example.com"
    ) in outcome
    assert "send_email (call 3): rejected: not this prospect" in outcome
    assert "Reviewer notes: second prospect moved" in outcome
    assert "User rejected" not in outcome
    assert "The agent's last message" in outcome
    assert "Done." in page.text_content(page.by_id("outcome"))
    # LangChain's middleware hooks are no step of the reviewer's: the live line never names one.
    assert page.activity(), "the live window showed no activity"
    assert not [line for line in page.activity() if "Middleware" in line], page.activity()
    assert_screenshot(page.screenshot(dialog, "review-page-outcome-words.png"))

    done = api.get(execution_id)
    assert done["status"] == "completed"
    [record] = done["decisions"]
    assert [d["type"] for d in record["decisions"]] == ["approve", "edit", "reject"]
    assert record["decisions"][2]["message"] == "not this prospect"
    assert record["reviewer_notes"] == "second prospect moved"
    assert record["edits"][0]["after"]["args"]["to"] == "reviewed@example.com"
    sent = sorted(e["to"] for e in ledger_entries(cluster, execution_id) if e["kind"] == "email")
    assert sent == ["prospect1@example.com", "reviewed@example.com"]
    assert page.script_errors() == []


def test_api_errors_are_shown_in_words(
    page: ReviewPage, api: Api, read_only_key: str, workspace: str
) -> None:
    page.sign_in("ilk_not-a-real-key", PROJECT, workspace)
    refused = page.wait_text("sign-in-error", "Authentication required")
    # Said on the sign-in form, so it asks for what the form offers (there is no sign-out here).
    assert "Check the API key and sign in again" in refused
    assert "Sign out" not in refused
    assert page.session_storage() is None

    page.sign_in(read_only_key, PROJECT, workspace)  # reading needs any role
    execution_id = api.invoke("refund-approval", "Refund claim CLM-1002")
    newer = api.invoke("refund-approval", "Refund claim CLM-4821")
    page.row(execution_id)
    page.row(newer)
    assert page.listed() == [newer, execution_id]  # newest first

    page.open_review(execution_id)
    page.submit()  # no decision chosen: the page asks for one before sending anything
    page.wait_text("decision-error", "Choose a decision")

    page.choose("decision", "reject")
    page.submit()
    shown = page.wait_text("submit-error", "Role not allowed")
    assert "resume requires PROJECT_OWNER; this key has PROJECT_READ_ONLY" in shown
    after = api.get(execution_id)
    assert after["status"] == "suspended" and after["decisions"] == []

    page.by_id("close-review").click()
    page.by_id("sign-out").click()
    page.wait("the sign-in form", lambda d: d.find_element(By.ID, "api-key").is_displayed())
    assert page.session_storage() is None
    assert page.script_errors() == []


def test_an_approval_that_needs_a_second_owner_waits_for_it(
    page: ReviewPage, api: Api, owner_key: str, other_owner_keys: list[str], workspace: str
) -> None:
    second_owner, third_owner = other_owner_keys
    # high-value-refund: the invoking key may not decide, and two other owners must approve.
    execution_id = api.invoke("high-value-refund", "Refund claim CLM-4821")
    page.sign_in(owner_key, PROJECT, workspace)
    page.open_review(execution_id)
    page.choose("decision", "approve")
    page.submit()
    shown = page.wait_text("submit-error", "Self-approval not allowed")
    assert "another owner must review it" in shown

    page.by_id("close-review").click()
    page.by_id("sign-out").click()
    page.sign_in(second_owner, PROJECT, workspace)
    page.open_review(execution_id)
    page.choose("decision", "approve")
    page.submit()
    page.wait_text("progress-title", "Approval recorded (1 of 2)")
    assert page.text_of("progress-status") == "suspended"

    response = api.client.post(
        f"/api/v1/projects/{PROJECT}/executions/{execution_id}/resume",
        params={"workspace_id": workspace},
        json={"decision": "approve"},
        headers={"Authorization": f"Bearer {third_owner}"},
    )
    assert response.status_code == 202, response.text
    page.wait_text("progress-status", "completed")  # the window kept watching
    page.wait_text("outcome", "Refunded $240")
    assert page.script_errors() == []


def test_signing_out_forgets_the_key(
    page: ReviewPage, api: Api, owner_key: str, workspace: str
) -> None:
    page.driver.get(f"{page.base_url}/reviews")
    page.wait("the sign-in form", lambda d: d.find_element(By.ID, "api-key").is_displayed())
    # Outside development the gateway suggests nothing (test_review_page.py in tests/unit has
    # development): read what it suggests, then the form, which started from it.
    suggested = page.driver.execute_async_script(
        "const done = arguments[0];"
        " fetch('/reviews/config').then((r) => r.json()).then(done, (e) => done(String(e)));"
    )
    assert suggested == {}
    assert [page.by_id(f).get_attribute("value") for f in ("project", "workspace")] == ["", ""]

    page.sign_in(owner_key, PROJECT, workspace)
    execution_id = api.invoke("refund-approval", "Refund claim CLM-1002")
    page.row(execution_id)
    assert owner_key in str(page.session_storage())

    page.by_id("sign-out").click()
    page.wait_text("sign-in-note", "Signed out: this tab no longer holds the API key.")
    assert page.session_storage() is None
    assert page.by_id("api-key").get_attribute("value") == ""
    assert not page.by_id("reviews").is_displayed()
    assert not page.by_id("session-nav").is_displayed()
    # The names stay for the next sign-in; only the key is gone.
    assert page.by_id("project").get_attribute("value") == PROJECT
    assert page.by_id("workspace").get_attribute("value") == workspace
    body = page.driver.find_element(By.TAG_NAME, "body")
    assert_screenshot(page.screenshot(body, "review-page-signout.png"))

    # Nothing is left to sign in with after a reload either.
    page.driver.refresh()
    page.wait("the sign-in form", lambda d: d.find_element(By.ID, "api-key").is_displayed())
    assert not page.by_id("reviews").is_displayed()
    assert owner_key not in page.driver.page_source

    # A kept key the gateway no longer takes: the page forgets it and asks for another.
    stale = {"key": "ilk_0000000000000000_revoked", "project": PROJECT, "workspace": workspace}
    page.driver.execute_script(
        f"sessionStorage.setItem('{SESSION_KEY}', arguments[0])", json.dumps(stale)
    )
    page.driver.refresh()
    refused = page.wait_text("sign-in-error", "Authentication required")
    assert "Check the API key and sign in again" in refused
    assert page.session_storage() is None
    assert page.script_errors() == []


LONG_ANSWER = "https://example.com/" + "a" * 400 + "\N{RIGHT-TO-LEFT OVERRIDE}fdp.exe"
"""A reviewer's answer the outreach agent puts in an email's body: a long unbroken string (and a
bidi override, which the page must show rather than obey)."""


def test_a_long_argument_wraps_inside_the_action_box(
    page: ReviewPage, api: Api, owner_key: str, workspace: str
) -> None:
    # outreach-email asks the user first, then writes the answer into the email it sends.
    execution_id = api.invoke("outreach-email", "ask the user, then send 1 email")
    asked = wait_for_tool_calls(page, api, execution_id)
    assert asked["reviews"][0]["actions"][0]["name"] == "ask_user"
    api.resume(
        execution_id,
        {
            "decisions": [{"type": "respond", "message": LONG_ANSWER}],
            "generation": asked["generation"],
        },
    )
    wait_for_tool_calls(page, api, execution_id, after=asked["generation"])

    page.sign_in(owner_key, PROJECT, workspace)
    row = page.row(execution_id)
    summary = row.find_element(By.CSS_SELECTOR, ".context-summary").text
    assert summary == "send_email (to: prospect1@example.com)"
    dialog = page.open_review(execution_id)
    action = dialog.find_element(By.CSS_SELECTOR, "fieldset.action")
    arguments = action.find_element(By.CSS_SELECTOR, "pre.json")
    assert "a" * 400 in arguments.text
    page.choose("action-1-decision", "edit")  # the arguments editor shows the value too

    # Every box of the action shows its whole width: nothing scrolls sideways or sticks out.
    sizes = page.driver.execute_script(
        """
        const [action, dialog] = arguments;
        const body = dialog.querySelector(".dialog-body").getBoundingClientRect();
        return [action, ...action.querySelectorAll("pre, p, textarea, legend")]
          .filter((e) => e.offsetParent !== null)
          .map((e) => ({
            what: e.tagName + "." + e.className,
            scroll: e.scrollWidth,
            client: e.clientWidth,
            right: e.getBoundingClientRect().right,
            limit: body.right,
          }));
        """,
        action,
        dialog,
    )
    assert len(sizes) >= 4, sizes
    for size in sizes:
        assert size["scroll"] <= size["client"], size
        assert size["right"] <= size["limit"] + 0.5, size
    assert page.driver.execute_script(
        "return arguments[0].scrollWidth <= arguments[0].clientWidth", dialog
    )

    # The override is shown, not obeyed; the editor keeps it as a JSON escape, so an edit sends
    # the very same text back.
    assert "<U+202E>fdp.exe" in arguments.text
    assert "\N{RIGHT-TO-LEFT OVERRIDE}" not in page.text_content(arguments)
    edited = page.by_id("action-1-args").get_attribute("value") or ""
    assert "\\u202e" in edited
    assert LONG_ANSWER in json.loads(edited)["body"]
    assert_screenshot(page.screenshot(dialog, "review-page-long-argument.png"))
    assert page.script_errors() == []


def wait_for_tool_calls(
    page: ReviewPage, api: Api, execution_id: str, *, after: int = 0
) -> dict[str, Any]:
    """The execution once it waits on tool calls, in a suspension after generation ``after``."""

    def waiting() -> dict[str, Any] | None:
        execution = api.get(execution_id)
        reviews = execution.get("reviews") or []
        asks = execution["status"] == "suspended" and reviews and reviews[0].get("actions")
        return execution if asks and execution["generation"] > after else None

    found = page.wait_api(f"execution {execution_id} to wait on tool calls", waiting)
    assert found is not None
    return found


INVISIBLE = {
    "\N{RIGHT-TO-LEFT OVERRIDE}": "<U+202E>",
    "\N{NULL}": "<U+0000>",
    "\N{ZERO WIDTH SPACE}": "<U+200B>",
    "\N{LEFT-TO-RIGHT ISOLATE}": "<U+2066>",
    "\N{POP DIRECTIONAL ISOLATE}": "<U+2069>",
    "\N{RIGHT-TO-LEFT MARK}": "<U+200F>",
    "\N{ZERO WIDTH NO-BREAK SPACE}": "<U+FEFF>",
    "\x85": "<U+0085>",
}


def test_invisible_characters_are_shown_as_escapes(
    page: ReviewPage, api: Api, owner_key: str, workspace: str
) -> None:
    message = "Refund claim CLM-4821, invoice_\u202etxt.exe\x00 \u200b\u2066ok\u2069"
    execution_id = api.invoke("refund-approval", message)
    page.sign_in(owner_key, PROJECT, workspace)
    page.row(execution_id)
    dialog = page.open_review(execution_id)

    shown = page.text_of("review-message")
    assert shown == (
        "Refund claim CLM-4821, invoice_<U+202E>txt.exe<U+0000> <U+200B><U+2066>ok<U+2069>"
    )
    tokens = page.by_id("review-message").find_elements(By.CSS_SELECTOR, ".invisible-char")
    assert len(tokens) == 5  # each marked apart from text the agent could have typed
    assert not set(INVISIBLE) & set(page.text_content(page.by_id("review-message")))
    assert api.get(execution_id)["input"]["message"] == message  # stored as sent

    # A reviewer's notes (here from another reviewer, over the API) are shown the same way.
    notes = "checked\u202e on the phone\u200f\ufeff\x85 ok"
    execution = api.get(execution_id)
    api.resume(
        execution_id,
        {"decision": "approve", "reviewer_notes": notes, "generation": execution["generation"]},
    )
    outcome = page.wait_text("outcome", "Reviewer notes:")
    assert "Reviewer notes: checked<U+202E> on the phone<U+200F><U+FEFF><U+0085> ok" in outcome
    assert not set(INVISIBLE) & set(page.text_content(page.by_id("outcome")))
    assert api.get(execution_id, "/audit")["decisions"][0]["reviewer_notes"] == notes
    assert_screenshot(page.screenshot(dialog, "review-page-invisible-characters.png"))
    assert page.script_errors() == []


def test_development_fills_in_the_project(browser: WebDriver, development_gateway: str) -> None:
    """`interlock dev`'s gateway fills in the development key's project and workspace: a new
    user pastes the key it printed and is in. The key itself is never in the page."""
    page = ReviewPage(browser, development_gateway)
    page.driver.get(f"{development_gateway}/reviews")
    page.wait(
        "the project filled in",
        lambda d: d.find_element(By.ID, "project").get_attribute("value") == DEV_PROJECT,
    )
    assert page.by_id("workspace").get_attribute("value") == "default"
    assert page.by_id("api-key").get_attribute("value") == ""
    assert DEV_API_KEY not in page.driver.page_source
    page.by_id("api-key").send_keys(DEV_API_KEY)
    page.driver.find_element(By.CSS_SELECTOR, "#sign-in-form button[type=submit]").click()
    page.wait_text("no-reviews", "No pending reviews")
    assert page.text_of("session-label") == f"{DEV_PROJECT} / default"
    assert page.script_errors() == []
