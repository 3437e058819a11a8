"""A small stdio MCP provider that misbehaves on request, for the hub's tests.

Tools: echo, crash (exits at once), hang (never answers; records the cancellation it gets),
progress (sends progress notifications before answering), env (its environment's names),
plus two tools whose names cannot be public ("bad name!" and one too long). Every start
and every cancellation is appended to the file named by $FAKE_MCP_LOG.
"""

import json
import os
import sys

LOG = os.environ.get("FAKE_MCP_LOG")


def log(line):
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(id, value):
    send({"jsonrpc": "2.0", "id": id, "result": value})


def text(value):
    return {"content": [{"type": "text", "text": value}]}


TOOLS = [
    {"name": "echo", "description": "Echoes text", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "crash", "description": "Exits at once", "inputSchema": {"type": "object"}},
    {"name": "hang", "description": "Never answers", "inputSchema": {"type": "object"}},
    {"name": "progress", "description": "Reports progress", "inputSchema": {"type": "object"}},
    {"name": "env", "description": "Lists its environment", "inputSchema": {"type": "object"}},
    {"name": "bad name!", "description": "Not a valid public name", "inputSchema": {"type": "object"}},
    {"name": "x" * 70, "description": "Too long", "inputSchema": {"type": "object"}},
]

log("started %d" % os.getpid())
for raw in sys.stdin:
    raw = raw.strip()
    if not raw:
        continue
    message = json.loads(raw)
    method = message.get("method")
    id = message.get("id")
    params = message.get("params") or {}
    if method == "initialize":
        result(id, {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}, "prompts": {}, "resources": {}},
            "serverInfo": {"name": "fake", "version": "1"},
        })
    elif method == "tools/list":
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
            for step in range(1, 4):
                if token is not None:
                    send({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": token, "progress": step, "total": 3}})
            result(id, text("done"))
        elif name == "env":
            result(id, text(json.dumps(sorted(os.environ.keys()))))
        else:
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "unknown tool " + str(name)}})
    elif id is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no " + str(method)}})
