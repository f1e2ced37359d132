"""simppo's import graph: no cycle between modules, and no module imports from a layer above its own (the layer
map of ``docs/architecture.md``). Every import counts: module level, inside functions, and under
``TYPE_CHECKING``."""

import ast
from pathlib import Path

import simppo

PACKAGE = Path(simppo.__file__).parent

#: Lowest first; a module may import from its own layer and the layers below it. Top-level modules are named
#: by their file (``config``, ``paths``).
LAYERS = [
    {"paths", "utils"},
    {"kernels"},
    {"robot"},
    {"sim", "motion"},
    {"envs"},
    {"agent"},
    {"config"},
    {"eval"},
    {"cli"},
    {"integrations"},
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module → the simppo modules it imports (``from a.b import c`` counts ``a.b`` and, if a module, ``a.b.c``)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                found |= {module} | {f"{module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def layer_of(module: str) -> int:
    part = module.split(".")[1] if "." in module else module
    for i, layer in enumerate(LAYERS):
        if part in layer:
            return i
    raise AssertionError(f"{module}: its subpackage {part!r} is missing from LAYERS")


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                cycle = visit(n)
                if cycle:
                    return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            cycle = visit(m)
            if cycle:
                return cycle
    return None


def test_graph_sees_imports():
    graph = import_graph()
    assert "simppo.kernels.types" in graph["simppo.sim.base"]
    assert "simppo.kernels.imitation.spec" in graph["simppo.kernels.imitation.rewards"]


def test_no_import_cycle():
    assert find_cycle(import_graph()) is None, " -> ".join(find_cycle(import_graph()))


def test_no_module_imports_from_a_layer_above_it():
    upward = [f"{a} -> {b}" for a, bs in sorted(import_graph().items()) for b in sorted(bs)
              if a != "simppo" and b != "simppo" and layer_of(b) > layer_of(a)]
    assert not upward, upward


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
