"""What both adapters share: lazy SDK import, error mapping, usage and cost.

:class:`SDKModel` is the part of an adapter that does not depend on the wire
format (the client, its URL, errors, a dropped stream, the completion with its
usage), so each adapter holds only how it builds a request and reads an answer.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any, NamedTuple, TypedDict, TypeVar

from tenure.models.base import ChatMessage, Completion, Usage
from tenure.models.errors import ModelError
from tenure.models.pricing import PriceTable, default_prices
from tenure.models.stop import backoff, current_stop
from tenure.protocol.errors import ConfigError
from tenure.protocol.secrets import known_secrets, redact_text, redact_url

T = TypeVar("T")
SDK_RETRIED = frozenset({"rate_limit", "server", "timeout", "connection"})


def import_sdk(package: str, extra: str) -> ModuleType:
    """The SDK module, or one ConfigError line saying how to install it."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise ConfigError(
            f"the {package} package is not installed: pip install 'tenure[{extra}]'"
        ) from None


def translate_error(
    sdk: ModuleType, exc: Exception, provider: str, model: str, url: str
) -> ModelError:
    """An SDK exception as a ModelError with a kind and a readable reason."""
    status = getattr(exc, "status_code", None)
    detail = _detail(exc)
    if isinstance(exc, sdk.APITimeoutError):
        return ModelError(
            f"no answer from {url} before the timeout",
            kind="timeout",
            provider=provider,
            model=model,
        )
    if isinstance(exc, sdk.APIConnectionError):
        return ModelError(
            f"cannot reach {url}: {detail}", kind="connection", provider=provider, model=model
        )
    if isinstance(exc, sdk.RateLimitError):
        return ModelError(
            f"rate limited (429) after retries: {detail}",
            kind="rate_limit",
            provider=provider,
            model=model,
            status=status,
        )
    if isinstance(exc, sdk.AuthenticationError | sdk.PermissionDeniedError):
        return ModelError(
            f"the server refused the API key ({status}): {detail}",
            kind="auth",
            provider=provider,
            model=model,
            status=status,
        )
    if isinstance(exc, sdk.APIStatusError):
        kind = "server" if isinstance(status, int) and status >= 500 else "bad_request"
        return ModelError(
            f"HTTP {status} after retries: {detail}"
            if kind == "server"
            else f"HTTP {status}: {detail}",
            kind=kind,  # type: ignore[arg-type]
            provider=provider,
            model=model,
            status=status,
        )
    return ModelError(
        redact_text(f"{type(exc).__name__}: {exc}"), provider=provider, model=model
    )


