"""A member's work served over the Model Context Protocol (the official ``mcp`` SDK,
an optional extra, imported only when a server is made).

- ``tools``: the worker's tools over a ``Bridge``: read the task, check in, ask, submit;
- ``http``: one attempt's tools over streamable HTTP on loopback, with a token of its
  own (a coding attempt's agent CLI reports through them);
- ``sdk``: the one place the SDK is imported, with the install hint.

``tenure mcp`` (``console/mcp``) serves the same tools over stdio or HTTP, and the
operator's tools besides.
"""
