// The fault-injection ledger's server side (tests/src/faults.rs) on the official TypeScript
// SDK: a stateful Streamable HTTP server with an event store (so streams are resumable) and
// the two ledger tools, for `mcp-faults against`.
//
// Not the SDK's example InMemoryEventStore, which loses and repeats events on resume (seen
// through mcp-faults): it sorts ids `<stream>_<ms>_<random>` as strings, so events of one
// millisecond replay in random order, and it takes the stream id as the text before the first
// `_`, which for the standalone GET stream (`_GET_stream`) is empty, so a resumed GET stream
// is never bound again and every later notification is dropped. OrderedEventStore keeps
// insertion order with a counter instead.
// Usage: node ts-ledger-server.mjs   (prints "ts ledger server on <url>")
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class OrderedEventStore {
  constructor() {
    this.seq = 0;
    this.events = new Map(); // id -> { streamId, message }, in insertion order
  }
  async storeEvent(streamId, message) {
    const id = String(++this.seq);
    this.events.set(id, { streamId, message });
    return id;
  }
  async getStreamIdForEventId(id) {
    return this.events.get(id)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const last = this.events.get(lastEventId);
    if (!last) return "";
    const after = Number(lastEventId);
    for (const [id, e] of this.events) {
      if (Number(id) > after && e.streamId === last.streamId) await send(id, e.message);
    }
    return last.streamId;
  }
}
const transports = new Map();

function newServer() {
  const server = new McpServer(
    { name: "ts-ledger-server", version: "1.0.0" },
    { capabilities: { logging: {} } },
  );
  server.registerTool(
    "ledger_count",
    {
      description: "Sends progress 1..n on the request's stream, interval_ms apart",
      inputSchema: { n: z.number().int(), interval_ms: z.number().int().optional() },
    },
    async ({ n, interval_ms }, extra) => {
      const token = extra._meta?.progressToken;
      for (let k = 1; k <= n; k++) {
        if (token !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress: k, total: n },
          });
        }
        if ((interval_ms ?? 5) > 0 && k < n) await sleep(interval_ms ?? 5);
      }
      return { content: [{ type: "text", text: `counted ${n}` }] };
    },
  );
  server.registerTool(
    "ledger_burst",
    {
      description: "Sends n log messages {burst, seq} not tied to the request (the GET stream)",
      inputSchema: {
        burst: z.number().int(),
        n: z.number().int(),
        interval_ms: z.number().int().optional(),
      },
    },
    async ({ burst, n, interval_ms }) => {
      for (let seq = 1; seq <= n; seq++) {
        await server.server.sendLoggingMessage({ level: "info", logger: "ledger", data: { burst, seq } });
        if ((interval_ms ?? 0) > 0 && seq < n) await sleep(interval_ms);
      }
      return { content: [{ type: "text", text: `burst ${burst} sent` }] };
    },
  );
  return server;
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const raw = Buffer.concat(chunks).toString("utf8");
  return raw ? JSON.parse(raw) : undefined;
}

const http = createServer(async (req, res) => {
  try {
    if (!req.url.startsWith("/mcp")) {
      res.writeHead(404).end();
      return;
    }
    const sid = req.headers["mcp-session-id"];
    const body = req.method === "POST" ? await readBody(req) : undefined;
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid || req.method !== "POST" || !isInitializeRequest(body)) {
        res.writeHead(sid ? 404 : 400, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "no session" }, id: null }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        eventStore: new OrderedEventStore(),
        retryInterval: 300,
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (e) {
    console.error("ts-ledger-server:", e);
    if (!res.headersSent) res.writeHead(500).end();
  }
});

http.listen(0, "127.0.0.1", () => {
  const { port } = http.address();
  console.log(`ts ledger server on http://127.0.0.1:${port}/mcp`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
