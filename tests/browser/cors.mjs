// A browser as the MCP client: Debian's headless Chromium, driven by playwright-core, calls
// mcp-everything with fetch() from a page on another origin, so every request goes through
// CORS (the JSON Content-Type and the Mcp-Session-Id header make the browser send a
// preflight first, and the page can read Mcp-Session-Id only if the server exposes it).
//
// Usage: node cors.mjs <path to mcp-everything> [--runtime tokio|smol] [--chromium PATH]
//
// It serves two pages on free loopback ports, starts mcp-everything on a free port with
// `--allow-origin` naming the first page's origin only, and checks from the allowed page:
// initialize, the session id, notifications/initialized, tools/list, an `echo` call (a JSON
// answer), a logging tool's call (an SSE answer), the GET stream read as it arrives (a tool's
// log notifications sent outside its request reach the page there), DELETE of the session
// (and a 404 after it); from the other page (an origin not allowed):
// initialize fails (the preflight is refused). One PASS/FAIL line per check; exits 1 on any
// failure, 2 on bad usage. Everything is bounded: 60 s for the whole run.
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { resolve } from "node:path";
import { chromium } from "playwright-core";

const HARD_LIMIT_MS = 60_000;
const FETCH_TIMEOUT_MS = 10_000;
const PROTOCOL_VERSION = "2025-11-25";

function usage(why) {
  console.error(`${why}\nusage: node cors.mjs <mcp-everything> [--runtime tokio|smol] [--chromium PATH]`);
  process.exit(2);
}
const argv = process.argv.slice(2);
let binary = null;
let runtime = "tokio";
let chromiumPath = "/usr/bin/chromium";
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--runtime") runtime = argv[++i] ?? usage("--runtime needs a name");
  else if (a === "--chromium") chromiumPath = argv[++i] ?? usage("--chromium needs a path");
  else if (a.startsWith("-")) usage(`unknown option ${a}`);
  else if (binary === null) binary = resolve(a);
  else usage(`unexpected argument ${a}`);
}
if (!binary) usage("the path of mcp-everything is missing");

let passed = 0;
let failed = 0;
const check = (name, ok, detail) => {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? "PASS" : "FAIL"}  ${name}${detail ? ` (${detail})` : ""}`);
};

// --- cleanup, on every way out -----------------------------------------------------------
let browser = null;
let server = null;
let serverLog = "";
const pageServers = [];
async function cleanup() {
  if (browser) await Promise.race([browser.close().catch(() => {}), sleep(5000)]);
  browser = null;
  for (const s of pageServers) s.close();
  if (server && server.exitCode === null && server.signalCode === null) {
    const exited = new Promise((r) => server.once("exit", r));
    server.kill("SIGINT"); // mcp-everything stops on Ctrl-C
    if (!(await Promise.race([exited.then(() => true), sleep(3000).then(() => false)]))) {
      server.kill("SIGKILL");
    }
  }
}
function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms).unref());
}
const hard = setTimeout(async () => {
  check("whole run within 60 s", false, "hard timeout");
  await Promise.race([cleanup(), sleep(5000)]);
  process.exit(1);
}, HARD_LIMIT_MS);
hard.unref();
// A `timeout` around the script stops it with SIGTERM: the server and the browser go too.
for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) {
  process.once(sig, async () => {
    check(`run (stopped by ${sig})`, false);
    await Promise.race([cleanup(), sleep(5000)]);
    process.exit(1);
  });
}

// --- the page: a browser-side MCP client over fetch() ------------------------------------
// window.mcp(url, method, body, session) sends one request and returns what the page could
// see of the answer: status, the (exposed) session id, the JSON-RPC messages of a JSON or
// SSE body, or `error` when fetch rejected (as it does when CORS refuses the request).
const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>MCP CORS check</title></head>
<body><p>MCP over fetch() from another origin.</p>
<script>
function sseMessages(text) {
  const out = [];
  for (const event of text.replace(/\\r\\n?/g, "\\n").split("\\n\\n")) {
    const data = event.split("\\n").filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).replace(/^ /, "")).join("\\n");
    if (data.trim()) out.push(JSON.parse(data));
  }
  return out;
}
window.mcp = async (url, method, body, session) => {
  const headers = { Accept: "application/json, text/event-stream" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (session) {
    headers["Mcp-Session-Id"] = session;
    headers["MCP-Protocol-Version"] = "${PROTOCOL_VERSION}";
  }
  try {
    const res = await fetch(url, {
      method, headers, mode: "cors",
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(${FETCH_TIMEOUT_MS}),
    });
    const contentType = res.headers.get("content-type") || "";
    const text = await res.text();
    let messages = [];
    if (contentType.startsWith("text/event-stream")) messages = sseMessages(text);
    else if (contentType.startsWith("application/json") && text.trim()) messages = [JSON.parse(text)];
    return { status: res.status, session: res.headers.get("mcp-session-id"), contentType, messages };
  } catch (e) {
    return { error: String(e) };
  }
};
// window.listen(url, session) opens the session's GET stream and keeps reading it;
// window.heard() is what it has read so far (the JSON-RPC messages of complete events).
window.listen = async (url, session) => {
  window.listening = { status: 0, messages: [], error: null };
  const controller = new AbortController();
  window.stopListening = () => controller.abort();
  try {
    const res = await fetch(url, {
      method: "GET", mode: "cors", signal: controller.signal,
      headers: { Accept: "text/event-stream", "Mcp-Session-Id": session, "MCP-Protocol-Version": "${PROTOCOL_VERSION}" },
    });
    window.listening.status = res.status;
    window.listening.contentType = res.headers.get("content-type") || "";
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          text += decoder.decode(value, { stream: true });
          const cut = text.lastIndexOf("\\n\\n");
          if (cut >= 0) {
            window.listening.messages.push(...sseMessages(text.slice(0, cut + 2)));
            text = text.slice(cut + 2);
          }
        }
      } catch (e) {
        if (!controller.signal.aborted) window.listening.error = String(e);
      }
    })();
    return { status: res.status };
  } catch (e) {
    window.listening.error = String(e);
    return { error: String(e) };
  }
};
window.heard = () => window.listening;
</script></body></html>
`;

