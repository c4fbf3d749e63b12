// The MCP Inspector's CLI mode (tests/inspector/package.json pins it) as a peer of one of our
// servers (mcp-everything). Usage: node cli.mjs <url>, on Node >= 22.19 (the Inspector's
// engines; .ci/run puts the Node 22 that tests/conformance pins first on PATH).
//
// For each of the Inspector's protocol eras (legacy, auto, modern), one CLI run per method,
// its JSON output checked: `initialize` negotiates the era's revision, `tools/list` names
// `echo`, `tools/call` of `echo` returns the text sent, `resources/list` names a static text
// resource and `resources/read` returns its text and MIME type. One PASS/FAIL line per check;
// exits 1 on any failure, 2 on bad usage. Each CLI run is bounded (20 s), the whole run too.
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const url = process.argv[2];
if (!url || process.argv.length > 3) {
  console.error("usage: node cli.mjs <url>");
  process.exit(2);
}
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  console.error(`the Inspector needs Node >= 22.19, this is ${process.version}`);
  process.exit(2);
}
const RUN_LIMIT_MS = 20_000;
const here = dirname(fileURLToPath(import.meta.url));
const inspector = join(here, "node_modules", ".bin", "inspector");
// <--protocol-era>: the revision `initialize` must end up with.
const ERAS = { legacy: "2025-11-25", auto: "2026-07-28", modern: "2026-07-28" };
// A resource of mcp-everything (tests/src/everything.rs) and its text.
const STATIC_URI = "test://static-text";
const STATIC_TEXT = "This is the content of the static text resource.";

let passed = 0;
let failed = 0;
const check = (name, ok, detail) => {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? "PASS" : "FAIL"}  ${name}${detail ? ` (${detail})` : ""}`);
};

// One CLI run; resolves to its parsed JSON result, or throws with what it printed.
function cli(era, ...args) {
  const argv = ["--cli", url, "--transport", "http", "--protocol-era", era, "--format", "json",
    "--connect-timeout", "10000", ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [inspector, ...argv], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (c) => (out += c));
    child.stderr.setEncoding("utf8").on("data", (c) => (err += c));
    const timer = setTimeout(() => child.kill("SIGKILL"), RUN_LIMIT_MS);
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const shown = `inspector ${argv.join(" ")}: exit ${code ?? signal}; stdout ${JSON.stringify(out.slice(0, 400))}; stderr ${JSON.stringify(err.slice(0, 400))}`;
      if (code !== 0) return reject(new Error(shown));
      try {
        const parsed = JSON.parse(out);
        if (!("result" in parsed)) return reject(new Error(shown));
        resolve(parsed.result);
      } catch {
        reject(new Error(shown));
      }
    });
  });
}

const hard = setTimeout(() => {
  check("whole run within 120 s", false, "hard timeout");
  process.exit(1);
}, 120_000);
hard.unref();

for (const [era, revision] of Object.entries(ERAS)) {
  const attempt = async (name, f) => {
    try {
      const [ok, detail] = await f();
      check(`${era}: ${name}`, ok, detail);
    } catch (e) {
      check(`${era}: ${name}`, false, e.message);
    }
  };
  await attempt("initialize", async () => {
    const r = await cli(era, "--method", "initialize");
    return [
      r.protocolVersion === revision && r.serverInfo?.name === "mcp-everything",
      `${r.serverInfo?.name} ${r.serverInfo?.version}, ${r.protocolVersion}, expected ${revision}`,
    ];
  });
  await attempt("tools/list names echo", async () => {
    const r = await cli(era, "--method", "tools/list");
    const names = (r.tools ?? []).map((t) => t.name);
    return [names.includes("echo"), `${names.length} tools`];
  });
  await attempt("tools/call echo returns the text", async () => {
    const text = `hello from the Inspector (${era})`;
    const r = await cli(era, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", `text=${text}`);
    const got = (r.content ?? []).map((c) => c.text ?? "").join("");
    return [got === text && r.isError !== true, JSON.stringify(got)];
  });
  await attempt("resources/list names the static text resource", async () => {
    const r = await cli(era, "--method", "resources/list");
    const uris = (r.resources ?? []).map((x) => x.uri);
    return [uris.includes(STATIC_URI), `${uris.length} resources`];
  });
  await attempt("resources/read returns its text and MIME type", async () => {
    const r = await cli(era, "--method", "resources/read", "--uri", STATIC_URI);
    const c = (r.contents ?? [])[0] ?? {};
    return [
      c.uri === STATIC_URI && c.text === STATIC_TEXT && c.mimeType === "text/plain",
      JSON.stringify(c).slice(0, 200),
    ];
  });
}

console.log(`inspector: ${passed} passed, ${failed} failed`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
