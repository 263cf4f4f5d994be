"""No import runs back up the layers (DESIGN.md: pure core, I/O at the edges).

Every area of the package (a top-level module or subpackage of ``tokenwire``)
sits on one layer; it may import from its own area and from lower layers only.
Two areas on the same layer (the client and the server, the gateway and the
fakes) never import each other. The check reads the source, so a lazy import
inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "tokenwire"

#: Layer of each area, lowest first. A new module must be given a layer here.
LAYERS: dict[str, int] = {
    "errors": 0,
    "sse": 1,
    "events": 1,
    "mediatype": 1,
    "toolschema": 1,
    "schemas": 1,
    "request": 2,
    "lifecycle": 3,
    "writer": 3,
    "_iter": 3,
    "translate": 4,
    "conformance": 4,
    "_asgi": 5,
    "_outbox": 5,
    "_guard": 6,
    "_h1server": 6,
    "server": 6,
    "client": 6,
    "testing": 7,
    "gateway": 7,
    "cli": 8,
    "__init__": 8,
    "__main__": 9,
}


def _area(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def _imports() -> list[tuple[str, str, int]]:
    """(importing module, imported tokenwire module, line) for every import in src/."""
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
                        found.append((module, ".".join([*base, node.module]), node.lineno))
                    else:
                        found += [
                            (module, ".".join([*base, a.name]), node.lineno) for a in node.names
                        ]
                elif node.module and node.module.split(".")[0] == "tokenwire":
                    found.append((module, node.module, node.lineno))
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
