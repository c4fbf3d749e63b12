// The fault-injection ledger (tests/src/faults.rs) driven by the official TypeScript SDK
// client, through mcp-faults' cutting proxy, against one of our servers.
// Usage: node ts-ledger.mjs <url> <post|get> <rounds> <n> <interval_ms> <timeout_ms>
// Prints READY once connected (the proxy starts cutting then), then one line
// RESULT {"ok":…,"hung":…,"errors":[…],"lost":…,"duplicated":…,"calls":…,"failedCalls":[…]}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, kind, roundsArg, nArg, intervalArg, timeoutArg] = process.argv.slice(2);
if (!url || !["post", "get"].includes(kind)) {
  console.error("usage: node ts-ledger.mjs <url> <post|get> <rounds> <n> <interval_ms> <timeout_ms>");
  process.exit(2);
}
const rounds = Number(roundsArg ?? 30);
const n = Number(nArg ?? 200);
const intervalMs = Number(intervalArg ?? 1);
const timeoutMs = Number(timeoutArg ?? 10000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const hard = setTimeout(() => {
  console.log("RESULT " + JSON.stringify({ fatal: "hard timeout" }));
  process.exit(1);
}, (rounds + 2) * (timeoutMs + 2000));

const result = { ok: 0, hung: 0, errors: [], lost: 0, duplicated: 0, calls: 0, failedCalls: [] };
const tally = (seen) => {
  const unique = new Set(seen.filter((k) => k >= 1 && k <= n));
  result.lost += n - unique.size;
  result.duplicated += seen.length - unique.size;
  return unique.size === n && seen.length === n;
};
const logs = new Map();
const client = new Client({ name: "ts-ledger", version: "1.0.0" }, { capabilities: {} });
client.setNotificationHandler(LoggingMessageNotificationSchema, (m) => {
  const d = m.params.data;
  if (m.params.logger !== "ledger" || typeof d?.burst !== "number") return;
  if (!logs.has(d.burst)) logs.set(d.burst, []);
  logs.get(d.burst).push(d.seq);
});
client.onerror = () => {};
const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport);
} catch (e) {
  console.log("RESULT " + JSON.stringify({ fatal: `connect: ${e.message}` }));
  process.exit(1);
}
if (kind === "get") await sleep(500); // the standalone GET stream opens after initialized
console.log("READY");

for (let i = 0; i < rounds; i++) {
  result.calls++;
  if (kind === "post") {
    const seen = [];
    try {
      const r = await client.callTool(
        { name: "ledger_count", arguments: { n, interval_ms: intervalMs } },
        undefined,
        { onprogress: (p) => seen.push(p.progress), timeout: timeoutMs },
      );
      const text = (r.content ?? []).map((c) => c.text ?? "").join("");
      if (text === `counted ${n}` && tally(seen)) result.ok++;
      else if (text !== `counted ${n}`) result.errors.push(`call ${i}: result ${text}`);
    } catch (e) {
      if (/timed out|timeout/i.test(e.message)) result.hung++;
      else result.errors.push(`call ${i}: ${e.message}`);
      result.failedCalls.push(i);
    }
  } else {
    try {
      await client.callTool(
        { name: "ledger_burst", arguments: { burst: i, n, interval_ms: intervalMs } },
        undefined,
        { timeout: timeoutMs },
      );
    } catch (e) {
      if (/timed out|timeout/i.test(e.message)) result.hung++;
      else result.errors.push(`burst ${i}: ${e.message}`);
    }
    const until = Date.now() + timeoutMs;
    while ((logs.get(i)?.length ?? 0) < n && Date.now() < until) await sleep(20);
  }
}
if (kind === "get") {
  await sleep(500);
  for (let i = 0; i < rounds; i++) if (tally(logs.get(i) ?? [])) result.ok++;
}
console.log("RESULT " + JSON.stringify(result));
try {
  await transport.terminateSession();
  await client.close();
} catch {}
clearTimeout(hard);
process.exit(0);
