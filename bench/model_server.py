"""A local OpenAI-compatible chat-completions server that answers after a fixed delay.

    .venv/bin/python bench/model_server.py --delay 1.0            # prints its base URL

Built on asyncio alone, so a thousand requests waiting at once cost a thousand
coroutines, not a thousand threads: the server is never what limits a benchmark
of concurrent model calls. Every ``POST .../chat/completions`` gets, after
``--delay`` seconds, one completion whose content is ``--answer`` (a JSON object
as text). It counts requests and the most that were in flight at once, and
serves both at ``GET /stats`` (JSON), so the bench can report the concurrency the
server actually saw. HTTP/1.1 keep-alive is honoured (the SDKs pool connections).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from typing import Any

DEFAULT_ANSWER = json.dumps({"status": "completed", "artifact": "ok", "notes": {"verified": []}})


class Stats:
    def __init__(self) -> None:
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
        }


def completion(model: str, content: str) -> dict[str, Any]:
    words = len(content.split())
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": words, "total_tokens": 1 + words},
    }


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    """(method, path, body) of the next request on a connection; None when it closed."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip() or 0)
    body = await reader.readexactly(length) if length else b""
    return method, path, body


def response(status: int, payload: Any) -> bytes:
    data = json.dumps(payload).encode()
    reason = {200: "OK", 404: "Not Found"}.get(status, "Error")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: keep-alive\r\n\r\n"
    )
    return head.encode() + data


def make_handler(delay: float, answer: str, stats: Stats) -> Any:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await read_request(reader)) is not None:
                method, path, body = request
                route = path.split("?", 1)[0]
                if method == "GET" and route == "/stats":
                    writer.write(response(200, stats.as_dict()))
                elif method == "POST" and route.endswith("/chat/completions"):
                    stats.requests += 1
                    stats.in_flight += 1
                    stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
                    try:
                        await asyncio.sleep(delay)
                    finally:
                        stats.in_flight -= 1
                    model = str(json.loads(body or b"{}").get("model", ""))
                    writer.write(response(200, completion(model, answer)))
                else:
                    writer.write(response(404, {"error": {"message": f"no route {path}"}}))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the server is stopping
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    return handle


async def serve(host: str, port: int, delay: float, answer: str) -> None:
    stats = Stats()
    server = await asyncio.start_server(
        make_handler(delay, answer, stats), host, port, backlog=4096, limit=1 << 20
    )
    bound = server.sockets[0].getsockname()[1]
    print(f"http://{host}:{bound}/v1", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds before each answer")
    parser.add_argument("--answer", default=DEFAULT_ANSWER, help="the completion's content")
    args = parser.parse_args(argv)
    if args.delay < 0:
        parser.error("--delay must be >= 0")
    asyncio.run(serve(args.host, args.port, args.delay, args.answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
