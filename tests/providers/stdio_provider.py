"""What the test providers share: a stdio MCP server's framing (one JSON-RPC message per
line), a thread-safe writer, a log file for the test to read, and the main loop that
answers `initialize` and refuses unknown methods, handing everything else to the
provider's own handler.
"""

import json
import os
import sys
import threading

_OUT = threading.Lock()


class Log:
    """Appends lines to the file named by the environment variable `variable`, if set."""

    def __init__(self, variable):
        self.path = os.environ.get(variable)

    def __call__(self, line):
        if self.path:
            with open(self.path, "a") as f:
                f.write(line + "\n")


def write(text):
    """Writes raw text to stdout without flushing (under the writer lock)."""
    with _OUT:
        sys.stdout.write(text)


def send(message):
    """Sends one JSON-RPC message."""
    line = json.dumps(message) + "\n"
    with _OUT:
        sys.stdout.write(line)
        sys.stdout.flush()


def result(id, value):
    send({"jsonrpc": "2.0", "id": id, "result": value})


def error(id, code, message):
    send({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})


def text(value):
    """A tool result with one text item."""
    return {"content": [{"type": "text", "text": value}]}


def serve(name, capabilities, handle):
    """Answers `initialize` as server `name` with `capabilities`; every other message goes
    to `handle(method, id, params)`, which returns False for a method it does not know
    (then a request gets -32601)."""
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
                "capabilities": capabilities,
                "serverInfo": {"name": name, "version": "1"},
            })
        elif not handle(method, id, params) and id is not None:
            error(id, -32601, "no " + str(method))
