"""The official Python SDK server (PyPI `mcp`, pinned in requirements.txt), serving both eras
on one endpoint, for our client to talk to.

Usage: python py-server.py. Listens on 127.0.0.1:0 and prints "py MCP server on <url>".
Tools: `echo(text)`; `notify()` sends a log message not tied to its request (legacy era: on
the GET stream); `sample(prompt)` asks the client's LLM (legacy era: a sampling/createMessage
request; modern era: an MRTR round, `InputRequiredResult` with `inputRequests`).
"""

from __future__ import annotations

import socket
import sys
from typing import Annotated

import anyio
import mcp_types as types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample

mcp = MCPServer("py-interop-server")


@mcp.tool(description="Returns its text")
def echo(text: str) -> str:
    return text


@mcp.tool(description="Sends a log message not tied to the request (so on the GET stream)")
async def notify(ctx: Context) -> str:
    # No related request id: the transport can only deliver it on the standalone stream.
    await ctx.request_context.session.send_log_message(  # pyright: ignore[reportDeprecated]
        level="info", data="notification on the GET stream", logger="interop"
    )
    return "notification sent"


def ask_llm(prompt: str) -> Sample:
    return Sample(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
    )


@mcp.tool(description="Asks the client for a sampling")
def sample(prompt: str, answer: Annotated[types.CreateMessageResult, Resolve(ask_llm)]) -> str:
    content = answer.content
    return f"LLM response: {getattr(content, 'text', content)}"


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # Listening before the URL is printed: a client that connects at once waits in the
    # backlog until uvicorn accepts, instead of being refused (a bound socket that does not
    # listen yet refuses connections).
    sock.listen(128)
    app = mcp.streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"py MCP server on http://127.0.0.1:{port}/mcp", flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit(0)