def _detail(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return redact_text(str(error["message"])[:300])
    return redact_text(str(getattr(exc, "message", None) or exc)[:300])


class Tokens(NamedTuple):
    """Token counts as the server reported them (None: left out). ``input`` counts every
    input token, those read from (``cache_read``) or written to (``cache_write``) a
    prompt cache included."""

    input: int | None = None
    output: int | None = None
    cache_read: int = 0
    cache_write: int = 0


def usage_of(
    prices: PriceTable | None,
    provider: str,
    model: str,
    tokens: Tokens,
    messages: list[ChatMessage],
    text: str,
) -> tuple[Usage, bool]:
    """The call's usage with its cost; token counts the server left out are estimated."""
    from tenure.models.scripted import count_tokens

    tokens_in = (
        tokens.input
        if tokens.input is not None
        else sum(count_tokens(m.content) for m in messages)
    )
    tokens_out = tokens.output if tokens.output is not None else count_tokens(text)
    read = min(tokens.cache_read, tokens_in)
    write = min(tokens.cache_write, tokens_in - read)
    cost = (prices or default_prices()).cost(provider, model, tokens_in, tokens_out, read, write)
    return Usage(tokens_in, tokens_out, cost or 0.0, read, write), cost is not None


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def count(value: Any) -> int:
    """A token count the server may have left out (or sent as null): 0 then."""
    return as_int(value) or 0


class SDKOptions(TypedDict, total=False):
    """The constructor options every SDK adapter takes (see :class:`SDKModel`)."""

    base_url: str | None
    api_key: str | None
    timeout: float
    max_retries: int
    stream: bool
    prices: PriceTable | None
    provider: str | None


class SDKModel:
    """A model behind an official SDK; subclasses build the request and read the answer."""

    package = ""  # the SDK's import name, which is also the pip extra
    client_class = ""  # the SDK's client class
    default_provider = ""
    default_url = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        stream: bool = False,
        prices: PriceTable | None = None,
        provider: str | None = None,
    ) -> None:
        self.sdk = import_sdk(self.package, self.package)
        self.name = model
        self.provider = provider if provider is not None else self.default_provider
        self.base_url = base_url
        self.stream = stream
        self.prices = prices
        self.timeout = timeout
        self.max_retries = max_retries
        self.client: Any = getattr(self.sdk, self.client_class)(
            api_key=api_key or "not-needed",  # local servers ignore it; the SDK wants one
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
        )

    @property
    def url(self) -> str:
        return self.base_url or self.default_url

    def outgoing(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """The conversation as it is sent: every known secret redacted
        (``protocol.secrets``), whoever built the prompt — worker, planner or judge."""
        secrets = known_secrets()
        return [ChatMessage(m.role, redact_text(m.content, secrets)) for m in messages]

    @contextmanager
    def sdk_errors(self) -> Iterator[None]:
        """What the SDK raises after its own retries, as a ModelError."""
        try:
            yield
        except ModelError:
            raise
        except self.sdk.APIError as exc:
            raise translate_error(
                self.sdk, exc, self.provider, self.name, redact_url(self.url)
            ) from None

    def send(self, request: Callable[[Any], T], *, max_retries: int | None = None) -> T:
        """``request(client)``, with the SDK's own retries (``max_retries`` of them, default
        the model's); or, under a stop (``tenure.models.stop``: an attempt's deadline or
        cancellation), with each try's timeout cut to the time left and retries made
        here, so that no request starts once the attempt must stop (``ModelError`` kind
        ``stopped``)."""
        limit = self.max_retries if max_retries is None else max_retries
        stop = current_stop()
        if stop is None:
            if limit == self.max_retries:
                return request(self.client)
            return request(self.client.with_options(max_retries=limit))
        retries = 0
        while True:
            left = stop.check(self.provider, self.name)
            timeout = self.timeout if left is None else max(0.01, min(self.timeout, left))
            client = self.client.with_options(timeout=timeout, max_retries=0)
            try:
                return request(client)
            except self.sdk.APIError as exc:
                kind = translate_error(self.sdk, exc, self.provider, self.name, self.url).kind
                if kind not in SDK_RETRIED or retries >= limit:
                    raise
                retries += 1
                stop.pause(backoff(retries, _retry_after(exc)))

    def watched(self, stream: Iterable[T]) -> Iterator[T]:
        """A stream's items, until the attempt must stop (then ``stopped``; the caller's
        ``reading`` closes the stream)."""
        stop = current_stop()
        for item in stream:
            if stop is not None:
                stop.check(self.provider, self.name)
            yield item

    @contextmanager
    def reading(self, stream: Any) -> Iterator[None]:
        """Reading ``stream``: a dropped connection is ``cut_short``; the stream is closed."""
        try:
            yield
        except (self.sdk.APIError, ModelError):
            raise
        except Exception as exc:  # the connection dropped mid-stream (httpx errors)
            raise self.cut_short(f"{type(exc).__name__}: {exc}") from None
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def cut_short(self, why: str) -> ModelError:
        return ModelError(
            f"the stream was cut short: {why}",
            kind="cut_short",
            provider=self.provider,
            model=self.name,
        )

    def completion(
        self,
        messages: list[ChatMessage],
        text: str,
        tokens: Tokens,
        *,
        refusal: str | None,
        finish: str,
        started: float,
    ) -> Completion:
        """The answer with its usage and cost, timed from ``started`` (``time.monotonic``)."""
        usage, priced = usage_of(self.prices, self.provider, self.name, tokens, messages, text)
        return Completion(
            text,
            usage,
            self.name,
            self.provider,
            refusal=refusal,
            finish_reason=finish,
            seconds=time.monotonic() - started,
            priced=priced,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.provider}:{self.name} at {redact_url(self.url)})"


def _retry_after(exc: Exception) -> float | None:
    """The server's ``retry-after-ms`` / ``retry-after`` (seconds), if it sent one."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / scale
        except ValueError:
            continue
    return None
