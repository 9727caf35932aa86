"""Section 12 of the page: one ``langgraph-sdk`` workload on Interlock and on LangGraph's Agent
Server, and Interlock's ratios to it."""

from __future__ import annotations

from typing import Any

from bench.report.text import ms, num

SYSTEMS = (
    ("interlock", "Interlock, separate processes, 1 sandbox (LangGraph routes)"),
    ("agent_server", "LangGraph Agent Server (`langgraph dev`, in-memory runtime)"),
)
NATIVE = "native"
NATIVE_NAME = "Interlock, the same services, native API (the concurrent run only)"
RATIO_NAMES = {
    "sequential_invoke_p50": "sequential invoke -> interrupted p50",
    "sequential_invoke_p99": "sequential invoke -> interrupted p99",
    "sequential_resume_p50": "sequential resume -> completed p50",
    "sequential_resume_p99": "sequential resume -> completed p99",
    "concurrent_per_second": "concurrent executions/s",
    "concurrent_cpu_per_execution": "concurrent CPU per execution",
}


def _half(result: dict[str, Any], half: str) -> str:
    figure = result.get(half) or {}
    return f"{ms(figure.get('p50_ms'))} / {ms(figure.get('p99_ms'))}"


def _count(result: dict[str, Any]) -> str:
    text = f"{result.get('completed', 0)} of {result.get('executions', 0)}"
    failed = result.get("failures") or []
    return text + (f" (first failure: `{failed[0][:120]}`)" if failed else "")


def _not_measured(name: str, system: dict[str, Any], cells: int) -> str:
    reason = str(system.get("error", "not run")).replace("|", "\\|")[:200]
    return f"| {name} | not measured: `{reason}` |" + " |" * (cells - 1)


def _intro(fig: dict[str, Any]) -> str:
    size, peer = fig["sizes"], fig["agent_server"]
    poll = peer.get("queue_poll_seconds")
    return (
        "The same `langgraph-sdk` calls against both servers (`bench/peers/sdk_workload.py`), as an"
        " application makes them: `threads.create()`, `runs.wait(...)` with the user's message"
        " until the bench agent's `interrupt(...)` (invoke -> interrupted), then `runs.wait(...,"
        ' command={"resume": {"decision": "approve"}})` until it ends (resume -> completed), each'
        " half timed by the client. Interlock runs as separate processes with 1 sandbox and is"
        " reached on its LangGraph routes (`/langgraph/projects/<p>/workspaces/<w>`, the key sent"
        " as `x-api-key`). The Agent Server is `langgraph dev` (langgraph-api"
        f" {peer.get('version', 'n/a')}, its in-memory runtime; `--n-jobs-per-worker"
        f" {peer.get('jobs_per_worker', 'n/a')}`, its default being 1) in a virtualenv of its"
        " own, offline, serving the same `agents/bench_pipeline.py` compiled without a"
        " checkpointer (it brings its own persistence; durable steps are plain calls there)."
        f" **Its queue polls for new runs every {num(poll, ' s', 1)}**: a run waits up to that"
        " long for a worker, so each half of an execution pays it; this is how its in-memory"
        " runtime works, not a setting of the bench. Its state is written to files every"
        f" {peer.get('flush_seconds', 'n/a')} s, so unlike Interlock it is not durable step by"
        " step; its production runtime (PostgreSQL and Redis, LangSmith Deployment) is not run"
        f" here. Sequential: {size['sequential']} executions one after another. Concurrent:"
        f" {size['concurrent']} executions, {size['in_flight']} in flight at once (closed loop:"
        " each finished one starts the next), one run each; executions/s from the first start"
        " to the last completion. CPU: Interlock's four processes (Kafka's and the store's not"
        " counted), the Agent Server's one process (its in-memory store inside it)."
    )


def sdk_section(s: dict[str, Any]) -> list[str]:
    fig = s["figures"].get("sdk_workload") if "figures" in s else s.get("sdk_workload")
    if not fig:
        return []
    lines = [
        "## 12. One langgraph-sdk workload: Interlock and LangGraph's Agent Server",
        "",
        _intro(fig),
        "",
        "Sequential, p50 / p99 (with this few executions p99 is the slowest one):",
        "",
        "| system | invoke -> interrupted | resume -> completed | completed |",
        "| --- | --- | --- | --- |",
    ]
    for key, name in SYSTEMS:
        system = fig.get(key) or {}
        seq = system.get("sequential")
        if seq is None:
            lines.append(_not_measured(name, system, 3))
            continue
        cells = [_half(seq, "invoke_to_interrupted"), _half(seq, "resume_to_completed")]
        lines.append(f"| {name} | " + " | ".join([*cells, _count(seq)]) + " |")
    lines += [
        "",
        "Concurrent:",
        "",
        "| system | in flight | executions/s | invoke -> interrupted p50 / p99 |"
        " resume -> completed p50 / p99 | CPU ms per execution | completed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    native = (fig.get("interlock") or {}).get("native")
    rows = [*SYSTEMS, *([(NATIVE, NATIVE_NAME)] if native is not None else [])]
    for key, name in rows:
        system = (native if key == NATIVE else fig.get(key)) or {}
        conc = system.get("concurrent")
        if conc is None:
            lines.append(_not_measured(name, system, 6))
            continue
        cells = [
            str(conc.get("in_flight")),
            num(conc.get("per_second")),
            _half(conc, "invoke_to_interrupted"),
            _half(conc, "resume_to_completed"),
            num(conc.get("cpu_ms_per_execution"), digits=1),
            _count(conc),
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Interlock divided by the Agent Server (latency and CPU: below 1 is Interlock faster /"
        " cheaper; executions/s: above 1 is Interlock faster):",
        "",
        "| measure | Interlock / Agent Server |",
        "| --- | --- |",
    ]
    ratios = fig.get("ratios") or {}
    lines += [f"| {label} | {num(ratios.get(key), 'x', 3)} |" for key, label in RATIO_NAMES.items()]
    if native is not None:
        own = fig.get("native_ratios") or {}
        lines += [
            "",
            "Interlock's LangGraph routes divided by its native API, the same concurrent run on"
            " the same services right after (`bench/native_workload.py`: invoke, `suspended` on"
            " `execution.status`, approve, `completed`): what the routes add, 1.0 being nothing.",
            "",
            "| measure | LangGraph routes / native API |",
            "| --- | --- |",
            f"| concurrent executions/s | {num(own.get('per_second'), 'x', 3)} |",
            f"| concurrent CPU per execution | {num(own.get('cpu_ms_per_execution'), 'x', 3)} |",
        ]
    return [*lines, ""]
