"""The import graph of a Python package, read with `ast` (nothing is imported): every `import` and
`from ... import` statement, at module level or inside a function, resolved to the package's own
modules. Used by tests/test_imports.py."""
from __future__ import annotations

import ast
from pathlib import Path


def module_name(path: Path, src_root: Path) -> str:
    parts = list(path.relative_to(src_root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def import_graph(src_root: Path, package: str, exclude: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """{module: modules of `package` it imports}. `from X import n` counts as an import of X.n when
    X.n is a module of the package, else of X."""
    files = {module_name(p, src_root): p for p in sorted((src_root / package).rglob("*.py"))
             if not any(part in exclude for part in p.parts)}
    graph: dict[str, set[str]] = {m: set() for m in files}

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    for mod, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = _package_of(mod, path).split(".")
                    base = base[:len(base) - node.level + 1]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in files else origin for a in node.names]
            for t in targets:
                if t == package or t.startswith(package + "."):
                    hit = known(t)
                    if hit and hit != mod:
                        graph[mod].add(hit)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)
