"""The official Python SDK client (PyPI `mcp`, pinned in requirements.txt) against one of our
servers (mcp-everything).

Usage: python py-client.py <url> --mode legacy|auto|2026-07-28 [--expect-era legacy|modern]

One line per check; exits 1 on any failure. `--mode` is the SDK's own era policy: `legacy`
forces the initialize handshake, `auto` probes `server/discover` and falls back, a version pins
the modern era without a probe.
"""

from __future__ import annotations

import argparse
import sys

import anyio
import mcp_types as types
from mcp import Client

failures = 0


def ok(name: str, detail: str = "") -> None:
    print(f"ok    {name}" + (f" ({detail})" if detail else ""))


def fail(name: str, why: object) -> None:
    global failures
    failures += 1
    print(f"FAIL  {name}: {why}")


def text(result: types.CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def main(url: str, mode: str, expect_era: str | None) -> None:
    sampled: list[types.CreateMessageRequestParams] = []
    logged = anyio.Event()
    log_params: list[types.LoggingMessageNotificationParams] = []

    async def sampling(_ctx, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        sampled.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="hello from the Python client"),
            model="interop-model",
            stop_reason="endTurn",
        )

    async def logging(params: types.LoggingMessageNotificationParams) -> None:
        if params.logger == "interop" or "notif" in str(params.data).lower():
            log_params.append(params)
            logged.set()

    async with Client(
        url,
        mode=mode,
        sampling_callback=sampling,
        logging_callback=logging,
        client_info=types.Implementation(name="py-interop-client", version="1.0.0"),
    ) as client:
        version = client.protocol_version
        era = "modern" if version >= "2026-07-28" else "legacy"
        info = client.server_info
        detail = f"server {info.name if info else '?'}, protocol {version}, era {era}"
        if expect_era and era != expect_era:
            fail("connect", f"expected the {expect_era} era; {detail}")
        else:
            ok("connect", detail)

        try:
            with anyio.fail_after(5):
                tools = (await client.list_tools()).tools
            names = [t.name for t in tools]
            missing = [n for n in ("echo", "test_sampling") if n not in names]
            if missing:
                fail("tools/list", f"missing {missing} in {names}")
            else:
                ok("tools/list", f"{len(names)} tools")
        except Exception as e:  # noqa: BLE001 - every failure is a reported check
            fail("tools/list", repr(e))

        try:
            with anyio.fail_after(5):
                r = await client.call_tool("echo", {"text": "interop ✓"})
            if r.is_error or text(r) != "interop ✓":
                fail("tools/call echo", r)
            else:
                ok("tools/call echo")
        except Exception as e:  # noqa: BLE001
            fail("tools/call echo", repr(e))

        try:
            with anyio.fail_after(10):
                r = await client.call_tool("test_sampling", {"prompt": "ping"})
            first = sampled[0].messages[0].content if sampled else None
            if not sampled:
                fail("sampling round trip", "no sampling request reached the client")
            elif getattr(first, "text", None) != "ping":
                fail("sampling round trip", f"sampling request carried {sampled[0]}")
            elif text(r) != "LLM response: hello from the Python client":
                fail("sampling round trip", r)
            else:
                how = "MRTR inputRequests" if era == "modern" else "sampling/createMessage request"
                ok("sampling round trip", f"{text(r)!r} via {how}")
        except Exception as e:  # noqa: BLE001
            fail("sampling round trip", repr(e))

        if era == "legacy":
            # The log message of test_notify_session is not tied to the request: the server can
            # only deliver it on the GET stream the SDK opens after initialize. One sent before
            # that stream is open may be lost, so the tool is called up to three times.
            try:
                for attempt in range(1, 4):
                    with anyio.fail_after(5):
                        r = await client.call_tool("test_notify_session", {})
                    if r.is_error:
                        raise RuntimeError(r)
                    with anyio.move_on_after(3):
                        await logged.wait()
                    if logged.is_set():
                        ok("notification on the GET stream", f"{log_params[0].data!r}, attempt {attempt}")
                        break
                else:
                    fail("notification on the GET stream", "none after three calls of test_notify_session")
            except Exception as e:  # noqa: BLE001
                fail("notification on the GET stream", repr(e))
        else:
            try:
                with anyio.fail_after(5):
                    async with client.listen(tools_list_changed=True) as sub:
                        ok("subscriptions/listen", f"acknowledged, honored {sub.honored}")
            except Exception as e:  # noqa: BLE001
                fail("subscriptions/listen", repr(e))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--mode", default="auto")
    ap.add_argument("--expect-era", choices=["legacy", "modern"])
    a = ap.parse_args()
    try:
        anyio.run(main, a.url, a.mode, a.expect_era)
    except Exception as e:  # noqa: BLE001
        fail("session", repr(e))
    print("py-client: all checks passed" if failures == 0 else f"py-client: {failures} check(s) failed")
    sys.exit(0 if failures == 0 else 1)
