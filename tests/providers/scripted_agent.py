"""A scripted agent for the agent backend's tests, on the official Python SDK (`mcp==2.3.0`).

It does what a real agent wrapper does — reads its task as one JSON line on stdin, connects
to the session's MCP endpoint with the session's bearer token — and then, instead of asking
a model, follows the script in the task's input (`input.script`), one step at a time:

  {"list": true}                      list the tools; prints `TOOLS a,b,c`
  {"call": NAME, "arguments": {...}}  call a tool; prints `CALLED NAME <json>` with
                                      `isError` and the text (or `ERROR <message>`)
  {"submit": {...}}                   call the submit tool with these arguments; prints
                                      `SUBMITTED <json>` as above
  {"sleep": SECONDS}                  sleep
  {"token": true}                     print the session's token (`TOKEN <token>`), so a test can
                                      try it after the session ended
  {"child": true}                     start a child process (`sleep 600`) that stays in the
                                      session's process group; prints `CHILD <pid>`
  {"distill": true}                   what the hourly distill job asks, minus the thinking:
                                      claim a batch, complete it with no cards (a zeroReason),
                                      and submit the outcome; prints `CLAIMED` and `COMPLETED`
                                      (an automation's task without a script does this)
  {"exit": CODE}                      exit at once with CODE, whatever comes next
  {"http": [METHOD, PATH, BODY]}      an API request (PATH under the host's API) carrying the
                                      session's token, as an agent that oversteps would;
                                      prints `HTTP <status> <body>`

`input.mode` is the SDK's connect mode (`auto`, the default: 2026-07-28; or `legacy`).
Every line goes to stdout, which the host keeps in `logs/agent-<session>.log`; the task
itself is printed first as `TASK <json>` with the token left out.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import mcp
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def say(*parts: object) -> None:
    print(*parts, flush=True)


def shown(result: object) -> str:
    text = " ".join(getattr(c, "text", "") for c in getattr(result, "content", []))
    return json.dumps({"isError": bool(result.is_error), "text": text}, ensure_ascii=False)


async def run(task: dict) -> int:
    data = task.get("input") or {}
    script = data.get("script") or ([{"distill": True}] if task.get("purpose") == "automation" else [])
    headers = {"Authorization": f"Bearer {task['mcp']['token']}"}
    http = create_mcp_http_client(headers=headers)
    transport = streamable_http_client(task["mcp"]["url"], http_client=http)
    async with mcp.Client(transport, mode=data.get("mode", "auto")) as client:
        for step in script:
            if "exit" in step:
                say("EXIT", step["exit"])
                os._exit(int(step["exit"]))
            elif "list" in step:
                tools = await client.list_tools()
                say("TOOLS", ",".join(sorted(t.name for t in tools.tools)))
            elif "call" in step:
                try:
                    result = await client.call_tool(step["call"], step.get("arguments") or {})
                    say("CALLED", step["call"], shown(result))
                except Exception as error:  # noqa: BLE001 - the test reads what failed
                    say("ERROR", step["call"], str(error).replace("\n", " "))
            elif "submit" in step:
                result = await client.call_tool(task["submitTool"], step["submit"])
                say("SUBMITTED", shown(result))
            elif "sleep" in step:
                await asyncio.sleep(float(step["sleep"]))
            elif "http" in step:
                method, path, body = step["http"]
                base = task["mcp"]["url"].split("/mcp/s/")[0]
                answer = await http.request(method, base + path, json=body)
                say("HTTP", answer.status_code, answer.text.replace("\n", " "))
            elif "distill" in step:
                claimed = (await client.call_tool("butler__distill_claim", {})).structured_content or {}
                say("CLAIMED", json.dumps({"batchId": claimed.get("batchId"), "items": len(claimed.get("items") or [])}))
                if not claimed.get("batchId"):
                    outcome = {"outcome": "nothing", "summary": "no batch to distill"}
                else:
                    done = await client.call_tool("butler__distill_complete", {
                        "batchId": claimed["batchId"], "lease": claimed["lease"], "candidates": [],
                        "zeroReason": "the scripted agent writes no cards"})
                    say("COMPLETED", shown(done))
                    failed = bool(done.is_error)
                    outcome = {"outcome": "failed" if failed else "done", "summary": "completed with no cards"}
                result = await client.call_tool(task["submitTool"], outcome)
                say("SUBMITTED", shown(result))
            elif "token" in step:
                say("TOKEN", task["mcp"]["token"])
            elif "child" in step:
                child = subprocess.Popen(["sleep", "600"])
                say("CHILD", child.pid)
    return 0


def main() -> int:
    task = json.loads(sys.stdin.readline())
    say("TASK", json.dumps({k: v for k, v in task.items() if k != "mcp"} | {"url": task["mcp"]["url"]}, ensure_ascii=False))
    return asyncio.run(run(task))


if __name__ == "__main__":
    sys.exit(main())
