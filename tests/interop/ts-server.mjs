// The official TypeScript SDK server (stateful Streamable HTTP) for our client to talk to.
// Usage: node ts-server.mjs. Listens on 127.0.0.1:0 and prints "ts MCP server on <url>".
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const transports = new Map();

function newServer() {
  const server = new McpServer(
    { name: "ts-interop-server", version: "1.0.0" },
    { capabilities: { logging: {} } },
  );
  server.registerTool(
    "echo",
    { description: "Returns its text", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );
  server.registerTool(
    "notify",
    { description: "Sends a log message not tied to the request (so on the GET stream)" },
    async () => {
      // No relatedRequestId: the transport sends it on the standalone GET stream.
      await server.server.sendLoggingMessage({
        level: "info",
        logger: "interop",
        data: "notification on the GET stream",
      });
      return { content: [{ type: "text", text: "notification sent" }] };
    },
  );
  server.registerTool(
    "sample",
    { description: "Asks the client for a sampling", inputSchema: { prompt: z.string() } },
    async ({ prompt }, extra) => {
      const r = await server.server.createMessage(
        { messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 100 },
        { relatedRequestId: extra.requestId },
      );
      const text = r.content.type === "text" ? r.content.text : JSON.stringify(r.content);
      return { content: [{ type: "text", text: `LLM response: ${text}` }] };
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
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (e) {
    console.error("ts-server:", e);
    if (!res.headersSent) res.writeHead(500).end();
  }
});

http.listen(0, "127.0.0.1", () => {
  const { port } = http.address();
  console.log(`ts MCP server on http://127.0.0.1:${port}/mcp`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
