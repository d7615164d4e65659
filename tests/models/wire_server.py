"""A local HTTP server that speaks the OpenAI chat-completions and responses and the
Anthropic messages wire formats, so the real SDKs and agent CLIs are exercised end to
end without a real provider.

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

Kind = Literal["json", "text", "refusal", "status", "sleep", "cut", "cut_body", "call"]


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


def call(name: str, **arguments: Any) -> Reply:
    """A tool call (Responses API: a ``function_call`` item; Anthropic: a ``tool_use``
    block; Gemini: a ``functionCall`` part), as an agent CLI's model asks it to run a command; the client answers with
    the output in its next request."""
    return Reply("call", {"name": name, "arguments": arguments})


def namespaced_call(namespace: str, name: str, **arguments: Any) -> Reply:
    """A call of a tool the client offered inside a namespace (the Responses API's
    ``{"type": "namespace", "tools": [...]}``, as codex offers an MCP server's tools):
    the ``function_call`` item names its namespace too."""
    return Reply("call", {"name": name, "arguments": arguments, "namespace": namespace})


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
        route = self.path.split("?", 1)[0]  # Claude Code asks /v1/messages?beta=true
        if route.endswith("/chat/completions"):
            provider = "openai"
        elif route.endswith("/responses"):
            provider = "responses"
        elif ":generateContent" in route or ":streamGenerateContent" in route:
            provider = "gemini"  # Google's wire: the model is in the path
            body = {**body, "model": route.rsplit("/", 1)[-1].split(":", 1)[0]}
        elif route.endswith("/messages"):
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
        if "input" in body:  # the Responses API's conversation
            prompt += words(json.dumps(body["input"]))
        if provider == "responses":
            self._responses(body, reply, prompt)
        elif provider == "gemini":
            self._gemini(route.endswith(":streamGenerateContent"), reply)
        elif body.get("stream"):
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

    def do_GET(self) -> None:
        """Model lists and the like: an empty list, so a client that asks goes on."""
        self.wire.paths.append(self.path)
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [], "models": []})
            return
        self._send(404, {"error": {"message": f"no route {self.path}"}})

    def _gemini(self, streamed: bool, reply: Reply) -> None:
        """Google's generateContent: one candidate with the text, streamed as SSE."""
        content = _reply_text(reply)
        part: dict[str, Any] = {"text": content}
        if reply.kind == "call":
            part = {"functionCall": {"name": reply.value["name"], "args": reply.value["arguments"]}}
        whole = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [part]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 1,
                "candidatesTokenCount": words(content),
                "totalTokenCount": 1 + words(content),
            },
        }
        if not streamed:
            self._send(200, whole)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(_sse(whole).encode())
        self.wfile.flush()
        self.close_connection = True

    def _responses(self, body: dict[str, Any], reply: Reply, prompt: int) -> None:
        """The OpenAI Responses API: one assistant message, streamed when asked."""
        whole = _response(body, reply, prompt)
        if not body.get("stream"):
            self._send(200, whole)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        events = _response_events(whole)
        if reply.kind == "cut":
            events = events[:1]
        for event in events:
            self.wfile.write(event.encode())
            self.wfile.flush()
        self.close_connection = True

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


def _tool_call(reply: Reply) -> dict[str, Any]:
    arguments = json.dumps(reply.value["arguments"])
    function = {"name": reply.value["name"], "arguments": arguments}
    return {"id": "call_test", "type": "function", "function": function}


def _openai(body: dict[str, Any], reply: Reply, prompt: int) -> dict[str, Any]:
    refused = reply.kind == "refusal"
    content = None if refused or reply.kind == "call" else _reply_text(reply)
    whole = {
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
    if reply.kind == "call":
        whole["choices"][0]["message"]["tool_calls"] = [_tool_call(reply)]
        whole["choices"][0]["finish_reason"] = "tool_calls"
    return whole


def _anthropic_blocks(body: dict[str, Any], reply: Reply) -> tuple[list[dict[str, Any]], str]:
    if reply.kind == "refusal":
        return [{"type": "text", "text": str(reply.value)}], "refusal"
    if reply.kind == "call":
        # one id per call: a client answering two calls in one conversation keeps them apart
        turn = len(body.get("messages") or [])
        block = {"type": "tool_use", "id": f"toolu_call_{turn}", "name": reply.value["name"]}
        return [{**block, "input": reply.value["arguments"]}], "tool_use"
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
    if message.get("tool_calls"):
        calls = [{"index": 0, **message["tool_calls"][0]}]
        events += [chunk({"tool_calls": calls}, None), chunk({}, "tool_calls")]
    else:
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


def _response(body: dict[str, Any], reply: Reply, prompt: int) -> dict[str, Any]:
    content = _reply_text(reply)
    item: dict[str, Any] = {
        "type": "message",
        "id": "msg_test",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": content, "annotations": []}],
    }
    if reply.kind == "call":
        item = {
            "type": "function_call",
            "id": "fc_test",
            "call_id": f"call_{len(json.dumps(body.get('input', '')))}",
            "name": reply.value["name"],
            "arguments": json.dumps(reply.value["arguments"]),
            "status": "completed",
        }
        if reply.value.get("namespace"):
            item["namespace"] = reply.value["namespace"]
    out = words(content)
    return {
        "id": "resp_test",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": body.get("model", ""),
        "output": [item],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + out,
            **reply.usage,
        },
    }


def _response_events(whole: dict[str, Any]) -> list[str]:
    started = {**whole, "status": "in_progress", "output": []}
    item = whole["output"][0]
    if item["type"] == "function_call":
        return [
            _sse({"type": "response.created", "response": started}, "response.created"),
            _sse(
                {"type": "response.output_item.done", "output_index": 0, "item": item},
                "response.output_item.done",
            ),
            _sse({"type": "response.completed", "response": whole}, "response.completed"),
        ]
    text_ = item["content"][0]["text"]
    return [
        _sse({"type": "response.created", "response": started}, "response.created"),
        _sse(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "content": []},
            },
            "response.output_item.added",
        ),
        _sse(
            {
                "type": "response.output_text.delta",
                "output_index": 0,
                "content_index": 0,
                "item_id": item["id"],
                "delta": text_,
            },
            "response.output_text.delta",
        ),
        _sse(
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            "response.output_item.done",
        ),
        _sse({"type": "response.completed", "response": whole}, "response.completed"),
    ]
