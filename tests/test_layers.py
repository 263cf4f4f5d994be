"""No import runs back up the layers (DESIGN.md: pure core, I/O at the edges).

Every area of the package (a top-level module or subpackage of ``tokenwire``)
sits on one layer; it may import from its own area and from lower layers only.
Two areas on the same layer (the client and the server, the gateway and the
fakes) never import each other. The check reads the source, so a lazy import
inside a function counts as much as one at the top.

Inside the serving layer (``SERVER_LAYERS``: the ASGI plumbing lowest, the
endpoint on top) and inside the gateway (``GATEWAY_LAYERS``: the config lowest,
the app wiring on top) the same rule holds between their parts, and nowhere in
``src/`` may modules import each other round in a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "tokenwire"

#: Layer of each area, lowest first. A new module must be given a layer here.
LAYERS: dict[str, int] = {
    "errors": 0,
    "_buffer": 0,
    "_suggest": 0,
    "_secrets": 0,
    "sse": 1,
    "events": 1,
    "mediatype": 1,
    "toolschema": 1,
    "schemas": 1,
    "request": 2,
    "binary": 2,
    "lifecycle": 3,
    "writer": 3,
    "_iter": 3,
    "translate": 4,
    "conformance": 4,
    "server": 6,
    "client": 6,
    "testing": 7,
    "gateway": 7,
    "cli": 8,
    "__init__": 8,
    "__main__": 9,
}


#: Layer of each area of ``tokenwire.server`` (a subpackage or module), lowest first.
#: The plumbing (ASGI types, the outbox, the encoders) at the bottom; the transports
#: (our HTTP/1.1 server, the frame channels) and the guard over it; one accepted
#: stream, then the endpoint that accepts it; the package's public names on top.
SERVER_LAYERS: dict[str, int] = {
    "asgi": 0,
    "negotiate": 0,
    "outbox": 0,
    "encoders": 0,
    "exchange": 1,
    "hooks": 2,
    "guard": 2,
    "http1": 2,
    "frames": 2,
    "stream": 3,
    "endpoint": 4,
    "__init__": 5,
}


#: Layer of each area of ``tokenwire.gateway`` (a subpackage or top-level module),
#: lowest first; the same rules as ``LAYERS`` hold between them. Each package's
#: docstring says "May import:" to match.
GATEWAY_LAYERS: dict[str, int] = {
    "config": 0,
    "context": 1,
    "upstream": 2,
    "telemetry": 2,
    "redis_clients": 2,
    "resume": 3,
    "responses_ws": 3,
    "policy": 3,
    "providers": 3,
    "answers": 3,
    "ingress": 4,
    "body_encoding": 4,
    "playground": 4,
    "production": 4,
    "routes": 5,
    "app": 6,
    "serving": 7,
    "__init__": 8,
}


def _area(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def _inner_area(package: str, module: str) -> str | None:
    """The area of ``module`` inside ``tokenwire.<package>`` (``None`` outside it)."""
    parts = module.split(".")
    if parts[:2] != ["tokenwire", package]:
        return None
    return "__init__" if len(parts) == 2 else parts[2]


def _gateway_area(module: str) -> str | None:
    return _inner_area("gateway", module)


def _modules() -> set[str]:
    """Every module of the package, by dotted name (a package by its own name)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.add(".".join(parts))
    return names


