"""A small stdio MCP provider that misbehaves on request, for the hub's tests.

Tools: echo, crash (exits at once), hang (never answers; records the cancellation it gets),
progress (sends `steps` progress notifications, 3 unless told, `pause` seconds apart, before answering when given a token, and says whether it was), env (its environment's names, or with `name` that variable's value),
deaf (stops reading its stdin for good, answering nothing: the pipe fills),
plus two tools whose names cannot be public ("bad name!" and one too long). Every start
and every cancellation is appended to the file named by $FAKE_MCP_LOG.
"""

import json
import os
import time

from stdio_provider import Log, error, result, send, serve, text

log = Log("FAKE_MCP_LOG")


TOOLS = [
    {"name": "echo", "description": "Echoes text", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "crash", "description": "Exits at once", "inputSchema": {"type": "object"}},
    {"name": "hang", "description": "Never answers", "inputSchema": {"type": "object"}},
    {"name": "progress", "description": "Reports progress", "inputSchema": {"type": "object"}},
    {"name": "env", "description": "Lists its environment", "inputSchema": {"type": "object"}},
    {"name": "deaf", "description": "Stops reading its input", "inputSchema": {"type": "object"}},
    {"name": "bad name!", "description": "Not a valid public name", "inputSchema": {"type": "object"}},
    {"name": "x" * 70, "description": "Too long", "inputSchema": {"type": "object"}},
]


def handle(method, id, params):
    if method == "tools/list":
        result(id, {"tools": TOOLS})
    elif method == "prompts/list":
        result(id, {"prompts": [{"name": "greet", "description": "A greeting"}]})
    elif method == "prompts/get":
        result(id, {"messages": [{"role": "user", "content": {"type": "text", "text": "hello from fake"}}]})
    elif method == "resources/list":
        result(id, {"resources": [{"uri": "fake://readme", "name": "readme", "mimeType": "text/plain"}]})
    elif method == "resources/templates/list":
        result(id, {"resourceTemplates": []})
    elif method == "resources/read":
        result(id, {"contents": [{"uri": params.get("uri"), "text": "the fake readme"}]})
    elif method == "notifications/cancelled":
        log("cancelled %s %s" % (params.get("requestId"), params.get("reason", "")))
    elif method == "tools/call":
        call(id, params)
    else:
        return False
    return True


def call(id, params):
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        result(id, text(args.get("text", "")))
    elif name == "crash":
        os._exit(3)
    elif name == "hang":
        log("hanging %s" % id)
    elif name == "progress":
        token = (params.get("_meta") or {}).get("progressToken")
        steps = int(args.get("steps", 3))
        for step in range(1, steps + 1):
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": step, "total": steps}})
            time.sleep(float(args.get("pause", 0)))
        result(id, text("done" if token is not None else "done, no token given"))
    elif name == "env":
        if "name" in args:
            result(id, text(os.environ.get(args["name"], "")))
        else:
            result(id, text(json.dumps(sorted(os.environ.keys()))))
    elif name == "deaf":
        log("deaf %s" % id)
        time.sleep(3600)
    else:
        error(id, -32602, "unknown tool " + str(name))


# The hub's probes (BUTLER_MCP_PROBE=1: a process that only lists, for clients of fewer
# capabilities) are logged apart, so that "started" counts the provider's own runs.
log(("probed %d" if os.environ.get("BUTLER_MCP_PROBE") == "1" else "started %d") % os.getpid())
serve("fake", {"tools": {"listChanged": True}, "prompts": {}, "resources": {}}, handle)
