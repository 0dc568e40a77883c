"""The import graph of ``src/corral`` keeps its shape (docs/architecture.md): ``domain`` imports
nothing from the outer rings, and each of its sub-packages imports only the ones below it."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

SRC = REPO / "src" / "corral"
DOMAIN = SRC / "domain"

#: What each domain sub-package may import, besides itself, ``labels`` and ``corral.errors``.
ALLOWED = {
    "formats": set(),
    "schemas": {"formats"},
    "jinja": {"formats", "schemas"},
    "configs": {"formats", "schemas", "jinja"},
    "access": {"configs"},
    "platform": {"formats", "schemas", "jinja", "configs"},
    "cluster": {"formats", "platform"},
    "topology": {"configs"},
    "workflows": {"formats", "schemas", "jinja", "configs", "platform", "topology"},
    "views": {"formats", "configs", "platform", "workflows"},
}


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of ``path``, parsed once for every test of this module."""
    return ast.parse(path.read_text())


def imported_modules(path: Path) -> Iterator[str]:
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            for alias in node.names:
                yield f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_domain_is_sub_packages_and_imports_nothing_outside() -> None:
    loose = sorted(
        p.name for p in DOMAIN.glob("*.py") if p.name not in ("__init__.py", "labels.py")
    )
    assert loose == []
    outside = [
        f"{path.relative_to(SRC)} imports {module}"
        for path in DOMAIN.rglob("*.py")
        for module in imported_modules(path)
        if module.startswith("corral.")
        and not module.startswith(("corral.domain", "corral.errors"))
    ]
    assert outside == []


def test_each_domain_package_imports_only_the_ones_below_it() -> None:
    packages = sorted(p.name for p in DOMAIN.iterdir() if (p / "__init__.py").exists())
    assert packages == sorted(ALLOWED)
    upward = []
    for package in packages:
        for path in (DOMAIN / package).rglob("*.py"):
            for module in imported_modules(path):
                parts = module.split(".")
                if parts[:2] != ["corral", "domain"] or len(parts) < 3:
                    continue
                other = parts[2]
                if other not in (package, "labels") and other not in ALLOWED[package]:
                    upward.append(f"{path.relative_to(SRC)} imports {module}")
    assert upward == []


def test_services_reach_clusters_only_through_the_backend_port() -> None:
    """``services/`` (and the API and CLI) never import a Kubernetes adapter: what they ask of a
    cluster is in ``backends/port.py``, and ``backends/registry.py`` picks the adapter."""
    reaching = [
        f"{path.relative_to(SRC)} imports {module}"
        for ring in ("services", "api", "cli")
        for path in (SRC / ring).rglob("*.py")
        for module in imported_modules(path)
        if module.startswith("corral.backends.kubernetes")
    ]
    assert reaching == []


def test_the_dashboard_imports_no_api_route_module() -> None:
    """``web/`` shares rules with the API through ``services/commands.py``, never by importing
    an API route module."""
    routes = [
        f"{path.relative_to(SRC)} imports {module}"
        for path in (SRC / "web").rglob("*.py")
        for module in imported_modules(path)
        if module.startswith("corral.api.") and module.split(".")[2].endswith("_routes")
    ]
    assert routes == []


def test_the_embedded_adapter_is_reached_only_from_the_composition_root() -> None:
    """The embedded cluster's adapter is ``backends/embedded/``. Outside ``backends/``, only
    the composition root builds it (``services/runtime.py``), and ``corral task`` (which runs
    inside a local task) writes its control files (``task_reports``)."""
    reaching = sorted(
        {
            str(path.relative_to(SRC))
            for path in SRC.rglob("*.py")
            if (SRC / "backends") not in path.parents
            for module in imported_modules(path)
            if module.startswith("corral.backends.embedded")
        }
    )
    assert reaching == ["cli/task_cmd.py", "services/runtime.py"]


def test_only_the_embedded_adapter_touches_the_embedded_clusters_table() -> None:
    """The embedded cluster's objects are the embedded adapter's (``backends/
    embedded_objects.py``): the controller stages, binds and unbinds through it."""
    touching = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "migrations" not in path.parts
        for module in imported_modules(path)
        if module == "corral.store.tables.cluster_objects"
    )
    assert touching == ["backends/embedded/objects.py"]


