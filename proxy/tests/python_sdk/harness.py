"""What the test clients and servers of both SDK releases share (client.py and server.py of mcp
2.x, client_v1.py and server_v1.py of mcp 1.x): nothing of the SDK itself, whose names differ
between the two, only the standard library, anyio and uvicorn, which both venvs hold.

Each script imports it from its own folder (Python puts a script's folder first on its path).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import uvicorn

# ---- The clients ----


def emit(line: dict[str, Any]) -> None:
    """Prints one JSON line of the run on stdout."""
    print(json.dumps(line, sort_keys=True), flush=True)


def connected(protocol_version: str, handshake: str, server_name: str | None) -> None:
    """Prints the `connect` line."""
    line = {"protocolVersion": protocol_version, "handshake": handshake, "serverName": server_name}
    emit({"step": "connect", **line})


def parse_step(step: str) -> tuple[str, str | None, dict[str, Any]]:
    """`KIND[:TOOL[:JSON]]`: the kind, the tool (or None) and its arguments."""
    kind, _, rest = step.partition(":")
    tool, _, arguments = rest.partition(":")
    return kind, tool or None, json.loads(arguments) if arguments else {}


def failed(step: str, error: BaseException, mcp_error: type[BaseException]) -> int:
    """Prints the line of `step`, which failed with `error` (see `error_of`): the run's exit status."""
    emit({"step": step.partition(":")[0], "error": error_of(error, mcp_error)})
    return 1


def error_of(error: BaseException, mcp_error: type[BaseException]) -> dict[str, Any]:
    """`error` (out of the groups that hold only it) as the run reports it: its type, its
    message, and for an `mcp_error` (the SDK's exception for a JSON-RPC error) the code and
    data of its ErrorData."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    described: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, mcp_error):
        data = error.error  # type: ignore[attr-defined]
        described["code"] = data.code
        if data.data is not None:
            described["data"] = data.data
    return described


class Elicitations:
    """What an elicitation callback was asked ({"mode", "message"}), and its answer to every
    form: accepted, each of its yes/no fields answered yes (`{"confirmed": true}` when it has
    none). Each client wraps it in its SDK's callback."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def answer(self, mode: str | None, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        self.seen.append({"mode": mode, "message": message})
        yes = {name: True for name, p in schema.get("properties", {}).items() if p.get("type") == "boolean"}
        return yes or {"confirmed": True}


async def run_step(
    client: Any,
    elicitations: Elicitations,
    step: str,
    outcome: Callable[[Any], tuple[bool, list[str]]],
    listen: Callable[[Any, str | None, dict[str, Any]], Awaitable[None]] | None = None,
) -> None:
    """Runs one step with `client` (the SDK's client or session: both releases name
    `list_tools` and `call_tool` alike), printing its line. `outcome` reads a call's result as
    its isError and its texts; `listen`, when given, runs a `listen` step."""
    kind, tool, arguments = parse_step(step)
    if kind == "list":
        listed = await client.list_tools()
        emit({"step": "list", "tools": [t.name for t in listed.tools]})
    elif kind in ("call", "mrtr"):
        assert tool is not None, f"{step}: no tool named"
        before = len(elicitations.seen)
        is_error, texts = outcome(await client.call_tool(tool, arguments))
        line: dict[str, Any] = {"step": kind, "tool": tool, "isError": is_error, "text": texts}
        if kind == "mrtr":
            line["elicitations"] = elicitations.seen[before:]
        emit(line)
    elif kind == "listen" and listen is not None:
        await listen(client, tool, arguments)
    else:
        raise ValueError(f"unknown step {step!r}")


def client_arguments(modes: bool) -> tuple[argparse.Namespace, list[str]]:
    """The client's arguments (`--mode` too when it has `modes`), and the COMMAND after `--`
    (empty with `--url`)."""
    argv = sys.argv[1:]
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser()
    if modes:
        parser.add_argument("--mode", default="auto")
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("steps", nargs="*")
    args = parser.parse_args(argv)
    if (args.url is None) == (not command):
        parser.error("give either --url URL or -- COMMAND")
    return args, command


async def client_main(
    modes: bool,
    httpx: Any,
    stdio: Callable[..., Any],
    streamable_http: Callable[..., Any],
    run: Callable[[Any, argparse.Namespace], Awaitable[int]],
) -> int:
    """The client's run, `run(target, arguments)`: its target is `stdio` of the COMMAND after
    `--` (run with this process's environment), else `streamable_http` of `--url URL` with an
    HTTP client of the `httpx` module given (the SDK 2.x's is `httpx2`), which sends `--token`
    as a bearer token when there is one. `--mode` is an argument when the client has `modes`."""
    args, command = client_arguments(modes)
    if command:
        return await run(stdio(command=command[0], args=command[1:], env=dict(os.environ)), args)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    # trust_env=False: a proxy named in the environment is not for loopback.
    timeout = httpx.Timeout(30.0, read=300.0)
    async with httpx.AsyncClient(headers=headers, timeout=timeout, trust_env=False) as http:
        return await run(streamable_http(args.url, http_client=http), args)


# ---- The servers ----


def recorded(app: Any, seen: Callable[[dict[str, Any], dict[str, str], bytes, int], dict[str, Any]]) -> Any:
    """`app`, printing {"seen": ...} for each HTTP request as its answer starts: what `seen`
    makes of the request's scope, its headers (lower-case names), its body and the status."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        body: list[bytes] = []

        async def receive_recorded() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "http.request":
                body.append(message.get("body", b""))
            return message

        async def send_recorded(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                line = seen(scope, headers, b"".join(body), message["status"])
                print(json.dumps({"seen": line}, sort_keys=True), flush=True)
            await send(message)

        await app(scope, receive_recorded, send_recorded)

    return wrapped


async def serve(app: Callable[..., Awaitable[None]]) -> None:
    """Serves the ASGI `app` on 127.0.0.1 (`--port PORT`, 0 by default: a free port) until
    killed, once it accepts connections printing {"url": "http://127.0.0.1:PORT/mcp"}."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    port = parser.parse_args().port
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    http = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: http.serve(sockets=[sock]))
        while not http.started:
            await anyio.sleep(0.01)
        print(json.dumps({"url": f"http://127.0.0.1:{port}/mcp"}), flush=True)
