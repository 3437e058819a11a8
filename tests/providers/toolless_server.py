"""A provider with no tools, on the official Python SDK (`mcp==2.3.0`): one resource and
one prompt, and instructions for its clients.

It is the low-level `mcp.server.lowlevel.Server` with no `tools/list` handler, so it
declares no `tools` capability and answers `tools/list` with -32601 (Method not found), as
every server that offers only resources or prompts does. It speaks both eras over stdio:
`server/discover` makes the connection 2026-07-28, `initialize` makes it legacy.

    resources  toolless://notes (text/plain: "The notes of the toolless provider.")
    prompts    summarize (one optional argument, `topic`)

Run it with the SDK's interpreter: `target/test-tools/mcp-venv/bin/python
tests/providers/toolless_server.py`.
"""

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp_types.jsonrpc import INVALID_PARAMS

NOTES_URI = "toolless://notes"
NOTES_TEXT = "The notes of the toolless provider."
INSTRUCTIONS = "The toolless provider offers its notes as a resource and a prompt to summarize them."


async def list_resources(ctx, params):
    return types.ListResourcesResult(
        resources=[types.Resource(uri=NOTES_URI, name="notes", mime_type="text/plain")]
    )


async def read_resource(ctx, params: types.ReadResourceRequestParams):
    if str(params.uri) != NOTES_URI:
        raise MCPError(INVALID_PARAMS, "Resource not found", {"uri": str(params.uri)})
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=NOTES_URI, mime_type="text/plain", text=NOTES_TEXT)]
    )


async def list_prompts(ctx, params):
    argument = types.PromptArgument(name="topic", description="What to summarize", required=False)
    return types.ListPromptsResult(
        prompts=[types.Prompt(name="summarize", description="Summarizes the notes", arguments=[argument])]
    )


async def get_prompt(ctx, params: types.GetPromptRequestParams):
    if params.name != "summarize":
        raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")
    topic = (params.arguments or {}).get("topic", "everything")
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"Summarize {topic}."))
    return types.GetPromptResult(description="Summarizes the notes", messages=[message])


def build() -> Server:
    return Server(
        "toolless",
        version="1.0.0",
        instructions=INSTRUCTIONS,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def main() -> None:
    server = build()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
