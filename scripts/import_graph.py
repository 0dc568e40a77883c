"""Print the import graph of ``src/corral`` between packages (``domain`` by sub-package), and
every import that runs against the layering of docs/architecture.md.

    python scripts/import_graph.py          # edges with how many imports each, then problems
    python scripts/import_graph.py --dot    # the same graph for Graphviz
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "corral"
#: The outer rings, innermost first: a package may import only those before it.
RINGS = (
    "errors",
    "domain",
    "files",
    "scheduler",
    "store",
    "backends",
    "services",
    "api",
    "web",
    "credentials",
    "cli",
    "__main__",
)
#: The domain's sub-packages in layer order: each may import only those before it.
DOMAIN_LAYERS = (
    "labels",
    "formats",
    "schemas",
    "jinja",
    "configs",
    "access",
    "platform",
    "cluster",
    "topology",
    "workflows",
    "views",
)


def node_of(module: str) -> str | None:
    """``corral.domain.configs.models`` -> ``domain.configs``; ``corral.api.app`` -> ``api``."""
    parts = module.split(".")
    if parts[0] != "corral" or len(parts) < 2:
        return None
    if parts[1] == "domain" and len(parts) > 2:
        return f"domain.{parts[2]}"
    return parts[1]


def imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def edges() -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    for path in SRC.rglob("*.py"):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        source = node_of(module)
        for imported in imports(path):
            target = node_of(imported)
            if source and target and target != source:
                found[(source, target)] += 1
    return found


def rank(node: str) -> tuple[int, int]:
    ring, _, sub = node.partition(".")
    inner = DOMAIN_LAYERS.index(sub) if sub in DOMAIN_LAYERS else 0
    return (RINGS.index(ring) if ring in RINGS else len(RINGS), inner)


def against_layers(graph: Counter[tuple[str, str]]) -> list[str]:
    """Imports of a package above the importer, or across domain sub-packages upwards."""
    return sorted(
        f"{source} -> {target}" for source, target in graph if rank(target) > rank(source)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dot", action="store_true", help="print Graphviz DOT")
    args = parser.parse_args()
    graph = edges()
    ordered = sorted(graph.items(), key=lambda item: (rank(item[0][0]), rank(item[0][1])))
    if args.dot:
        print("digraph corral {")
        for (source, target), count in ordered:
            print(f'  "{source}" -> "{target}" [label={count}];')
        print("}")
        return
    for (source, target), count in ordered:
        print(f"{source:20} -> {target:20} {count:4d}")
    problems = against_layers(graph)
    print(
        f"packages: {len({n for edge in graph for n in edge})}, edges: {len(graph)}, "
        f"imports against the layers: {len(problems)}"
    )
    for problem in problems:
        print(f"  {problem}")


if __name__ == "__main__":
    main()
