"""A local HTTP server that speaks the OpenAI chat-completions and Anthropic messages
wire formats, so the real SDKs are exercised end to end without a real provider.

Each request takes the next scripted :class:`Reply` (the last one repeats), or asks
``responder(provider, request_json)`` for one. Replies cover what a provider does:
a JSON answer (as structured output: ``content`` for OpenAI, a forced ``tool_use``
block for Anthropic), plain text, a refusal, an HTTP error with ``retry-after-ms``,
a delay past the client's timeout, and a stream (or a body) cut short.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Kind = Literal["json", "text", "refusal", "status", "sleep", "cut", "cut_body"]


@dataclass(frozen=True)
class Reply:
    kind: Kind
    value: Any = None
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)  # merged into the reply's usage


def with_usage(reply: Reply, **usage: Any) -> Reply:
    """``reply`` reporting these usage fields too (e.g. a prompt cache's token counts)."""
    return replace(reply, usage={**reply.usage, **usage})


def answer(value: Any) -> Reply:
    """A well-formed answer: ``value`` as the structured output (JSON)."""
    return Reply("json", value)


def text(value: str) -> Reply:
    """Plain text as the answer (e.g. malformed JSON)."""
    return Reply("text", value)


def refusal(why: str = "I can't help with that.") -> Reply:
    return Reply("refusal", why)


def error(status: int, message: str = "scripted error") -> Reply:
    return Reply("status", message, status=status, headers={"retry-after-ms": "5"})


def slow(seconds: float, then: Any = None) -> Reply:
    """Answer ``then`` only after ``seconds`` (past a short client timeout)."""
    return Reply("sleep", then, delay=seconds)


def cut(value: Any = None) -> Reply:
    """Start answering (a stream when the client asked for one), then drop the connection."""
    return Reply("cut", value if value is not None else {"status": "completed"})


def cut_body(value: Any = None) -> Reply:
    """A non-streamed body shorter than its Content-Length, then the connection drops."""
    return Reply("cut_body", value if value is not None else {"status": "completed"})


Responder = Callable[[str, dict[str, Any]], Reply]


def words(value: str) -> int:
    return max(1, len(value.split())) if value else 0


class WireServer:
    """``with WireServer([...]) as server:`` -> ``server.openai_url`` / ``server.anthropic_url``."""

    def __init__(self, script: Sequence[Reply] = (), *, responder: Responder | None = None) -> None:
        self.script = list(script)
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []  # time.monotonic() when each request arrived
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        handler = type("Handler", (_Handler,), {"wire": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def openai_url(self) -> str:
        return f"{self.base}/v1"

    @property
    def anthropic_url(self) -> str:
        return self.base

    def __enter__(self) -> WireServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_reply(self, provider: str, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.times.append(time.monotonic())
            index = len(self.requests) - 1
        if self.responder is not None:
            return self.responder(provider, body)
        if not self.script:
            return error(500, "the test server has no scripted reply")
        return self.script[min(index, len(self.script) - 1)]


@contextmanager
def serving(script: Sequence[Reply] = (), **kwargs: Any) -> Iterator[WireServer]:
    with WireServer(script, **kwargs) as server:
        yield server


class _Handler(BaseHTTPRequestHandler):
    wire: WireServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.wire.paths.append(self.path)
        if self.path.endswith("/chat/completions"):
            provider = "openai"
        elif self.path.endswith("/messages"):
            provider = "anthropic"
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        reply = self.wire.next_reply(provider, body)
        if reply.kind == "sleep":
            if self.wire._closing.wait(reply.delay):
                return
            reply = (
                Reply("json", reply.value) if not isinstance(reply.value, Reply) else reply.value
            )
        if reply.kind == "status":
            self._error(provider, reply)
            return
        prompt = sum(words(_content(m)) for m in body.get("messages", []))
        prompt += words(str(body.get("system", "")))
        if body.get("stream"):
            self._stream(provider, body, reply, prompt)
        else:
            payload = (
                _openai(body, reply, prompt)
                if provider == "openai"
                else _anthropic(body, reply, prompt)
            )
            if reply.kind == "cut_body":
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data) + 500))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self._send(200, payload)

    # --- responses ---------------------------------------------------------------------

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, provider: str, reply: Reply) -> None:
        kind = {429: "rate_limit_error", 401: "authentication_error"}.get(reply.status, "api_error")
        if provider == "openai":
            payload: Any = {"error": {"message": reply.value, "type": kind, "code": None}}
        else:
            payload = {"type": "error", "error": {"type": kind, "message": reply.value}}
        self._send(reply.status, payload, reply.headers)

    def _stream(self, provider: str, body: dict[str, Any], reply: Reply, prompt: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        events = (
            _openai_events(body, reply, prompt)
            if provider == "openai"
            else _anthropic_events(body, reply, prompt)
        )
        if reply.kind == "cut":
            events = events[: max(2, len(events) // 2)]
        for event in events:
            self.wfile.write(event.encode())
            self.wfile.flush()
        self.close_connection = True


def _content(message: dict[str, Any]) -> str:
    content = message.get("content", "")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _reply_text(reply: Reply) -> str:
    if reply.kind == "text" or isinstance(reply.value, str):
        return str(reply.value)
    return json.dumps(reply.value)


def _openai(body: dict[str, Any], reply: Reply, prompt: int) -> dict[str, Any]:
    refused = reply.kind == "refusal"
    content = None if refused else _reply_text(reply)
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": reply.value if refused else None,
                },
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": words(content or str(reply.value)),
            "total_tokens": prompt + words(content or str(reply.value)),
            **reply.usage,
        },
    }


