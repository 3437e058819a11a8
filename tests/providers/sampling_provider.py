"""The smallest stdio MCP provider of a sampling round trip, for benchmark B15
(docs/benchmarks.md): one tool, `sample {"prompt": …}`, that asks its client one
`sampling/createMessage` and answers with `LLM response: <the text it got>`.

Standard library only and single-threaded (one message per line, read and answered in
turn), so its own time is small beside what a hub adds to the round trip. While it waits
for its client's answer it still answers `ping` and keeps any other answer for later; a
second call while one waits is refused (the bench makes one at a time).
"""

import json
import sys

read = sys.stdin.buffer.readline
out = sys.stdout.buffer

TOOL = {
    "name": "sample",
    "description": "Asks the client for one LLM completion of the prompt and returns its text",
    "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
}

answers = {}  # the client's answers that arrived while another was awaited, by id
asked = 0  # sampling requests sent
waiting = False  # a call waits for its sampling answer


def send(message):
    out.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    out.flush()


def result(id, value):
    send({"jsonrpc": "2.0", "id": id, "result": value})


def error(id, code, message):
    send({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})


def tool_text(value, is_error=False):
    answer = {"content": [{"type": "text", "text": value}]}
    if is_error:
        answer["isError"] = True
    return answer


def sample(prompt):
    """Asks the client, waits for its answer (handling what comes meanwhile), returns the tool result."""
    global asked, waiting
    asked += 1
    key = "s%d" % asked
    message = {"role": "user", "content": {"type": "text", "text": prompt}}
    send({"jsonrpc": "2.0", "id": key, "method": "sampling/createMessage",
          "params": {"messages": [message], "maxTokens": 16}})
    waiting = True
    try:
        while key not in answers:
            line = read()
            if not line:
                sys.exit(0)
            handle(line)
    finally:
        waiting = False
    answer = answers.pop(key)
    if "error" in answer:
        return tool_text("sampling failed: " + str(answer["error"].get("message")), is_error=True)
    content = (answer.get("result") or {}).get("content") or {}
    return tool_text("LLM response: " + str(content.get("text")))


def handle(line):
    line = line.strip()
    if not line:
        return
    message = json.loads(line)
    method = message.get("method")
    id = message.get("id")
    params = message.get("params") or {}
    if method is None:
        if id is not None:
            answers[id] = message
    elif method == "initialize":
        result(id, {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "sampling-provider", "version": "1"},
        })
    elif method == "ping":
        result(id, {})
    elif method == "tools/list":
        result(id, {"tools": [TOOL]})
    elif method == "tools/call":
        if params.get("name") != "sample":
            error(id, -32602, "no tool " + str(params.get("name")))
        elif waiting:
            error(id, -32603, "busy: one call at a time")
        else:
            result(id, sample(str((params.get("arguments") or {}).get("prompt", ""))))
    elif id is not None:
        error(id, -32601, "no " + str(method))


def main():
    while True:
        line = read()
        if not line:
            return
        handle(line)


if __name__ == "__main__":
    main()
