"""The architecture of ``src/tenure``, checked from the source files on disk.

The package is never imported: every module is parsed with :mod:`ast`, so the
checks see every import statement (module level, inside functions, under
``if TYPE_CHECKING:``), including the ones that never run. Imports made at run
time from a computed string (``importlib.import_module(name)``) are invisible.

The rules, one test each:

1. no import cycles anywhere;
2. the top-level layers (``LAYERS``) point down only;
3. the sub-packages of ``tenure.roles`` (``ROLES_ORDER``) point down only;
4. no module uses another module's underscore names, by import (4a) or by
   attribute access (4b).

Every failure lists every offender as ``module:line``, so a refactor can work
down the list. The self-tests at the bottom run each rule on a small fake
package, so an empty list means the tree is clean, not that the checks are blind.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest

# ---------------------------------------------------------------------------
# The declaration: edit this, not the checks, when the architecture changes.
# ---------------------------------------------------------------------------

LAYERS = [
    "protocol",
    "observe",
    "store",
    "coord",
    "models",
    "executors",
    "verify",
    "roles",
    "console",
]
"""The top-level packages of tenure, lowest first. A module may import its own
layer and the layers below it, never one above. ``protocol`` is the lowest, so it
imports nothing of tenure's outside ``tenure.protocol``."""

ABOVE_ALL_LAYERS = {"tenure", "tenure.__main__"}
"""The public API (``tenure/__init__.py``) and ``python -m tenure``: they may
import any layer, and no module of tenure may import them (tests may)."""

ROLES_ORDER = ["register", "member", "planning", "leader", "features", "teams", "coding"]
"""The sub-packages ``tenure.roles.<name>``, lowest first. A module anywhere in
``tenure.roles.X`` (nested sub-packages included) may import ``tenure.roles.Y``
only if Y is X or comes before X. Modules directly in ``tenure/roles/`` (its
``__init__`` too) may import any sub-package; no sub-package may import them."""

PUBLIC_UNDERSCORE_NAMES = {
    # collections.namedtuple / typing.NamedTuple: the leading underscore only keeps
    # these from clashing with field names; they are documented public API.
    # (``_fields`` is also the documented field list of every ast.AST node. Pydantic
    # keeps its internals in dunders such as ``__pydantic_fields__``, which rule 4
    # never flags, so it needs no entry here.)
    "_replace",
    "_asdict",
    "_fields",
    "_field_defaults",
    "_make",
    # os._exit (leave without cleanup, e.g. in a forked child) and sys._getframe:
    # documented functions of the standard library.
    "_exit",
    "_getframe",
    # enum's "sunder" names, documented for use on members and in subclasses.
    "_value_",
    "_name_",
    "_missing_",
    "_generate_next_value_",
    "_ignore_",
    "_order_",
}
"""Underscore names that are public by design in the standard library and the
third-party packages tenure uses. Rule 4 lets exactly these through."""

# ---------------------------------------------------------------------------
# Reading the tree.
# ---------------------------------------------------------------------------

ROOT_PACKAGE = "tenure"
SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass(frozen=True)
class Module:
    name: str  # tenure.roles.coding for roles/coding/__init__.py
    path: Path
    is_package: bool
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package relative imports start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class Import:
    """One name an import statement asks for: ``from a import b, c`` is two."""

    module: str  # the importing module
    line: int
    asked: str  # the full dotted name: a.b for ``from a import b``, a.b for ``import a.b``
    where: str  # "", "inside a function" or "under TYPE_CHECKING"


@dataclass(frozen=True)
class Edge:
    """An import of one tenure module by another, resolved to a module file."""

    source: str
    target: str
    line: int
    where: str

    def __str__(self) -> str:
        where = f" ({self.where})" if self.where else ""
        return f"{self.source}:{self.line} imports {self.target}{where}"


