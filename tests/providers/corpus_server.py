"""A stdio MCP provider that lists the tools of one server of the tool-search corpus
(`tests/fixtures/tool-search/corpus/<namespace>.json`, as that server listed them) and
answers every call with the tool's name and arguments: the real definitions of hundreds of
tools behind the hub, for the tool-search benchmark, without hundreds of real servers.

Usage: corpus_server.py CORPUS_FILE
"""

import json
import sys

from stdio_provider import result, serve, text

with open(sys.argv[1], encoding="utf-8") as f:
    CORPUS = json.load(f)


def handle(method, id, params):
    if method == "tools/list":
        result(id, {"tools": CORPUS["tools"]})
    elif method == "tools/call":
        called = {"called": params.get("name"), "arguments": params.get("arguments") or {}}
        result(id, text(json.dumps(called)))
    elif method in ("ping",):
        result(id, {})
    elif method.startswith("notifications/"):
        pass
    else:
        return False
    return True


serve(CORPUS["namespace"], {"tools": {}}, handle)
