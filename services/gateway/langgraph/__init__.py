"""A subset of LangGraph's Agent Server API, so the ``langgraph-sdk`` client drives Interlock.

Mapped onto Interlock's model (docs/langgraph-api.md): an assistant is a registered agent; a
thread is the durable conversation one execution runs on (its id derived from the thread's);
a run is one segment of that execution, from its start or a decision to the next suspension or
its end; ``command.resume`` is a decision, judged by the same rules as the resume route.
"""
