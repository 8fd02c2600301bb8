"""``python -m bench.echo_server``: the MCP SDK's own floor for a tool round trip.

The same SDK server class and stdio transport as ``fabric-memory serve``, with one tool
that answers a small constant structured result at once: what any tool call costs
before the tool does anything.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

ANSWER = {"total": 0, "offset": 0, "hits": [], "next": None}


def main() -> None:
    server = MCPServer(name="echo", log_level="WARNING")

    @server.tool(name="echo", description="Answer a constant.")
    async def echo(query: str = "") -> CallToolResult:
        del query
        return CallToolResult(content=[TextContent(type="text", text='{"total":0}')],
                              structured_content=dict(ANSWER))

    server.run("stdio")


if __name__ == "__main__":
    main()