def test_the_import_graph_script_finds_no_import_against_the_layers() -> None:
    """``scripts/import_graph.py`` prints the graph of the whole of ``src/`` (docs/architecture.md)
    and the imports that run against the rings and the domain's layers: none."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "import_graph.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    last = done.stdout.strip().splitlines()[-1]
    assert last.endswith("imports against the layers: 0"), done.stdout
    assert "domain.views         -> domain.workflows" in done.stdout


def test_the_scheduler_imports_only_the_domain() -> None:
    """``scheduler/`` is pure placement (its cache and pass included): it imports the domain
    and itself, never a use case, the store or a backend."""
    outward = [
        f"{path.relative_to(SRC)} imports {module}"
        for path in (SRC / "scheduler").rglob("*.py")
        for module in imported_modules(path)
        if module.startswith("corral.")
        and not module.startswith(("corral.scheduler", "corral.domain", "corral.errors"))
    ]
    assert outward == []


#: Functions over :data:`MAX_FUNCTION_LINES` lines, each a data table, with why it stays whole.
LONG_FUNCTIONS = {
    "domain/configs/defaults.py:initial_bundle": "the initial configuration of a new corral "
    "(OSMO's defaults, docs/install.md) as one literal: splitting it would scatter one document",
}
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 500


def test_no_source_file_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(SRC)): lines
        for path in SRC.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_function_is_over_80_lines_but_the_allowed_data_tables() -> None:
    long = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(SRC)}:{node.name}"] = lines
    assert sorted(long) == sorted(LONG_FUNCTIONS), long


def test_web_and_api_reach_the_store_only_through_deps_or_services() -> None:
    """A route gets stored data from ``api/deps.py`` (which hands over the runtime's stores)
    or from a service; no other module of ``api/`` or ``web/`` imports the store."""
    reaching = [
        f"{path.relative_to(SRC)} imports {module}"
        for ring in ("api", "web")
        for path in (SRC / ring).rglob("*.py")
        if path != SRC / "api" / "deps.py"
        for module in imported_modules(path)
        if module.startswith("corral.store")
    ]
    assert reaching == []


def test_deps_hands_routes_the_stores_and_re_exports_only_plain_store_records() -> None:
    """``api/deps.py`` gives routes the runtime's stores as dependencies; the only store types
    a route imports from it by name are the plain records its ``__all__`` re-exports (a
    config revision, a history query, a node change, a user), never a store's internals."""
    deps = SRC / "api" / "deps.py"
    from_store = {
        alias.asname or alias.name
        for node in ast.walk(parsed(deps))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("corral.store")
        for alias in node.names
    }
    exported = next(
        {element.value for element in node.value.elts if isinstance(element, ast.Constant)}
        for node in ast.walk(parsed(deps))
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.List)
        and any(isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets)
    )
    assert exported == {"HistoryQuery", "NodeChange", "Revision", "User"}
    taken = {
        f"{path.relative_to(SRC)}: {alias.name}"
        for ring in ("api", "web")
        for path in (SRC / ring).rglob("*.py")
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.ImportFrom) and node.module == "corral.api.deps"
        for alias in node.names
        if alias.name in from_store and alias.name not in exported
    }
    assert taken == set()


def test_routes_are_module_level() -> None:
    """Routes are declared on module-level routers, not inside factories: no function of
    ``api/`` or ``web/`` defines a function decorated as a route."""
    nested = []
    for ring in ("api", "web"):
        for path in (SRC / ring).rglob("*.py"):
            for outer in ast.walk(parsed(path)):
                if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for inner in ast.walk(outer):
                    if inner is not outer and isinstance(
                        inner, ast.FunctionDef | ast.AsyncFunctionDef
                    ):
                        decorators = [ast.unparse(d) for d in inner.decorator_list]
                        if any(d.startswith(("router.", "app.")) for d in decorators):
                            nested.append(f"{path.relative_to(SRC)}:{outer.name}.{inner.name}")
    assert nested == []


def test_services_keep_no_scheduler_state() -> None:
    """The scheduler's state (snapshots, queue usage, the victim index) is ``scheduler/cache.py``'s:
    services hold a cache and run passes over it, but build no snapshot or usage of their own."""
    building = [
        f"{path.relative_to(SRC)} imports {module}"
        for path in (SRC / "services").rglob("*.py")
        for module in imported_modules(path)
        if module.startswith(("corral.scheduler.snapshot", "corral.scheduler.gang"))
        or module
        in (
            "corral.scheduler.ClusterSnapshot",
            "corral.scheduler.QueueUsage",
            "corral.scheduler.Queue",
        )
    ]
    assert building == []


def test_the_configuration_has_one_type() -> None:
    """Every signature that takes the configuration takes ``Configs``: no ``State`` alias and no
    ``as_configs`` conversion is left to define or import."""
    two_faces = [
        f"{path.relative_to(SRC)}: {name}"
        for path in SRC.rglob("*.py")
        for node in ast.walk(parsed(path))
        for name in _defined_or_imported(node)
        if name in ("State", "as_configs")
    ]
    assert two_faces == []


