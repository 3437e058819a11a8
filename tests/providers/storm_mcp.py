"""A stdio MCP provider that floods the hub with notifications/tools/list_changed.

Tools: `storm {count, padBytes}` starts a thread that sends `count` list_changed
notifications as fast as it can (each padded with `padBytes` bytes in its params) while the
main loop keeps answering; the call itself is answered once the storm is over. Every start
and every `tools/list` request is appended to the file named by $STORM_MCP_LOG, so a test
can tell how many relists the storm cost.
"""

import json
import os
import sys
import threading

LOG = os.environ.get("STORM_MCP_LOG")
OUT = threading.Lock()


def log(line):
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


def send(message):
    line = json.dumps(message) + "\n"
    with OUT:
        sys.stdout.write(line)
        sys.stdout.flush()


TOOLS = [
    {"name": "storm", "description": "Floods list_changed", "inputSchema": {"type": "object", "properties": {
        "count": {"type": "integer"}, "padBytes": {"type": "integer"}}}},
]


def storm(id, count, pad):
    notification = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                               "params": {"pad": "p" * pad}}) + "\n"
    sent = 0
    try:
        for _ in range(count):
            with OUT:
                sys.stdout.write(notification)
            sent += 1
        with OUT:
            sys.stdout.flush()
    except (BrokenPipeError, OSError):
        pass
    log("stormed %d" % sent)
    try:
        send({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "sent %d" % sent}]}})
    except (BrokenPipeError, OSError):
        pass


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
        send({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "storm", "version": "1"},
        }})
    elif method == "tools/list":
        log("tools/list")
        send({"jsonrpc": "2.0", "id": id, "result": {"tools": TOOLS}})
    elif method == "tools/call" and params.get("name") == "storm":
        args = params.get("arguments") or {}
        threading.Thread(target=storm, args=(id, int(args.get("count", 100000)), int(args.get("padBytes", 0))),
                         daemon=True).start()
    elif id is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no " + str(method)}})
