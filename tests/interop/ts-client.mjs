// The official TypeScript SDK client against one of our servers (mcp-everything).
// Usage: node ts-client.mjs <url>. One line per check; exits 1 on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const url = process.argv[2];
if (!url) {
  console.error("usage: node ts-client.mjs <url>");
  process.exit(2);
}
const hardTimeout = setTimeout(() => {
  console.log("FAIL  hard timeout (30 s)");
  process.exit(1);
}, 30_000);

let failures = 0;
const ok = (name) => console.log(`ok    ${name}`);
const fail = (name, why) => {
  failures++;
  console.log(`FAIL  ${name}: ${why}`);
};
const withTimeout = (p, ms, what) =>
  Promise.race([
    p,
    new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms)),
  ]);
const text = (result) => (result.content ?? []).map((c) => c.text ?? "").join("");

const client = new Client(
  { name: "ts-interop-client", version: "1.0.0" },
  { capabilities: { sampling: {} } },
);
let samplingSeen = null;
client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  samplingSeen = req.params;
  return {
    role: "assistant",
    content: { type: "text", text: "hello from the TS client" },
    model: "interop-model",
    stopReason: "endTurn",
  };
});
let onLog;
const logged = new Promise((resolve) => (onLog = resolve));
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  if (n.params.logger === "interop") onLog(n.params);
});

// Counts the GET streams the transport opens (and the server accepts), to show where the
// notification came from.
let getStreams = 0;
const countingFetch = async (input, init) => {
  const res = await fetch(input, init);
  if ((init?.method ?? "GET") === "GET" && res.ok) getStreams++;
  return res;
};
const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: countingFetch });
try {
  await withTimeout(client.connect(transport), 5000, "initialize");
  const info = client.getServerVersion();
  if (!transport.sessionId) throw new Error("no Mcp-Session-Id");
  ok(`initialize (server ${info?.name} ${info?.version}, session ${transport.sessionId})`);
} catch (e) {
  fail("initialize", e.message);
  process.exit(1);
}

const check = async (name, f) => {
  try {
    const detail = await f();
    ok(detail ? `${name} (${detail})` : name);
  } catch (e) {
    fail(name, e.message);
  }
};

await check("tools/list", async () => {
  const { tools } = await withTimeout(client.listTools(), 5000, "tools/list");
  const names = tools.map((t) => t.name);
  for (const n of ["echo", "test_sampling", "test_notify_session"]) {
    if (!names.includes(n)) throw new Error(`no tool ${n} in ${names}`);
  }
  return `${tools.length} tools`;
});

await check("tools/call echo", async () => {
  const r = await withTimeout(
    client.callTool({ name: "echo", arguments: { text: "interop ✓" } }),
    5000,
    "echo",
  );
  if (r.isError || text(r) !== "interop ✓") throw new Error(JSON.stringify(r));
});

await check("notification on the GET stream", async () => {
  // The TS client opened the GET stream itself after initialize; the tool sends a log message
  // not tied to its request, which the server can only deliver there.
  // A notification sent before the GET stream is open may be lost (the spec lets the server
  // drop it), so the tool is called again, at most three times, until one arrives.
  for (let attempt = 1; attempt <= 3; attempt++) {
    const r = await withTimeout(
      client.callTool({ name: "test_notify_session", arguments: {} }),
      5000,
      "test_notify_session",
    );
    if (r.isError) throw new Error(JSON.stringify(r));
    try {
      const params = await withTimeout(logged, 3000, "notifications/message");
      if (getStreams === 0) throw new Error("received, but no GET stream was open");
      return `notifications/message: ${JSON.stringify(params.data)}, GET streams ${getStreams}, attempt ${attempt}`;
    } catch (e) {
      if (e.message.startsWith("received")) throw e;
    }
  }
  throw new Error("no notifications/message after three calls of test_notify_session");
});

await check("sampling round trip", async () => {
  const r = await withTimeout(
    client.callTool({ name: "test_sampling", arguments: { prompt: "ping" } }),
    10000,
    "test_sampling",
  );
  if (!samplingSeen) throw new Error("no sampling/createMessage request reached the client");
  const first = samplingSeen.messages?.[0]?.content?.text;
  if (first !== "ping") throw new Error(`sampling request carried ${JSON.stringify(samplingSeen)}`);
  if (text(r) !== "LLM response: hello from the TS client") throw new Error(JSON.stringify(r));
  return text(r);
});

await check("close (DELETE)", async () => {
  await withTimeout(transport.terminateSession(), 5000, "DELETE");
  await client.close();
});

clearTimeout(hardTimeout);
console.log(failures === 0 ? "ts-client: all checks passed" : `ts-client: ${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