def _defined_or_imported(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        yield node.name
    elif isinstance(node, ast.Assign):
        yield from (target.id for target in node.targets if isinstance(target, ast.Name))
    elif isinstance(node, ast.ImportFrom):
        yield from (alias.name for alias in node.names)


def test_sandbox_calls_name_their_function_by_reference() -> None:
    """``sandbox.run`` and a pool's ``call`` take the function itself (mypy then checks its
    arguments), never its name as a string."""
    by_name = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path in SRC.rglob("*.py")
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("run", "call")
        and len(node.args) >= 3
        and isinstance(node.args[2], ast.Constant)
        and isinstance(node.args[2].value, str)
    ]
    assert by_name == []


def test_preemption_takes_its_victims_through_a_typed_interface() -> None:
    """``preempt`` gets its victims as ``Victims`` (the cache's index), and no callable."""
    tree = parsed(SRC / "scheduler" / "preemption.py")
    preempt = next(
        node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "preempt"
    )
    annotations = [ast.unparse(arg.annotation) for arg in preempt.args.args if arg.annotation]
    assert "Victims" in annotations
    assert not any("Callable" in annotation for annotation in annotations)


def test_preemption_tries_victims_in_a_statement_and_binds_nothing_by_hand() -> None:
    """``preemption.py`` evicts in a ``Statement`` (``scheduler/statement.py``) and never
    calls ``release``, ``bind``, ``take`` or ``give_back`` on a snapshot or the cache."""
    path = SRC / "scheduler" / "preemption.py"
    assert "corral.scheduler.statement.Statement" in set(imported_modules(path))
    calls = {
        node.func.attr
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert not calls & {"release", "bind", "take", "give_back", "unbind", "rebind"}, calls


def _module_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Each module of the package ``root`` and the modules of it that it imports, type-only and
    function-level imports included (a package is its ``__init__``)."""
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        found = set()
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[module] = {target for target in found if target in modules and target != module}
    return graph


@pytest.mark.parametrize("root", [SRC, REPO / "benchmarks"], ids=["src", "benchmarks"])
def test_no_import_circle(root: Path) -> None:
    """No module of ``src/corral`` (or of the benchmarks) reaches itself through its imports,
    not even through a type-only or function-level import: a circle is one concept split in
    two, or a missing lower module."""
    graph = _module_graph(root)
    circles: list[list[str]] = []
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    assert circles == []


def test_the_tick_reaches_clusters_only_through_the_port() -> None:
    """``services/lifecycle/**`` imports no embedded adapter module, and only its process entry
    imports the controller module (each part of a tick takes what it needs, not the
    controller)."""
    lifecycle = SRC / "services" / "lifecycle"
    for path in sorted(lifecycle.rglob("*.py")):
        found = set(imported_modules(path))
        embedded = {m for m in found if m.startswith("corral.backends.embedded")}
        assert not embedded, (path.name, embedded)
        if path.name not in ("process.py", "controller.py"):
            assert "corral.services.lifecycle.controller" not in found, path.name


def test_no_isinstance_against_a_backend_class_outside_backends() -> None:
    """What a backend does is declared on the port (``schedules_itself``,
    ``writes_in_transaction``, ``live_cluster``), never found out from its class."""
    backend_classes = {
        node.name
        for path in (SRC / "backends").rglob("*.py")
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.ClassDef)
    }
    found = []
    for path in SRC.rglob("*.py"):
        if (SRC / "backends") in path.parents:
            continue
        for node in ast.walk(parsed(path)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and len(node.args) == 2
            ):
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                if names & backend_classes:
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == []


def test_the_port_binds_and_unbinds_and_says_where_it_writes() -> None:
    from corral.backends.port import ClusterBackend

    assert callable(ClusterBackend.bind) and callable(ClusterBackend.unbind)
    assert "writes_in_transaction" in ClusterBackend.__annotations__


def test_statuses_are_named_by_their_enums() -> None:
    """OSMO's status names are written once, in ``domain/workflows/statuses.py``: everywhere
    else a status is ``TaskStatus.X`` or ``WorkflowStatus.X``, and a set of them (alive, holds
    its nodes, in the queue) is derived there from the enums. A misspelt status then fails in
    mypy, and a set cannot drift from another module's copy."""
    from corral.domain.workflows.statuses import TaskStatus, WorkflowStatus

    names = {status.value for status in (*TaskStatus, *WorkflowStatus)}
    home = DOMAIN / "workflows" / "statuses.py"
    written = sorted(
        f"{path.relative_to(SRC)}:{node.lineno} {node.value}"
        for path in SRC.rglob("*.py")
        if path != home and "migrations" not in path.parts
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.Constant) and node.value in names
    )
    assert written == []
