"""The AsyncAPI document built from the topic tables: FastStream writes one channel per
endpoint, regrouped here into one channel per topic with its one message."""

from __future__ import annotations

import json
import warnings
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal
from urllib.parse import unquote

from faststream.kafka import KafkaBroker
from faststream.specification import AsyncAPI
from pydantic import BaseModel

from scripts.asyncapi.topics import EXTERNAL, Action, Party, TopicDoc, operation_id, topic_docs
from shared.custom_headers import CUSTOM_HEADER_PREFIX, SEALED_HEADER
from shared.events import (
    CancelRequested,
    DecisionSubmitted,
    EventModel,
    ExecutionDispatched,
    ExecutionRequested,
    ThreadDeleteRequested,
)
from shared.senders import SIGNATURE_HEADER, SIGNER_HEADER
from shared.settings import CommonSettings
from shared.topics import Topics

__all__ = ["Format", "build_spec_app", "document", "render"]

TITLE = "Interlock events"
KAFKA_BINDING_VERSION = "0.4.0"
"""The Kafka bindings version FastStream writes for channels; messages and operations match it."""

Format = Literal["yaml", "json"]

OVERVIEW = """\
The Kafka topics of Interlock: durable human-in-the-loop execution for LangGraph agents.

Every message is one JSON-encoded (UTF-8) object with a `type` and a `version` that name its \
schema, published with the headers `content-type: application/json` and `event-type: <type>`. \
Messages are keyed by `execution_id`, so the events of one execution stay in order on one \
partition (a dead letter keeps the key of the message it holds). Delivery is at least once: \
consumers must tolerate duplicates (`event_id` identifies a message, and sandbox reports carry the \
`epoch` of the attempt they answer). A message a consumer can never process is published to \
`execution.dead_lettered` with the reason and skipped.

Versioning: a breaking change adds a new model with the next `version`, which consumers accept \
before producers switch to it. This document is generated from `shared/events.py` by \
`python -m scripts.asyncapi`; do not edit it by hand."""


CUSTOM_HEADERS_SEALED = (
    "Optional: the caller's custom headers of this run segment (the agent's"
    " `configurable[\"custom_headers\"]`), sealed with the gateway's and the sandbox's shared"
    " `INTERLOCK_ENCRYPTION_KEYS` (AES-256-GCM, purpose `custom-headers`, the `execution_id` as"
    " context; `shared/custom_headers.py`). The orchestrator forwards it unopened on the dispatch;"
    " a token that does not open is left out of the run and recorded in the audit trail."
)
CUSTOM_HEADERS_PLAIN = (
    "Optional, outside producers only: custom headers in plain text, passed to the agent as they"
    " are (the gateway never publishes them plain; they stay in the topic's log for its"
    " retention, so prefer the sealed header)."
)

SIGNER = (
    "Who signed the message: `gateway:<key id>` for the gateway, the producer's name for an"
    " outside producer registered in the orchestrators' `INTERLOCK_DECISION_PRODUCERS_FILE`."
    " Required on decisions and cancellations: the orchestrator applies none that nobody"
    " registered signed"
    ' (docs/security.md, "The bus as a channel"). On a request it makes the registered'
    " producer the requester."
)
SIGNATURE = (
    "Ed25519 (RFC 8032) over the bytes `interlock-signed-message/v1\\n` followed by the exact"
    " message body, base64url without padding (`shared/senders.py`)."
)


def _documented_handler(model: type[BaseModel], description: str) -> Any:
    """A never-called subscriber function whose one parameter is typed with ``model``."""

    async def handler(event: Any) -> None:  # pragma: no cover - documentation only
        raise RuntimeError("documentation-only subscriber")

    handler.__annotations__ = {"event": model, "return": None}
    handler.__doc__ = description
    handler.__name__ = handler.__qualname__ = model.__name__
    return handler


def build_spec_app(topics: Topics | None = None) -> AsyncAPI:
    """The FastStream documentation app: a never-started broker with documented endpoints."""
    defaults = CommonSettings.model_construct()  # the defaults, never the environment
    broker = KafkaBroker(
        defaults.kafka_bootstrap_servers,
        description=(
            "Kafka of the local development stack. Deployments set their brokers with "
            "INTERLOCK_KAFKA_BOOTSTRAP_SERVERS."
        ),
        logger=None,
    )
    for doc in topic_docs(topics):
        for action, party in doc.endpoints():
            title = operation_id(action, party, doc.topic)
            if action == "send":
                broker.publisher(
                    doc.topic, title=title, description=party.description, schema=doc.model
                )
            else:
                broker.subscriber(
                    doc.topic,
                    title=title,
                    description=party.description,
                    group_id=None
                    if party.name == EXTERNAL or not party.grouped
                    else defaults.consumer_group(party.name),
                )(_documented_handler(doc.model, party.description))
    return AsyncAPI(
        broker,
        title=TITLE,
        version=package_version(),
        description=OVERVIEW,
        schema_version="3.0.0",
    )


def package_version() -> str:
    try:
        return version("interlock")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0"


def _target(ref: dict[str, str]) -> str:
    """The last part of a local JSON pointer ``$ref``, decoded."""
    return unquote(ref["$ref"].rsplit("/", 1)[1]).replace("~1", "/").replace("~0", "~")


