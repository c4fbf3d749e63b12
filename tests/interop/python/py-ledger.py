"""The fault-injection ledger (tests/src/faults.rs) driven by the official Python SDK client
(PyPI `mcp`, pinned in requirements.txt), through mcp-faults' cutting proxy, against one of
our servers, in the legacy era (sessions, GET stream, resumability).

Usage: python py-ledger.py <url> <post|get> <rounds> <n> <interval_ms> <timeout_ms>

Prints READY once connected (the proxy starts cutting then), then one line
RESULT {"ok":…,"hung":…,"errors":[…],"lost":…,"duplicated":…,"calls":…,"failedCalls":[…]}.
"""

from __future__ import annotations

import json
import sys

import anyio
import mcp_types as types
from mcp import Client


async def main(url: str, kind: str, rounds: int, n: int, interval_ms: int, timeout_ms: int) -> None:
    result = {"ok": 0, "hung": 0, "errors": [], "lost": 0, "duplicated": 0, "calls": 0, "failedCalls": []}
    logs: dict[int, list[int]] = {}

    def tally(seen: list[int]) -> bool:
        unique = {k for k in seen if 1 <= k <= n}
        result["lost"] += n - len(unique)
        result["duplicated"] += len(seen) - len(unique)
        return len(unique) == n and len(seen) == n

    async def logging(params: types.LoggingMessageNotificationParams) -> None:
        d = params.data
        if params.logger == "ledger" and isinstance(d, dict) and isinstance(d.get("burst"), int):
            logs.setdefault(d["burst"], []).append(d["seq"])

    timeout = timeout_ms / 1000
    try:
        client_cm = Client(
            url,
            mode="legacy",
            logging_callback=logging,
            client_info=types.Implementation(name="py-ledger", version="1.0.0"),
        )
        client = await client_cm.__aenter__()
    except Exception as e:  # noqa: BLE001 - reported, not raised
        print("RESULT " + json.dumps({"fatal": f"connect: {e!r}"}), flush=True)
        return
    try:
        if kind == "get":
            await anyio.sleep(0.5)
        print("READY", flush=True)
        for i in range(rounds):
            result["calls"] += 1
            if kind == "post":
                seen: list[int] = []

                async def progress(p: float, total: float | None, message: str | None, seen=seen) -> None:
                    seen.append(int(p))

                try:
                    with anyio.fail_after(timeout):
                        r = await client.call_tool(
                            "ledger_count",
                            {"n": n, "interval_ms": interval_ms},
                            read_timeout_seconds=timeout,
                            progress_callback=progress,
                        )
                    text = "".join(getattr(c, "text", "") for c in r.content)
                    if text != f"counted {n}":
                        result["errors"].append(f"call {i}: result {text}")
                        result["failedCalls"].append(i)
                    elif tally(seen):
                        result["ok"] += 1
                except TimeoutError:
                    result["hung"] += 1
                    result["failedCalls"].append(i)
                except anyio.get_cancelled_exc_class() as e:
                    # The SDK cancels the call itself when its transport task fails on a cut
                    # connection; nothing above us is being cancelled.
                    result["errors"].append(f"call {i}: cancelled by the SDK ({e!r})")
                    result["failedCalls"].append(i)
                except Exception as e:  # noqa: BLE001
                    result["errors"].append(f"call {i}: {e!r}")
                    result["failedCalls"].append(i)
            else:
                try:
                    with anyio.fail_after(timeout):
                        await client.call_tool(
                            "ledger_burst",
                            {"burst": i, "n": n, "interval_ms": interval_ms},
                            read_timeout_seconds=timeout,
                        )
                except TimeoutError:
                    result["hung"] += 1
                except Exception as e:  # noqa: BLE001
                    result["errors"].append(f"burst {i}: {e!r}")
                with anyio.move_on_after(timeout):
                    while len(logs.get(i, [])) < n:
                        await anyio.sleep(0.02)
        if kind == "get":
            await anyio.sleep(0.5)
            for i in range(rounds):
                if tally(logs.get(i, [])):
                    result["ok"] += 1
        print("RESULT " + json.dumps(result), flush=True)
    finally:
        with anyio.move_on_after(5):
            try:
                await client_cm.__aexit__(None, None, None)
            except Exception:  # noqa: BLE001 - closing a session that the proxy cut
                pass


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[2] not in ("post", "get"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    url, kind = sys.argv[1], sys.argv[2]
    rounds, n, interval_ms, timeout_ms = (int(x) for x in (sys.argv[3:7] + ["30", "200", "1", "10000"][len(sys.argv[3:7]):]))
    anyio.run(main, url, kind, rounds, n, interval_ms, timeout_ms)
