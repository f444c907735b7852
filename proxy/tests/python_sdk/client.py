"""A small MCP client of the official Python SDK (mcp 2.3.0), run by the proxy's tests.

    python client.py [--mode auto|2026-07-28|legacy] [--token TOKEN] --url URL STEP...
    python client.py [--mode auto|2026-07-28|legacy] STEP... -- COMMAND [ARG...]

Connects over Streamable HTTP to URL, or over stdio to COMMAND (run with this process's
environment), then runs the steps in order. Prints one JSON line per step on stdout (the
SDK's logs, and COMMAND's stderr, go to stderr):

  connect            (always first) {"step": "connect", "protocolVersion": ..., "handshake":
                     "discover" | "initialize" | "adopted", "serverName": ...}
  list               {"step": "list", "tools": [names in the server's order]}
  call:TOOL[:JSON]   {"step": "call", "tool": ..., "isError": ..., "text": [text contents]}
  mrtr:TOOL[:JSON]   a call on which the server asks the user (an InputRequiredResult, or an
                     elicitation request): every form is accepted, its yes/no fields answered
                     yes; "elicitations" lists what was asked ({"mode", "message"}), beside
                     the call's final result
  listen[:TOOL]      opens subscriptions/listen (tools list changes), prints
                     {"step": "listen", "honored": {...}} once acknowledged, calls TOOL if
                     named (something that makes the server notify), then waits up to 15 s
                     for one event: {"step": "event", "event": "ToolsListChanged"}

A step that fails prints {"step": ..., "error": {"type", "message", and for a JSON-RPC error
"code" and "data"}} and ends the run with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client import Client, ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

EVENT_TIMEOUT = 15.0


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line, sort_keys=True), flush=True)


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def error_of(error: BaseException) -> dict[str, Any]:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    described: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, MCPError):
        described["code"] = error.code
        if error.error.data is not None:
            described["data"] = error.error.data
    return described


def parse_step(step: str) -> tuple[str, str | None, dict[str, Any]]:
    kind, _, rest = step.partition(":")
    tool, _, arguments = rest.partition(":")
    return kind, tool or None, json.loads(arguments) if arguments else {}


class Elicitations:
    """The elicitation callback: accepts every form, each of its yes/no fields answered yes
    (`{"confirmed": true}` when it has none), remembering what it was asked."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.seen.append({"mode": params.mode, "message": params.message})
        schema = getattr(params, "requested_schema", None) or {}
        if not isinstance(schema, dict):
            schema = schema.model_dump(by_alias=True)
        yes = {name: True for name, p in schema.get("properties", {}).items() if p.get("type") == "boolean"}
        return types.ElicitResult(action="accept", content=yes or {"confirmed": True})


async def run_step(client: Client, elicitations: Elicitations, step: str) -> None:
    kind, tool, arguments = parse_step(step)
    if kind == "list":
        listed = await client.list_tools()
        emit({"step": "list", "tools": [t.name for t in listed.tools]})
    elif kind in ("call", "mrtr"):
        assert tool is not None, f"{step}: no tool named"
        before = len(elicitations.seen)
        result = await client.call_tool(tool, arguments)
        line: dict[str, Any] = {"step": kind, "tool": tool, "isError": result.is_error, "text": texts(result)}
        if kind == "mrtr":
            line["elicitations"] = elicitations.seen[before:]
        emit(line)
    elif kind == "listen":
        async with client.listen(tools_list_changed=True) as subscription:
            emit({"step": "listen", "honored": subscription.honored.model_dump(by_alias=True, exclude_none=True)})
            if tool is not None:
                await client.call_tool(tool, arguments)
            with anyio.fail_after(EVENT_TIMEOUT):
                event = await subscription.__anext__()
            emit({"step": "event", "event": type(event).__name__})
    else:
        raise ValueError(f"unknown step {step!r}")


async def run(target: Any, mode: str, steps: list[str]) -> int:
    elicitations = Elicitations()
    step = "connect"
    try:
        async with Client(target, mode=mode, elicitation_callback=elicitations) as client:
            session = client.session
            handshake = (
                "initialize"
                if session.initialize_result is not None
                else "adopted"
                if mode not in ("auto", "legacy")
                else "discover"
            )
            server = client.server_info
            emit(
                {
                    "step": "connect",
                    "protocolVersion": client.protocol_version,
                    "handshake": handshake,
                    "serverName": server.name if server is not None else None,
                }
            )
            for step in steps:
                await run_step(client, elicitations, step)
    except Exception as error:  # noqa: BLE001 - reported, the test reads it
        emit({"step": step.partition(":")[0], "error": error_of(error)})
        return 1
    return 0


async def main() -> int:
    argv = sys.argv[1:]
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("steps", nargs="*")
    args = parser.parse_args(argv)
    if (args.url is None) == (not command):
        parser.error("give either --url URL or -- COMMAND")
    if command:
        parameters = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
        return await run(parameters, args.mode, args.steps)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    # trust_env=False: a proxy named in the environment is not for loopback.
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, trust_env=False) as http:
        return await run(streamable_http_client(args.url, http_client=http), args.mode, args.steps)


if __name__ == "__main__":
    sys.exit(anyio.run(main))