def _message(doc: TopicDoc, generated: dict[str, Any]) -> dict[str, Any]:
    event_type = doc.model.model_fields["type"].default
    event_version = doc.model.model_fields["version"].default
    message: dict[str, Any] = {
        "name": doc.message_name,
        "title": f"{event_type} v{event_version}",
        "summary": doc.summary,
        "contentType": "application/json",
    }
    if issubclass(doc.model, EventModel):
        message["correlationId"] = {
            "description": "Optional; constant across one execution's whole history.",
            "location": "$message.payload#/correlation_id",
        }
    message["headers"] = {
        "type": "object",
        "properties": {
            "content-type": {"type": "string", "const": "application/json"},
            "event-type": {"type": "string", "const": event_type},
        },
    }
    if doc.model in (ExecutionRequested, DecisionSubmitted, ExecutionDispatched):
        message["headers"]["properties"][SEALED_HEADER] = {
            "type": "string",
            "description": CUSTOM_HEADERS_SEALED,
        }
        message["headers"]["patternProperties"] = {
            f"^{CUSTOM_HEADER_PREFIX}": {"type": "string", "description": CUSTOM_HEADERS_PLAIN}
        }
    if doc.model in (ExecutionRequested, DecisionSubmitted, CancelRequested, ThreadDeleteRequested):
        message["headers"]["properties"][SIGNER_HEADER] = {"type": "string", "description": SIGNER}
        message["headers"]["properties"][SIGNATURE_HEADER] = {
            "type": "string",
            "description": SIGNATURE,
        }
    if doc.model in (DecisionSubmitted, CancelRequested, ThreadDeleteRequested):
        message["headers"]["required"] = [SIGNER_HEADER, SIGNATURE_HEADER]
    message["payload"] = generated["payload"]
    message["bindings"] = {
        "kafka": {
            "key": {"type": "string", "description": doc.key},
            "bindingVersion": KAFKA_BINDING_VERSION,
        }
    }
    return message


def _channel(doc: TopicDoc, endpoint_channel: dict[str, Any]) -> dict[str, Any]:
    """The topic's one channel, with the servers and bindings FastStream gave its endpoint."""
    return {
        "address": doc.topic,
        "title": doc.topic,
        "summary": doc.summary,
        "description": doc.description,
        **{k: endpoint_channel[k] for k in ("servers", "bindings") if k in endpoint_channel},
        "messages": {doc.message_name: {"$ref": f"#/components/messages/{doc.message_name}"}},
    }


def _operation(
    doc: TopicDoc, action: Action, party: Party, generated: dict[str, Any]
) -> dict[str, Any]:
    """One party's operation on the topic's channel (FastStream's, pointed at that channel)."""
    operation = dict(generated)
    result: dict[str, Any] = {
        "action": operation.pop("action"),
        "channel": {"$ref": f"#/channels/{doc.topic}"},
        "summary": f"{party.name} {action}s {doc.message_name}",
        "description": party.description,
        "messages": [{"$ref": f"#/channels/{doc.topic}/messages/{doc.message_name}"}],
        **{k: v for k, v in operation.items() if k not in ("channel", "messages")},
    }
    if action == "receive" and party.name != EXTERNAL and party.grouped:
        result["bindings"] = {
            "kafka": {
                "groupId": {
                    "type": "string",
                    "enum": [CommonSettings.model_construct().consumer_group(party.name)],
                },
                "bindingVersion": KAFKA_BINDING_VERSION,
            }
        }
    return result


def _one_channel_per_topic(raw: dict[str, Any], docs: list[TopicDoc]) -> dict[str, Any]:
    """Regroup FastStream's channel-per-endpoint document into one channel per topic.

    FastStream keys each endpoint's channel and operation by the endpoint's title; every title
    here is an operation id, so each one is looked up, checked and moved under its topic.
    """
    channels_in: dict[str, Any] = raw["channels"]
    operations_in: dict[str, Any] = raw["operations"]
    messages_in: dict[str, Any] = raw["components"]["messages"]
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for doc in docs:
        schema_ref = {"$ref": f"#/components/schemas/{doc.message_name}"}
        for action, party in doc.endpoints():
            key = operation_id(action, party, doc.topic)
            endpoint_channel = channels_in.pop(key)
            (message_ref,) = endpoint_channel["messages"].values()
            generated = messages_in.pop(_target(message_ref))
            if endpoint_channel["address"] != doc.topic or generated["payload"] != schema_ref:
                raise RuntimeError(f"unexpected FastStream output for {key}: {endpoint_channel}")
            if doc.topic not in channels:
                channels[doc.topic] = _channel(doc, endpoint_channel)
                messages[doc.message_name] = _message(doc, generated)
            operations[key] = _operation(doc, action, party, operations_in.pop(key))
    leftovers = list(channels_in) + list(operations_in) + list(messages_in)
    if leftovers:
        raise RuntimeError(f"FastStream documented endpoints nobody declared: {leftovers}")
    components = {**raw["components"], "messages": messages}
    components["schemas"] = dict(sorted(components.get("schemas", {}).items()))
    first = {"asyncapi": raw["asyncapi"], "info": raw["info"]}
    return {
        **first,
        **{k: v for k, v in raw.items() if k not in first},
        "channels": channels,
        "operations": operations,
        "components": components,
    }


def document(topics: Topics | None = None) -> dict[str, Any]:
    """The AsyncAPI 3.0 document as JSON-compatible data."""
    with warnings.catch_warnings():
        # FastStream warns when two endpoints overwrite each other's channel or schema: that is
        # a mistake in the tables above, never something to publish.
        warnings.simplefilter("error", RuntimeWarning)
        raw = build_spec_app(topics).to_specification().to_jsonable()
    return _one_channel_per_topic(raw, topic_docs(topics))


def render(format: Format = "yaml") -> str:
    """The AsyncAPI document of the default topics as YAML or JSON text (deterministic)."""
    data = document()
    if format == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if format == "yaml":
        import yaml

        return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))
    raise ValueError(f"unknown format {format!r}; use 'yaml' or 'json'")
