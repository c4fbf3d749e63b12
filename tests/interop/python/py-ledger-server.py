"""The fault-injection ledger's server side (tests/src/faults.rs) on the official Python SDK
(PyPI `mcp`, pinned in requirements.txt): a stateful Streamable HTTP server with an ordered
in-memory event store (so streams are resumable), retry 300 ms, and the two ledger tools, for
`mcp-faults against`.

Usage: python py-ledger-server.py   (prints "py ledger server on <url>")
"""

from __future__ import annotations

import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore

mcp = MCPServer("py-ledger-server")


class OrderedEventStore(EventStore):
    """Events in insertion order under a counter; a replay sends exactly those after the id."""

    def __init__(self) -> None:
        self.seq = 0
        self.events: dict[str, tuple[str, object]] = {}

    async def store_event(self, stream_id, message):  # noqa: ANN001, ANN201 - the SDK's types
        self.seq += 1
        event_id = str(self.seq)
        self.events[event_id] = (stream_id, message)
        return event_id

    async def replay_events_after(self, last_event_id, send_callback: EventCallback):  # noqa: ANN001, ANN201
        last = self.events.get(last_event_id)
        if last is None:
            return None
        stream_id = last[0]
        after = int(last_event_id)
        for event_id, (sid, message) in list(self.events.items()):
            if int(event_id) > after and sid == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


@mcp.tool(description="Sends progress 1..n on the request's stream, interval_ms apart")
async def ledger_count(n: int, ctx: Context, interval_ms: int = 5) -> str:
    for k in range(1, n + 1):
        await ctx.report_progress(k, n)
        if interval_ms > 0 and k < n:
            await anyio.sleep(interval_ms / 1000)
    return f"counted {n}"


@mcp.tool(description="Sends n log messages {burst, seq} not tied to the request (the GET stream)")
async def ledger_burst(burst: int, n: int, ctx: Context, interval_ms: int = 0) -> str:
    for seq in range(1, n + 1):
        await ctx.request_context.session.send_log_message(  # pyright: ignore[reportDeprecated]
            level="info", data={"burst": burst, "seq": seq}, logger="ledger"
        )
        if interval_ms > 0 and seq < n:
            await anyio.sleep(interval_ms / 1000)
    return f"burst {burst} sent"


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # Listening before the URL is announced: a client may connect at once.
    sock.listen(128)
    app = mcp.streamable_http_app(event_store=OrderedEventStore(), retry_interval=300)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"py ledger server on http://127.0.0.1:{port}/mcp", flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit(0)