function servePage() {
  return new Promise((ok, ko) => {
    const s = createServer((req, res) => {
      if (req.url === "/" || req.url === "/index.html") {
        res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
        res.end(PAGE);
      } else {
        res.writeHead(404, { "content-type": "text/plain" });
        res.end("not found");
      }
    });
    s.on("error", ko);
    s.listen(0, "127.0.0.1", () => ok(s));
    pageServers.push(s);
  });
}

function startServer(allowedOrigin) {
  return new Promise((ok, ko) => {
    const args = ["--runtime", runtime, "--bind", "127.0.0.1:0", "--allow-origin", allowedOrigin];
    server = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    const timer = setTimeout(() => ko(new Error(`no URL within 10 s; output:\n${serverLog}`)), 10_000);
    const onData = (chunk) => {
      serverLog += chunk;
      const m = serverLog.match(/ on (http\S+)\s*$/m);
      if (m) {
        clearTimeout(timer);
        ok(m[1]);
      }
    };
    server.stdout.setEncoding("utf8").on("data", onData);
    server.stderr.setEncoding("utf8").on("data", (c) => (serverLog += c));
    server.on("error", (e) => {
      clearTimeout(timer);
      ko(e);
    });
    server.on("exit", (code, sig) => {
      clearTimeout(timer);
      ko(new Error(`mcp-everything exited (${code ?? sig}); output:\n${serverLog}`));
    });
  });
}

const result = (r) => r.messages?.find((m) => "result" in m || "error" in m);
const describe = (r) =>
  r.error ? `fetch rejected: ${r.error}` : `status ${r.status}, ${r.contentType || "no body"}`;

