"""A small MCP client of the official Python SDK 1.x (mcp 1.30.0, which speaks the `initialize`
era only: 2025-11-25 and earlier), run by the proxy's tests.

    python client_v1.py [--token TOKEN] --url URL STEP...
    python client_v1.py STEP... -- COMMAND [ARG...]

Connects over Streamable HTTP to URL, or over stdio to COMMAND (run with this process's
environment), then runs the steps in order. Prints one JSON line per step on stdout, as
client.py does (the SDK's logs, and COMMAND's stderr, go to stderr):

  connect            (always first) {"step": "connect", "protocolVersion": ...,
                     "handshake": "initialize", "serverName": ...}
  list               {"step": "list", "tools": [names in the server's order]}
  call:TOOL[:JSON]   {"step": "call", "tool": ..., "isError": ..., "text": [text contents]}
  mrtr:TOOL[:JSON]   a call on which the server asks the user (an elicitation request): every
                     form is accepted, its yes/no fields answered yes; "elicitations" lists
                     what was asked ({"mode", "message"}), beside the call's final result

A step that fails prints {"step": ..., "error": {"type", "message", and for a JSON-RPC error
"code" and "data"}} and ends the run with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import httpx
import mcp.types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line, sort_keys=True), flush=True)


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def error_of(error: BaseException) -> dict[str, Any]:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    described: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, McpError):
        described["code"] = error.error.code
        if error.error.data is not None:
            described["data"] = error.error.data
    return described


def parse_step(step: str) -> tuple[str, str | None, dict[str, Any]]:
    kind, _, rest = step.partition(":")
    tool, _, arguments = rest.partition(":")
    return kind, tool or None, json.loads(arguments) if arguments else {}


class Elicitations:
    """The elicitation callback, as client.py's: accepts every form, each of its yes/no fields
    answered yes (`{"confirmed": true}` when it has none), remembering what it was asked."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(
        self, context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.seen.append({"mode": params.mode, "message": params.message})
        schema = getattr(params, "requestedSchema", None) or {}
        yes = {name: True for name, p in schema.get("properties", {}).items() if p.get("type") == "boolean"}
        return types.ElicitResult(action="accept", content=yes or {"confirmed": True})


async def run_step(session: ClientSession, elicitations: Elicitations, step: str) -> None:
    kind, tool, arguments = parse_step(step)
    if kind == "list":
        listed = await session.list_tools()
        emit({"step": "list", "tools": [t.name for t in listed.tools]})
    elif kind in ("call", "mrtr"):
        assert tool is not None, f"{step}: no tool named"
        before = len(elicitations.seen)
        result = await session.call_tool(tool, arguments)
        line: dict[str, Any] = {"step": kind, "tool": tool, "isError": result.isError, "text": texts(result)}
        if kind == "mrtr":
            line["elicitations"] = elicitations.seen[before:]
        emit(line)
    else:
        raise ValueError(f"unknown step {step!r}")


async def run(transport: AbstractAsyncContextManager[Any], steps: list[str]) -> int:
    elicitations = Elicitations()
    step = "connect"
    try:
        async with transport as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write, elicitation_callback=elicitations) as session:
                initialized = await session.initialize()
                emit(
                    {
                        "step": "connect",
                        "protocolVersion": initialized.protocolVersion,
                        "handshake": "initialize",
                        "serverName": initialized.serverInfo.name,
                    }
                )
                for step in steps:
                    await run_step(session, elicitations, step)
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
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("steps", nargs="*")
    args = parser.parse_args(argv)
    if (args.url is None) == (not command):
        parser.error("give either --url URL or -- COMMAND")
    if command:
        parameters = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
        return await run(stdio_client(parameters), args.steps)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    # trust_env=False: a proxy named in the environment is not for loopback.
    timeout = httpx.Timeout(30.0, read=300.0)
    async with httpx.AsyncClient(headers=headers, timeout=timeout, trust_env=False) as http:
        return await run(streamable_http_client(args.url, http_client=http), args.steps)


if __name__ == "__main__":
    sys.exit(anyio.run(main))
