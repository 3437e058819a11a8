"""A provider whose tools depend on what its client declared, on the official Python SDK
(`mcp==2.3.0`): it decides as the reference server `server-everything` does, but per
request, as 2026-07-28 lets a server (each request carries its client's capabilities).

    echo           to every client ({"text"} back as text)
    sample         to a client that declared `sampling`
    elicit         to one that declared `elicitation` (any mode)
    elicit-url     to one that declared `elicitation.url`
    list-roots     to one that declared `roots`

It speaks both eras over stdio (`server/discover` makes the connection 2026-07-28,
`initialize` makes it legacy, with the capabilities of the handshake). Run it with the
SDK's interpreter: `target/test-tools/mcp-venv/bin/python tests/providers/capability_tools.py`.
"""

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp_types.jsonrpc import INVALID_PARAMS

NO_ARGS = {"type": "object", "properties": {}}


def declared(ctx, capability: str, mode: str | None = None) -> bool:
    caps = ctx.session.client_capabilities
    value = getattr(caps, capability, None) if caps is not None else None
    if value is None:
        return False
    return mode is None or getattr(value, mode, None) is not None


async def list_tools(ctx, params):
    tools = [
        {
            "name": "echo",
            "description": "Echoes its text",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
    ]
    for name, capability, mode in [
        ("sample", "sampling", None),
        ("elicit", "elicitation", None),
        ("elicit-url", "elicitation", "url"),
        ("list-roots", "roots", None),
    ]:
        if declared(ctx, capability, mode):
            tools.append({"name": name, "description": f"Needs {capability}", "inputSchema": NO_ARGS})
    return types.ListToolsResult.model_validate({"tools": tools})


async def call_tool(ctx, params: types.CallToolRequestParams):
    if params.name != "echo":
        raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def main() -> None:
    server = Server("capability-tools", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
