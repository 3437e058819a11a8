"""Conformance provider: a Python port of the MCP conformance suite's "everything" server.

The official conformance suite (github.com/modelcontextprotocol/conformance) checks an
MCP server against a fixed set of fixtures: tools named `test_*`, prompts, resources, a
resource template, logging, completion and subscriptions.  Its reference fixture is a
TypeScript server (examples/servers/typescript/everything-server.ts).  This file is our
own implementation of the same fixtures on the official Python SDK (`mcp==2.3.0`, the
low-level `mcp.server.lowlevel.Server`), so that the hub can front it and the suite's
server scenarios can be run *through* the hub.

It speaks the handshake-era revisions (2025-03-26, 2025-06-18, 2025-11-25) and does not
implement the 2026-07-28 multi-round-trip (MRTR) or stateless fixtures.

Run it (with the SDK's virtualenv interpreter):

    PY=target/test-tools/mcp-venv/bin/python
    $PY tests/providers/conformance_server.py               # stdio (default)
    $PY tests/providers/conformance_server.py --http 3001   # http://127.0.0.1:3001/mcp

and point the suite at the HTTP endpoint, e.g.

    cd target/test-tools/mcp-js && npx conformance server \\
        --url http://127.0.0.1:3001/mcp --scenario tools-call-simple-text

What is served (names and contents are the ones the suite's scenarios check):

  tools      test_simple_text, test_image_content, test_audio_content,
             test_embedded_resource, test_multiple_content_types,
             test_tool_with_logging, test_tool_with_progress, test_error_handling,
             test_sampling, test_elicitation, test_elicitation_sep1034_defaults,
             test_elicitation_sep1330_enums, test_reconnection,
             json_schema_2020_12_tool
             plus three triggers that are not in the reference fixture, so that a
             client (or a hub in between) can observe server-initiated notifications
             on demand: test_trigger_tool_change, test_trigger_prompt_change
             (send notifications/{tools,prompts}/list_changed) and
             test_trigger_resource_update (bumps test://watched-resource and sends
             notifications/resources/updated if this connection subscribed to it),
             and test_list_roots (asks the client roots/list and lists them)
  prompts    test_simple_prompt, test_prompt_with_arguments (arg1, arg2),
             test_prompt_with_embedded_resource (resourceUri), test_prompt_with_image
  resources  test://static-text, test://static-binary, test://watched-resource
             (subscribe/unsubscribe), template test://template/{id}/data
  logging    logging/setLevel; log notifications below the level set are dropped
  completion completion/complete for prompt arguments and the template's {id}

Server-initiated requests (sampling/createMessage, elicitation/create) go out as
ordinary JSON-RPC requests: over stdio on stdout, over HTTP on the tool call's SSE
stream.  Notifications a tool causes ride the same request-scoped channel.

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
from mcp_types.jsonrpc import INVALID_PARAMS

from mcp import MCPError, UriTemplate
from mcp.server.context import ServerRequestContext as Ctx
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata

# Sampling, elicitation, logging and subscriptions are deprecated in the 2026-07-28
# revision; this server exists to exercise them at the 2025 revisions, so the SDK's
# reminders would only be noise on stderr.
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
    """Sends notifications/message unless it is below the level the client set."""
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


async def elicit(ctx: Ctx, message: str, schema: dict[str, Any], done: str) -> dict[str, Any]:
    """Asks the client for input with elicitation/create and reports what came back as
    `<done>: action=..., content={...}`."""
    if not client_has(ctx, "elicitation"):
        return tool_result(text("Elicitation not supported: the client did not declare it"), is_error=True)
    request = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))
    try:
        answer = await ctx.session.send_request(request, types.ElicitResult, metadata=_related(ctx))
    except Exception as e:  # an error answer, a malformed answer, no back-channel
        return tool_result(text(f"Elicitation failed: {e}"), is_error=True)
    content = json.dumps(answer.content or {}, separators=(",", ":"))
    return tool_result(text(f"{done}: action={answer.action}, content={content}"))


def _related(ctx: Ctx) -> ServerMessageMetadata:
    """Marks a server-to-client request as belonging to the request being handled, so
    over HTTP it goes out on that request's SSE stream."""
    return ServerMessageMetadata(related_request_id=ctx.request_id)


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
    prompt = str(args.get("prompt", ""))
    request = types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
            max_tokens=100,
        )
    )
    try:
        answer = await ctx.session.send_request(request, types.CreateMessageResult, metadata=_related(ctx))
    except Exception as e:  # an error answer, a malformed answer, no back-channel
        return tool_result(text(f"Sampling failed: {e}"), is_error=True)
    reply = getattr(answer.content, "text", None) or "No response"
    return tool_result(text(f"LLM response: {reply}"))


async def list_roots(ctx, args):
    if not client_has(ctx, "roots"):
        return tool_result(text("Roots not supported: the client did not declare it"), is_error=True)
    try:
        answer = await ctx.session.send_request(
            types.ListRootsRequest(), types.ListRootsResult, metadata=_related(ctx)
        )
    except Exception as e:  # an error answer, a malformed answer, no back-channel
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


async def trigger_tool_change(ctx, args):
    await notify(ctx, types.ToolListChangedNotification())
    return tool_result(text("Sent notifications/tools/list_changed"))


async def trigger_prompt_change(ctx, args):
    await notify(ctx, types.PromptListChangedNotification())
    return tool_result(text("Sent notifications/prompts/list_changed"))


_watched_revision = itertools.count(1)
_watched_text = "Watched resource content"


async def trigger_resource_update(ctx, args):
    global _watched_text
    _watched_text = f"Watched resource content (revision {next(_watched_revision)})"
    if WATCHED_URI not in state_of(ctx).subscriptions:
        return tool_result(text(f"Updated {WATCHED_URI}; not subscribed, so no notification sent"))
    await notify(
        ctx, types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=WATCHED_URI))
    )
    return tool_result(text(f"Updated {WATCHED_URI} and sent notifications/resources/updated"))


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
}


async def list_tools(ctx, params):
    return {
        "tools": [
            {"name": name, "description": description, "inputSchema": schema}
            for name, (description, schema, _) in TOOLS.items()
        ]
    }


async def call_tool(ctx, params: types.CallToolRequestParams):
    entry = TOOLS.get(params.name)
    if entry is None:
        raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
    return await entry[2](ctx, params.arguments or {})


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
]


def user(content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": content}


async def list_prompts(ctx, params):
    return {"prompts": PROMPTS}


async def get_prompt(ctx, params: types.GetPromptRequestParams):
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
    else:  # test_prompt_with_image
        messages = [
            user({"type": "image", "data": PNG_1X1, "mimeType": "image/png"}),
            user(text("Please analyze the image above.")),
        ]
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
    without passing any NotificationOptions)."""

    def create_initialization_options(
        self, notification_options=None, experimental_capabilities=None, extensions=None
    ) -> InitializationOptions:
        if notification_options is None:
            notification_options = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        return super().create_initialization_options(notification_options, experimental_capabilities, extensions)


def build_server() -> ConformanceServer:
    server = ConformanceServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
    )
    # Registered directly rather than via the deprecated `on_set_logging_level=`
    # keyword; the logging capability follows from the handler being present.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
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