def _anthropic_blocks(body: dict[str, Any], reply: Reply) -> tuple[list[dict[str, Any]], str]:
    if reply.kind == "refusal":
        return [{"type": "text", "text": str(reply.value)}], "refusal"
    forced = (body.get("tool_choice") or {}).get("name")
    if forced and reply.kind != "text":
        return [
            {"type": "tool_use", "id": "toolu_test", "name": forced, "input": reply.value}
        ], "tool_use"
    return [{"type": "text", "text": _reply_text(reply)}], "end_turn"


def _anthropic(body: dict[str, Any], reply: Reply, prompt: int) -> dict[str, Any]:
    blocks, stop = _anthropic_blocks(body, reply)
    out = words(json.dumps([b.get("input", b.get("text")) for b in blocks]))
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": out, **reply.usage},
    }


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data) if not isinstance(data, str) else data}\n\n"


def _openai_events(body: dict[str, Any], reply: Reply, prompt: int) -> list[str]:
    whole = _openai(body, reply, prompt)
    message = whole["choices"][0]["message"]
    content = message["content"] or ""
    pieces = [content[i : i + 8] for i in range(0, len(content), 8)] or [""]

    def chunk(delta: dict[str, Any], finish: str | None) -> str:
        return _sse(
            {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": whole["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    events = [chunk({"role": "assistant", "content": ""}, None)]
    if message["refusal"]:
        events.append(chunk({"refusal": message["refusal"]}, None))
    events += [chunk({"content": piece}, None) for piece in pieces]
    events.append(chunk({}, "stop"))
    events.append(
        _sse(
            {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": whole["model"],
                "choices": [],
                "usage": whole["usage"],
            }
        )
    )
    events.append(_sse("[DONE]"))
    return events


def _anthropic_events(body: dict[str, Any], reply: Reply, prompt: int) -> list[str]:
    whole = _anthropic(body, reply, prompt)
    start = {**whole, "content": [], "stop_reason": None}
    start["usage"] = {**whole["usage"], "output_tokens": 1}
    events = [_sse({"type": "message_start", "message": start}, "message_start")]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            text_ = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": text_[i : i + 8]}
                for i in range(0, len(text_), 8)
            ]
        else:
            opening = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": block["text"][i : i + 8]}
                for i in range(0, len(block["text"]), 8)
            ]
        events.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": opening},
                "content_block_start",
            )
        )
        events += [
            _sse({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta")
            for d in deltas
        ]
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    events.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": whole["usage"]["output_tokens"]},
            },
            "message_delta",
        )
    )
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events
