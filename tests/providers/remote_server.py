"""A remote MCP server for the hub's tests, on the official Python SDK (`mcp==2.3.0`).

It serves Streamable HTTP at /mcp, or the older HTTP+SSE transport (2024-11-05) at /sse
with --sse, on 127.0.0.1 and --port (default: one the system picks); the first line it
prints on stdout is its URL. With --stdio it speaks over its stdin and stdout instead (as a
ChatOS app's `ai.mcp` server does). With --token T every request must carry `Authorization: Bearer T`
(else 401), so a test can see the hub send the headers a package declares.

Tools:
  echo(text)   answers the text
  whoami()     answers, as JSON, the Authorization header's scheme (never the token), the
               request's `_meta` and the transport it came over
  slow(seconds) sleeps, then answers "done" (a call the hub can time out or cancel)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer


def build(transport: str) -> MCPServer:
    server = MCPServer("remote-test-server")

    @server.tool(description="Answers the text it is given")
    def echo(text: str) -> str:
        return text

    @server.tool(description="What the server saw of this request")
    def whoami(ctx: Context) -> str:
        request = ctx.request_context.request
        authorization = request.headers.get("authorization", "") if request is not None else ""
        meta = ctx.request_context.meta
        seen = dict(meta) if isinstance(meta, dict) else (meta.model_dump(by_alias=True, exclude_none=True) if meta else {})
        return json.dumps({"auth": authorization.split(" ")[0], "meta": seen, "transport": transport})

    @server.tool(description="Sleeps, then answers done")
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    return server


class RequireToken:
    """Answers 401 to a request without `Authorization: Bearer <token>`."""

    def __init__(self, app, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != self.expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"no or wrong token"})
            return
        await self.app(scope, receive, send)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sse", action="store_true", help="serve the HTTP+SSE transport at /sse")
    parser.add_argument("--token", help="require Authorization: Bearer TOKEN")
    parser.add_argument("--port", type=int, default=0, help="the port (default: any free one)")
    parser.add_argument("--stdio", action="store_true", help="speak over stdin and stdout")
    options = parser.parse_args()
    if options.stdio:
        build("stdio").run("stdio")
        return
    transport = "sse" if options.sse else "streamable-http"
    server = build(transport)
    app = server.sse_app() if options.sse else server.streamable_http_app()
    if options.token:
        app = RequireToken(app, options.token)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", options.port))
    port = sock.getsockname()[1]
    print(f"http://127.0.0.1:{port}/{'sse' if options.sse else 'mcp'}", flush=True)
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
