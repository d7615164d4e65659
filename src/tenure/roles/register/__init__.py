"""The typed register every role reads and writes: tasks with their spec and attempt
data parsed once, fenced compare-and-set writes, a view kept current from the event
log, and what it means for a plan to be settled."""

from tenure.roles.register.access import Register
from tenure.roles.register.plan import OPEN_STATES, WAITING_STATES, plan_settled, register_plan
from tenure.roles.register.task import SPEC, TAMPERED, UNSIGNED, Task, read_task
from tenure.roles.register.view import RegisterView

__all__ = [
    "OPEN_STATES",
    "SPEC",
    "TAMPERED",
    "UNSIGNED",
    "WAITING_STATES",
    "Register",
    "RegisterView",
    "Task",
    "plan_settled",
    "read_task",
    "register_plan",
]
