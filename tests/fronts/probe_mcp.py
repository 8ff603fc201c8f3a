"""A tiny stdio MCP server (the official ``mcp`` SDK) that front tests give a body as
the client's own server: its tool's name must reach the model's request."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool()
def lookup_code(name: str) -> str:
    """Look up the probe code of a name."""
    return f"probe code of {name}: 4417"


if __name__ == "__main__":
    server.run()
