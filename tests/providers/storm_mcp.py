"""A stdio MCP provider that floods the hub with notifications/tools/list_changed.

Tools: `storm {count, padBytes}` starts a thread that sends `count` list_changed
notifications as fast as it can (each padded with `padBytes` bytes in its params) while the
main loop keeps answering; the call itself is answered once the storm is over. Every start
and every `tools/list` request is appended to the file named by $STORM_MCP_LOG, so a test
can tell how many relists the storm cost.
"""

import json
import os
import threading

from stdio_provider import Log, result, serve, text, write

log = Log("STORM_MCP_LOG")


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
            write(notification)
            sent += 1
    except (BrokenPipeError, OSError):
        pass
    log("stormed %d" % sent)
    try:
        result(id, text("sent %d" % sent))
    except (BrokenPipeError, OSError):
        pass


def handle(method, id, params):
    if method == "tools/list":
        log("tools/list")
        result(id, {"tools": TOOLS})
    elif method == "tools/call" and params.get("name") == "storm":
        args = params.get("arguments") or {}
        threading.Thread(target=storm, args=(id, int(args.get("count", 100000)), int(args.get("padBytes", 0))),
                         daemon=True).start()
    else:
        return False
    return True


log("started %d" % os.getpid())
serve("storm", {"tools": {"listChanged": True}}, handle)