async function main() {
  const allowedPage = await servePage();
  const otherPage = await servePage();
  const allowedOrigin = `http://127.0.0.1:${allowedPage.address().port}`;
  const otherOrigin = `http://127.0.0.1:${otherPage.address().port}`;
  const url = await startServer(allowedOrigin);
  console.log(`mcp-everything (${runtime}) on ${url}, CORS for ${allowedOrigin} only`);

  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    timeout: 30_000,
    // The script's own handlers close the browser (and stop the server) on these.
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  console.log(`Chromium ${browser.version()} (${chromiumPath})`);
  const context = await browser.newContext();
  context.setDefaultTimeout(FETCH_TIMEOUT_MS + 5000);

  // --- the allowed origin: a whole session ---------------------------------------------
  const page = await context.newPage();
  await page.goto(`${allowedOrigin}/`, { timeout: 10_000 });
  const origin = await page.evaluate(() => location.origin);
  check("the page runs on the allowed origin", origin === allowedOrigin, origin);
  const call = (method, body, session) =>
    page.evaluate(([u, m, b, s]) => window.mcp(u, m, b, s), [url, method, body, session]);

  const init = await call("POST", {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: "chromium-cors-check", version: "1.0.0" },
    },
  });
  const initResult = result(init)?.result;
  check(
    "initialize from the allowed origin (after a preflight)",
    init.status === 200 && initResult?.protocolVersion === PROTOCOL_VERSION,
    initResult
      ? `${describe(init)}, server ${initResult.serverInfo?.name}, ${initResult.protocolVersion}`
      : describe(init),
  );
  const session = init.session;
  check("Mcp-Session-Id readable by the page (exposed by CORS)", Boolean(session), session ?? "null");
  if (!session) throw new Error("no session id: the session checks cannot run");

  const initialized = await call("POST", { jsonrpc: "2.0", method: "notifications/initialized" }, session);
  check("notifications/initialized accepted", initialized.status === 202, describe(initialized));

  const list = await call("POST", { jsonrpc: "2.0", id: 2, method: "tools/list" }, session);
  const names = (result(list)?.result?.tools ?? []).map((t) => t.name);
  check(
    "tools/list names echo",
    list.status === 200 && names.includes("echo"),
    `${describe(list)}, ${names.length} tools`,
  );

  const text = "hello from Chromium";
  const echo = await call(
    "POST",
    { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "echo", arguments: { text } } },
    session,
  );
  const echoed = (result(echo)?.result?.content ?? []).map((c) => c.text ?? "").join("");
  check(
    "tools/call echo returns the text",
    echo.status === 200 && echoed === text,
    `${describe(echo)}, ${JSON.stringify(echoed)}`,
  );

  // A call that logs as it runs is answered as an SSE stream: its notifications, then the
  // result, all read by the page through CORS.
  const logging = await call(
    "POST",
    { jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "test_tool_with_logging", arguments: {} } },
    session,
  );
  const logs = (logging.messages ?? []).filter((m) => m.method === "notifications/message").length;
  check(
    "a logging tool's SSE answer (notifications, then the result)",
    logging.status === 200 &&
      logging.contentType.startsWith("text/event-stream") &&
      logs > 0 &&
      result(logging)?.result !== undefined &&
      logging.messages.at(-1) === result(logging),
    `${describe(logging)}, ${logs} log messages, ${(logging.messages ?? []).length} messages`,
  );

  // The GET stream, read as it arrives (a streaming fetch body): messages a tool sends
  // outside its request reach the page there.
  const opened = await page.evaluate(([u, s]) => window.listen(u, s), [url, session]);
  check("the GET stream opens (200)", opened.status === 200, JSON.stringify(opened));
  const burst = await call(
    "POST",
    { jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "ledger_burst", arguments: { burst: 7, n: 3 } } },
    session,
  );
  check("ledger_burst answered", burst.status === 200 && result(burst)?.result !== undefined, describe(burst));
  const seqs = (heard) =>
    (heard.messages ?? [])
      .filter((m) => m.method === "notifications/message" && m.params?.data?.burst === 7)
      .map((m) => m.params.data.seq);
  let heard = await page.evaluate(() => window.heard());
  for (let i = 0; i < 100 && seqs(heard).length < 3; i++) {
    await sleep(50);
    heard = await page.evaluate(() => window.heard());
  }
  check(
    "the burst's 3 log notifications arrive on the GET stream, in order",
    JSON.stringify(seqs(heard)) === "[1,2,3]" && heard.contentType.startsWith("text/event-stream"),
    `heard ${JSON.stringify(seqs(heard))}, ${heard.messages.length} messages, ${heard.error ?? "no error"}`,
  );
  await page.evaluate(() => window.stopListening());
  // The page sent MCP-Protocol-Version on every request after initialize: the preflight let
  // it through (the server allows it, and exposes Mcp-Session-Id and MCP-Protocol-Version).
  check(
    "requests carrying MCP-Protocol-Version pass the preflight",
    list.status === 200 && echo.status === 200 && opened.status === 200,
    `${list.status}, ${echo.status}, ${opened.status}`,
  );

  const del = await call("DELETE", undefined, session);
  check("DELETE of the session", del.status >= 200 && del.status < 300, describe(del));
  const after = await call("POST", { jsonrpc: "2.0", id: 6, method: "tools/list" }, session);
  check("the deleted session is gone (404, readable by the page)", after.status === 404, describe(after));
  await page.close();

  // --- an origin the server does not allow ----------------------------------------------
  const other = await context.newPage();
  await other.goto(`${otherOrigin}/`, { timeout: 10_000 });
  const refused = await other.evaluate(
    ([u, v]) =>
      window.mcp(u, "POST", {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: v, capabilities: {}, clientInfo: { name: "other", version: "1" } },
      }),
    [url, PROTOCOL_VERSION],
  );
  check(
    `initialize from an origin not allowed (${otherOrigin}) fails`,
    Boolean(refused.error) || refused.status === 403,
    describe(refused),
  );
  await other.close();
}

let code = 0;
try {
  await main();
} catch (e) {
  check("run", false, e.message);
}
await Promise.race([cleanup(), sleep(10_000)]);
if (failed > 0 || passed === 0) {
  code = 1;
  if (serverLog) console.log(`--- mcp-everything output:\n${serverLog.trimEnd()}`);
}
console.log(`browser (${runtime}): ${passed} passed, ${failed} failed`);
process.exit(code);
