"""The model an agent CLI is pointed at: ``--agent-model`` / ``TENURE_AGENT_MODEL``.

The same ``provider:model[@base_url]`` form as ``TENURE_MODEL`` (``models.select``),
parsed by the same parser; each preset turns it into its CLI's own configuration
(``agent_presets``). The key is read here, once, from the provider's variable
(``OPENAI_API_KEY``, ``OPENROUTER_API_KEY``...) and registered as a secret, so it is
masked wherever Tenure shows or keeps text, also when it reaches the agent under
another variable's name.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tenure.models.select import ModelSpec, api_key, parse_model_spec
from tenure.protocol.secrets import redact_url, register_secret, register_url

ENV_AGENT_MODEL = "TENURE_AGENT_MODEL"
LOCAL_KEY = "not-needed"
"""The key a CLI is given for a server that needs none (most refuse to start without one)."""


@dataclass(frozen=True)
class AgentModel:
    """A parsed model setting and its key (None: the server needs none)."""

    spec: ModelSpec
    key: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, text: str, *, source: str = "--agent-model") -> AgentModel:
        spec = parse_model_spec(text, source=source)
        key = api_key(spec)
        register_secret(key)
        register_url(spec.base_url)
        return cls(spec, key)

    @classmethod
    def from_option(cls, flag: str | None) -> AgentModel | None:
        """``flag``, else ``TENURE_AGENT_MODEL``, else None (the CLI's own default)."""
        if flag and flag.strip():
            return cls.parse(flag)
        env = os.environ.get(ENV_AGENT_MODEL, "").strip()
        return cls.parse(env, source=ENV_AGENT_MODEL) if env else None

    @property
    def name(self) -> str:
        return self.spec.model

    @property
    def wire(self) -> str:
        """``openai`` or ``anthropic``: the API the server behind the URL speaks."""
        return self.spec.adapter

    @property
    def custom(self) -> bool:
        """True when the setting names a server of its own (a URL), not the vendor's API."""
        return self.spec.base_url is not None

    @property
    def root(self) -> str | None:
        """The base URL without a trailing ``/v1`` (what Anthropic-style clients want)."""
        if self.spec.base_url is None:
            return None
        url = self.spec.base_url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url

    @property
    def v1(self) -> str | None:
        """The base URL ending in ``/v1`` (what OpenAI-style clients want)."""
        root = self.root
        return None if root is None else f"{root}/v1"

    def key_or_placeholder(self) -> str:
        return self.key or LOCAL_KEY

    def unreachable(self, *, timeout: float = 3.0) -> str | None:
        """Why the setting's server does not take a connection now (one TCP connect),
        None when it does or the setting names the vendor's API. A warning, not a
        refusal: the agents retry until their deadline, and the server may come up."""
        if self.spec.base_url is None:
            return None
        parts = urlsplit(self.spec.base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((parts.hostname or "", port), timeout=timeout):
                return None
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            return f"cannot reach the model server at {redact_url(self.spec.base_url)} ({why})"
