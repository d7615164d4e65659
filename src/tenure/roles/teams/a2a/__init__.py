"""A team served as an A2A agent (``tenure a2a serve``).

Each A2A task is one task of the served team. A team of its own runs in ``queue``
mode: the task goes into the team's shared queue, and the team's queue workers take
it — ``tenure worker --queue`` processes on the same store, or threads of the server
when it is started with ``--exec``. Queue mode needs no leader, so a task can join
the team at any time without a new plan revision. A team a leader leads gets the task
registered, signed with the lead key, for its running leader to dispatch (``led``).
Either way the result is judged by the ladder. A task waiting for a person is A2A
``input-required``; the caller's next message on it is the answer (``tenure.answer``).
Beyond loopback the server requires a bearer token, and its card says so.

The SDK is imported here: import this package only when serving
(``tenure.executors.a2a_sdk.require_a2a`` says how to install it).
"""

from tenure.roles.teams.a2a.agent import TeamAgent
from tenure.roles.teams.a2a.server import A2AServer, agent_card, bound_socket, build_app
from tenure.roles.teams.a2a.states import A2A_STATES, REJECTED, standing_of

__all__ = [
    "A2A_STATES",
    "REJECTED",
    "A2AServer",
    "TeamAgent",
    "agent_card",
    "bound_socket",
    "build_app",
    "standing_of",
]
