"""``tenure mcp``: a Tenure team served over the Model Context Protocol (the official
``mcp`` SDK, an optional extra) to an agent that speaks it.

- ``member``: the member behind a worker-role server, whose tools (bound to one task of
  one member) are ``roles/member/mcp``'s;
- ``operator``: the tools of a person's agent: status, inbox, answer, cancel;
- ``serve``: the transports, stdio and streamable HTTP (loopback, or a bearer token).
"""