@cache
def modules(src: Path = SRC) -> dict[str, Module]:
    """Every module of the package under ``src``, by dotted name."""
    found: dict[str, Module] = {}
    for path in sorted((src / ROOT_PACKAGE).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found[name] = Module(name, path, is_package, tree)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(body: list[ast.stmt], where: str) -> Iterator[tuple[ast.stmt, str]]:
    """Every statement, however nested, with where it sits; the first of
    "under TYPE_CHECKING" / "inside a function" met on the way in wins."""
    for stmt in body:
        yield stmt, where
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _statements(stmt.body, where or "inside a function")
        elif isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
            yield from _statements(stmt.body, where or "under TYPE_CHECKING")
            yield from _statements(stmt.orelse, where)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(stmt, field, [])
                for child in children:
                    if isinstance(child, ast.stmt):
                        yield from _statements([child], where)
                    elif isinstance(child, ast.ExceptHandler | ast.match_case):
                        yield from _statements(child.body, where)


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports(src: Path = SRC) -> list[Import]:
    """Every name every module imports, from any module (stdlib and third party too)."""
    found: list[Import] = []
    for module in modules(src).values():
        for stmt, where in _statements(module.tree.body, ""):
            if isinstance(stmt, ast.Import):
                names = [alias.name for alias in stmt.names]
            elif isinstance(stmt, ast.ImportFrom):
                base = _absolute(module, stmt)
                names = [f"{base}.{alias.name}" for alias in stmt.names]
            else:
                continue
            found += [Import(module.name, stmt.lineno, name, where) for name in names]
    return found


def _resolve(asked: str, known: dict[str, Module]) -> str | None:
    """The module file an imported name lands in: the longest known prefix, so
    ``from tenure.x import name`` is tenure.x.name if that is a module, else tenure.x."""
    parts = asked.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def edges(src: Path = SRC) -> list[Edge]:
    """Every import of a tenure module by a tenure module, with its line.

    Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first, but that is
    NOT counted as an edge to the parents: every package whose ``__init__`` re-exports
    its modules would then be a cycle. A module depends on a package's ``__init__``
    only when it imports the package itself (``from a.b import name`` with ``name``
    not a module). Importing yourself is not an edge.
    """
    known = modules(src)
    found: list[Edge] = []
    for imp in imports(src):
        target = _resolve(imp.asked, known)
        if target is not None and target != imp.module:
            found.append(Edge(imp.module, target, imp.line, imp.where))
    return list(dict.fromkeys(found))  # ``from a import b, c``: one edge to a, not two


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the tenure modules it imports; every module is a key."""
    graph: dict[str, set[str]] = {name: set() for name in modules(src)}
    for edge in edges(src):
        graph[edge.source].add(edge.target)
    return graph


def fail_on(rule: str, offenders: list[str]) -> None:
    """Fail with every offender on a line of its own (no assertion rewriting noise)."""
    if offenders:
        listing = "\n  ".join(offenders)
        pytest.fail(f"{rule}: {len(offenders)} offender(s)\n  {listing}", pytrace=False)


# ---------------------------------------------------------------------------
# Rule 1: no import cycles.
# ---------------------------------------------------------------------------


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative so that a long import chain cannot hit the
    recursion limit. Components come out sorted, for a stable report."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def _shortest_cycle(start: str, graph: dict[str, set[str]], within: set[str]) -> list[str]:
    """The shortest path start -> ... -> start inside one strongly connected component."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node] & within):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"{start} is in a component but on no cycle")


def cycles(src: Path = SRC) -> list[list[str]]:
    """One shortest cycle through each module that is on a cycle, duplicates dropped:
    every module that needs untangling shows up, without listing exponentially many."""
    graph = import_graph(src)
    found: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for component in strongly_connected(graph):
        if len(component) < 2:
            continue
        for start in component:
            cycle = _shortest_cycle(start, graph, set(component))
            pivot = cycle.index(min(cycle[:-1]))
            key = tuple(cycle[pivot:-1] + cycle[:pivot])
            if key not in seen:
                seen.add(key)
                found.append(cycle)
    return found


def cycle_violations(src: Path = SRC) -> list[str]:
    """Each cycle as ``a -> b -> a``, followed by the import lines that make it."""
    by_pair: dict[tuple[str, str], list[Edge]] = {}
    for edge in edges(src):
        by_pair.setdefault((edge.source, edge.target), []).append(edge)
    report: list[str] = []
    for cycle in cycles(src):
        steps = [str(e) for a, b in pairwise(cycle) for e in by_pair[a, b]]
        report.append(" -> ".join(cycle) + "".join(f"\n      {s}" for s in steps))
    return report


def test_no_import_cycles() -> None:
    """A cycle means neither module can be understood, tested or moved alone, and
    import order starts to matter. Imports inside functions and under TYPE_CHECKING
    count: they hide the cycle from the interpreter, not from the reader."""
    fail_on("import cycles", cycle_violations())


# ---------------------------------------------------------------------------
# Rule 2: layers point down only.
# ---------------------------------------------------------------------------


def layer_of(module: str) -> str | None:
    """The top-level package a module belongs to, if it is a declared layer."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def unlayered_modules(src: Path = SRC) -> list[str]:
    return [
        f"{name}: declare its layer in LAYERS"
        for name in modules(src)
        if name not in ABOVE_ALL_LAYERS and layer_of(name) is None
    ]


def layer_violations(src: Path = SRC) -> list[str]:
    """Every import that points at a higher layer or at the public API."""
    found: list[str] = []
    for edge in edges(src):
        if edge.target in ABOVE_ALL_LAYERS and edge.source not in ABOVE_ALL_LAYERS:
            found.append(f"{edge} — only tests may import {edge.target}")
            continue
        source, target = layer_of(edge.source), layer_of(edge.target)
        if source is None or target is None:
            continue  # the public API, or a module unlayered_modules reports
        if LAYERS.index(target) > LAYERS.index(source):
            found.append(f"{edge} — layer {target} is above {source}")
    return found


def test_every_module_belongs_to_a_layer() -> None:
    """A new top-level package must say where it sits, or rule 2 cannot see it."""
    fail_on("modules outside every layer", unlayered_modules())


def test_layers_point_down_only() -> None:
    """The store must not know about roles, the protocol about anything: then each
    layer can be tested with only the ones below it, and the console stays a shell."""
    fail_on(f"layers (lowest first: {', '.join(LAYERS)})", layer_violations())


# ---------------------------------------------------------------------------
# Rule 3: sub-packages of roles point down only.
# ---------------------------------------------------------------------------

ROLES = f"{ROOT_PACKAGE}.roles"


def roles_group(module: str, src: Path = SRC) -> str | None:
    """``tenure.roles.features.nested.x`` -> "features"; "" for a module directly in
    roles/ (its ``__init__`` included); None outside roles."""
    if module != ROLES and not module.startswith(ROLES + "."):
        return None
    found = modules(src)[module]
    inside = found.path.relative_to(src / ROOT_PACKAGE / "roles").parts
    return inside[0] if len(inside) > 1 else ""


def roles_subpackages(src: Path = SRC) -> set[str]:
    """The names X of the directories roles/X/ that hold modules."""
    return {group for name in modules(src) if (group := roles_group(name, src))}


def unplaced_roles_subpackages(src: Path = SRC) -> list[str]:
    return [
        f"{ROLES}.{name}: declare its place in ROLES_ORDER"
        for name in sorted(roles_subpackages(src) - set(ROLES_ORDER))
    ]


def _roles_problem(source: str, target: str) -> str | None:
    """Why a sub-package of roles may not import a module of roles, if it may not."""
    if target == "":
        return "roles/__init__ and the modules directly in roles/ sit above every sub-package"
    if target not in ROLES_ORDER:
        return f"{target} has no place in ROLES_ORDER"
    if source in ROLES_ORDER and ROLES_ORDER.index(target) > ROLES_ORDER.index(source):
        return f"{target} is above {source} in ROLES_ORDER"
    return None


def roles_violations(src: Path = SRC) -> list[str]:
    found: list[str] = []
    for edge in edges(src):
        source, target = roles_group(edge.source, src), roles_group(edge.target, src)
        if not source or target is None or source == target:
            continue  # outside roles, directly in roles/, or within one sub-package
        problem = _roles_problem(source, target)
        if problem:
            found.append(f"{edge} — {problem}")
    return found


def test_every_roles_subpackage_has_a_place() -> None:
    """A sub-package missing from ROLES_ORDER would escape rule 3."""
    fail_on("roles sub-packages without a place", unplaced_roles_subpackages())


def test_roles_subpackages_point_down_only() -> None:
    """The roles are built on one another (a leader is a member that holds the
    register...); an import the other way round makes them one tangle again."""
    order = ", ".join(ROLES_ORDER)
    fail_on(f"roles sub-packages (lowest first: {order})", roles_violations())


# ---------------------------------------------------------------------------
# Rule 4: no module uses another module's underscore names.
# ---------------------------------------------------------------------------


def is_private(name: str) -> bool:
    """``_x`` and the name-mangled ``__x``; not dunders, not the allowlist."""
    dunder = name.startswith("__") and name.endswith("__")
    return name.startswith("_") and not dunder and name not in PUBLIC_UNDERSCORE_NAMES


def _private_import_problem(imp: Import) -> str | None:
    """A private module may be imported from anywhere inside its own package
    (``tenure.models.openai_adapter`` uses ``tenure.models._sdk``); a private name
    inside a module, never from outside it."""
    parts = imp.asked.split(".")
    for end, part in enumerate(parts, start=1):
        if not is_private(part):
            continue
        owner = ".".join(parts[: end - 1])
        if imp.module != owner and not imp.module.startswith(owner + "."):
            return f"{'.'.join(parts[:end])} is private to {owner}"
    return None


def private_import_violations(src: Path = SRC) -> list[str]:
    """Rule 4a, over every import (stdlib and third party too)."""
    found: list[str] = []
    for imp in imports(src):
        problem = _private_import_problem(imp)
        if problem:
            found.append(f"{imp.module}:{imp.line} imports {imp.asked} — {problem}")
    return found


def _own_names(cls: ast.ClassDef) -> set[str]:
    """Names a class body defines for itself: methods, class attributes, and
    ``self._x = ...`` / ``cls._x = ...`` anywhere in its methods."""
    names: set[str] = set()
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(stmt.name)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        if isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        names |= {target.id for target in targets if isinstance(target, ast.Name)}
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
    return names


def _is_own(value: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: an object reaching into itself."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


def _attribute_named(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(object, name) for ``x.name`` and for ``getattr(x, "name")`` and its kin,
    so spelling the access as a string does not hide it."""
    if isinstance(node, ast.Attribute):
        return node.value, node.attr
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[0], node.args[1].value
    return None


def _private_accesses(node: ast.AST, allowed: frozenset[str] = frozenset()) -> Iterator[ast.expr]:
    """Every ``x._name`` under node, except on self/cls/super() and except names
    an enclosing class defines (``other._x`` inside the class that has ``_x``)."""
    if isinstance(node, ast.ClassDef):
        allowed = allowed | _own_names(node)
    access = _attribute_named(node)
    if access and is_private(access[1]) and access[1] not in allowed and not _is_own(access[0]):
        assert isinstance(node, ast.expr)
        yield node
    for child in ast.iter_child_nodes(node):
        yield from _private_accesses(child, allowed)


def private_attribute_violations(src: Path = SRC) -> list[str]:
    """Rule 4b: reaching into another object's underscore attributes."""
    found: list[str] = []
    for module in modules(src).values():
        for node in _private_accesses(module.tree):
            text = ast.unparse(node)
            text = text if len(text) <= 70 else "..." + text[-67:]
            found.append(f"{module.name}:{node.lineno} touches {text}")
    return found


def test_no_private_imports() -> None:
    """An underscore says "not part of my interface": importing it couples the
    importer to details the owner means to change freely."""
    fail_on("imports of another module's underscore names", private_import_violations())


def test_no_private_attribute_access() -> None:
    """``conductor._send(...)`` from the outside is a missing public method; name it,
    so the owner knows who depends on it."""
    fail_on("uses of another object's underscore attributes", private_attribute_violations())


# ---------------------------------------------------------------------------
# Self-tests: the checks on the real tree must not pass for want of seeing.
# ---------------------------------------------------------------------------


def test_the_graph_sees_the_whole_tree() -> None:
    """Every source file is a module of the graph, and the CLI imports the console."""
    files = list((SRC / ROOT_PACKAGE).rglob("*.py"))
    graph = import_graph()
    assert len(graph) == len(files) > 50
    assert "tenure.console.cli" in graph
    assert any(target.startswith("tenure.console.") for target in graph["tenure.console.cli"])
    assert "tenure.store.sqlite" in graph["tenure.store.url"]  # imported in a function


FAKE_TREE = {
    "__init__.py": "",
    # a cycle protocol.ids -> store -> protocol.ids, through a function-local import
    # one way and a TYPE_CHECKING import the other; protocol.ids also imports upwards
    "protocol/__init__.py": "from . import ids\n",
    "protocol/ids.py": "def f():\n    from tenure.store import thing\n    return thing\n",
    "store/__init__.py": (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from tenure.protocol import ids\n"
        "thing = 1\n"
    ),
    # private names: a sibling may use models._sdk, executors may not; a class may
    # touch its own _x on another instance; self, super() and _replace are fine
    "models/__init__.py": "",
    "models/_sdk.py": "def helper(): ...\n",
    "models/adapter.py": "from tenure.models._sdk import helper\n",
    "models/base.py": (
        "import collections\n"
        "class Point:\n"
        "    def __init__(self):\n"
        "        self._x = 1\n"
        "    def same(self, other):\n"
        "        p = collections.namedtuple('P', 'a')(1)._replace(a=2)\n"
        "        return other._x == self._x and super()._y and p\n"
    ),
    "executors/__init__.py": "",
    "executors/run.py": (
        "from tenure.models._sdk import helper\n"
        "from tenure.models import adapter\n"
        "import tenure\n"
        "from tenure.models.base import _hidden\n"
        "def go(conductor):\n"
        "    return conductor._send(adapter._thing), getattr(conductor, '_peek')\n"
    ),
    # roles: relative imports upwards and into roles/ itself, a nested sub-package,
    # and one without a place in ROLES_ORDER
    "roles/__init__.py": "from tenure.roles import leader, member\n",
    "roles/glue.py": "from tenure.roles.leader import x\n",
    "roles/leader/__init__.py": "from tenure.roles.member import y\nx = 1\n",
    "roles/member/__init__.py": "y = 1\n",
    "roles/member/core.py": "from ..leader import x\nfrom .. import glue\nimport tenure.roles\n",
    "roles/register/nested/__init__.py": "",
    "roles/register/nested/deep.py": (
        "from tenure.roles.mystery import z\n"  # a sub-package without a place
        "import tenure.roles.member\n"  # nested in register, so member is above it
    ),
    "roles/mystery/__init__.py": "z = 1\n",
    "elsewhere.py": "",
}


def fake_tree(tmp_path: Path) -> Path:
    for name, text in FAKE_TREE.items():
        path = tmp_path / "src" / ROOT_PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path / "src"


def test_self_graph_resolves_every_kind_of_import(tmp_path: Path) -> None:
    """The graph behind every rule: relative, local and TYPE_CHECKING imports all land."""
    graph = import_graph(fake_tree(tmp_path))
    assert graph["tenure.protocol"] == {"tenure.protocol.ids"}  # relative, a module
    assert graph["tenure.protocol.ids"] == {"tenure.store"}  # in a function, a name
    assert graph["tenure.store"] == {"tenure.protocol.ids"}  # under TYPE_CHECKING
    assert graph["tenure.roles.member.core"] == {
        "tenure.roles.leader",  # relative, a name in a package
        "tenure.roles.glue",  # relative, a module
        "tenure.roles",
    }
    assert graph["tenure.executors.run"] == {
        "tenure.models._sdk",
        "tenure.models.adapter",
        "tenure.models.base",
        "tenure",
    }
    assert graph["tenure.roles.register.nested"] == set()  # no implicit parent edges


def test_self_cycles_are_caught_through_hidden_imports(tmp_path: Path) -> None:
    assert cycle_violations(fake_tree(tmp_path)) == [
        "tenure.protocol.ids -> tenure.store -> tenure.protocol.ids"
        "\n      tenure.protocol.ids:2 imports tenure.store (inside a function)"
        "\n      tenure.store:3 imports tenure.protocol.ids (under TYPE_CHECKING)"
    ]


def test_self_layers_are_caught(tmp_path: Path) -> None:
    src = fake_tree(tmp_path)
    assert unlayered_modules(src) == ["tenure.elsewhere: declare its layer in LAYERS"]
    assert layer_violations(src) == [
        "tenure.executors.run:3 imports tenure — only tests may import tenure",
        "tenure.protocol.ids:2 imports tenure.store (inside a function)"
        " — layer store is above protocol",
    ]


def test_self_roles_order_is_caught(tmp_path: Path) -> None:
    src = fake_tree(tmp_path)
    assert unplaced_roles_subpackages(src) == [
        "tenure.roles.mystery: declare its place in ROLES_ORDER"
    ]
    assert roles_violations(src) == [
        "tenure.roles.member.core:1 imports tenure.roles.leader"
        " — leader is above member in ROLES_ORDER",
        "tenure.roles.member.core:2 imports tenure.roles.glue"
        " — roles/__init__ and the modules directly in roles/ sit above every sub-package",
        "tenure.roles.member.core:3 imports tenure.roles"
        " — roles/__init__ and the modules directly in roles/ sit above every sub-package",
        "tenure.roles.register.nested.deep:1 imports tenure.roles.mystery"
        " — mystery has no place in ROLES_ORDER",
        "tenure.roles.register.nested.deep:2 imports tenure.roles.member"
        " — member is above register in ROLES_ORDER",
    ]


def test_self_private_names_are_caught(tmp_path: Path) -> None:
    src = fake_tree(tmp_path)
    assert private_import_violations(src) == [
        "tenure.executors.run:1 imports tenure.models._sdk.helper"
        " — tenure.models._sdk is private to tenure.models",
        "tenure.executors.run:4 imports tenure.models.base._hidden"
        " — tenure.models.base._hidden is private to tenure.models.base",
    ]
    assert private_attribute_violations(src) == [
        "tenure.executors.run:6 touches conductor._send",
        "tenure.executors.run:6 touches adapter._thing",
        "tenure.executors.run:6 touches getattr(conductor, '_peek')",
    ]