def _imports() -> list[tuple[str, str, int]]:
    """(importing module, imported tokenwire name, line) for every import in src/.

    ``from a import b`` gives ``a.b``: a module when ``b`` is one, else a name in
    ``a`` (``_resolve`` maps it back to the module).
    """
    found: list[tuple[str, str, int]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        module = ".".join(parts)
        package = parts if is_package else parts[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    if node.module:
                        found += [
                            (module, ".".join([*base, node.module, a.name]), node.lineno)
                            for a in node.names
                        ]
                    else:
                        found += [
                            (module, ".".join([*base, a.name]), node.lineno) for a in node.names
                        ]
                elif node.module and node.module.split(".")[0] == "tokenwire":
                    # ``from tokenwire.x import y``: ``y`` may be a module itself.
                    found += [(module, f"{node.module}.{a.name}", node.lineno) for a in node.names]
            elif isinstance(node, ast.Import):
                found += [
                    (module, a.name, node.lineno)
                    for a in node.names
                    if a.name.split(".")[0] == "tokenwire"
                ]
    return found


def test_every_area_has_a_layer() -> None:
    areas = {
        _area(".".join(p.relative_to(SRC).with_suffix("").parts)) for p in PACKAGE.rglob("*.py")
    }
    missing = sorted(areas - LAYERS.keys())
    assert not missing, f"give these modules a layer in {__file__}: {missing}"


def test_imports_go_down_the_layers() -> None:
    wrong = [
        f"{importer}:{line} imports {imported} "
        f"({_area(importer)} is on layer {LAYERS[_area(importer)]}, "
        f"{_area(imported)} on layer {LAYERS[_area(imported)]})"
        for importer, imported, line in _imports()
        if _area(importer) != _area(imported) and LAYERS[_area(imported)] >= LAYERS[_area(importer)]
    ]
    assert not wrong, "imports that run back up the layers:\n" + "\n".join(wrong)


def test_every_gateway_area_has_a_layer() -> None:
    areas = {_gateway_area(m) for m in _modules()} - {None}
    missing = sorted(areas - GATEWAY_LAYERS.keys())  # type: ignore[operator]
    assert not missing, f"give these gateway modules a layer in {__file__}: {missing}"


def test_gateway_imports_go_down_its_layers() -> None:
    wrong = []
    for importer, imported, line in _imports():
        here, there = _gateway_area(importer), _gateway_area(imported)
        if here is None or there is None or here == there:
            continue
        if GATEWAY_LAYERS[there] >= GATEWAY_LAYERS[here]:
            wrong.append(
                f"{importer}:{line} imports {imported} (gateway.{here} is on layer "
                f"{GATEWAY_LAYERS[here]}, gateway.{there} on layer {GATEWAY_LAYERS[there]})"
            )
    assert not wrong, "gateway imports that run back up its layers:\n" + "\n".join(wrong)


def test_every_server_area_has_a_layer() -> None:
    areas = {_inner_area("server", m) for m in _modules()} - {None}
    missing = sorted(areas - SERVER_LAYERS.keys())  # type: ignore[operator]
    assert not missing, f"give these server modules a layer in {__file__}: {missing}"


def test_server_imports_go_down_its_layers() -> None:
    modules = _modules()
    wrong = []
    for importer, imported, line in _imports():
        # ``from . import x`` names the package: the module it resolves to decides.
        target = _resolve(imported, modules) or imported
        here, there = _inner_area("server", importer), _inner_area("server", target)
        if here is None or there is None or here == there:
            continue
        if SERVER_LAYERS[there] >= SERVER_LAYERS[here]:
            wrong.append(
                f"{importer}:{line} imports {imported} (server.{here} is on layer "
                f"{SERVER_LAYERS[here]}, server.{there} on layer {SERVER_LAYERS[there]})"
            )
    assert not wrong, "server imports that run back up its layers:\n" + "\n".join(wrong)


def _resolve(name: str, modules: set[str]) -> str | None:
    """The module an imported name lives in (``a.b.func`` -> ``a.b``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], int]]:
    """Module -> the modules it imports (lazily or not), and the line of each edge."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    lines: dict[tuple[str, str], int] = {}
    for importer, imported, line in _imports():
        target = _resolve(imported, modules)
        if target is not None and target != importer:
            graph[importer].add(target)
            lines.setdefault((importer, target), line)
    return graph, lines


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` as ``[a, b, ..., a]``, or ``[]`` when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_the_cycle_finder_finds_a_circle() -> None:
    # The check below is only as good as this: a circle three modules round, beside a tree.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_circle_in_src() -> None:
    # A circle works only by the order of imports (or by hiding one end in a
    # function); either way the modules are one module in two files.
    graph, lines = _graph()
    circle = _cycle(graph)
    steps = [f"{a}:{lines[(a, b)]} imports {b}" for a, b in zip(circle, circle[1:], strict=False)]
    assert not circle, "an import circle:\n" + "\n".join(steps)
