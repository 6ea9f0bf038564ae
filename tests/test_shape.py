"""The shape of the code (issue 36's "Measure"): no import circle between pamir's modules, and
no module over about 600 lines or function over about 80 without a reason written beside it.

Read from the source with `ast` (nothing is imported), so it is quick and sees the imports
inside functions too; imports under `if TYPE_CHECKING:` are for the type checker only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PAMIR = Path(__file__).resolve().parent.parent / "pamir"
#: The shape rule of issue 36, "about" given room: a module or function longer than these
#: holds a comment or docstring saying why ("longer than ...", in its first lines or just
#: above its def).
MODULE_LINES = 620
FUNCTION_LINES = 85
REASON = "longer than"
#: Functions over FUNCTION_LINES that do not say why yet, each with who is to give the reason
#: or split it; remove the line when done.
NOT_YET_SAID: set[str] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PAMIR.rglob("*.py")):
        parts = list(path.relative_to(PAMIR.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(module: str, path: Path, modules: dict) -> set[str]:
    """The pamir modules `module` imports, at its top or inside its functions."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if (isinstance(child, ast.If) and isinstance(child.test, ast.Name)
                    and child.test.id == "TYPE_CHECKING"):
                continue
            if isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([child.module] if child.module else []))
                for alias in child.names:
                    found.add(known(f"{base}.{alias.name}") or known(base))
            elif isinstance(child, ast.Import):
                found.update(known(alias.name) for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    # a package's facade importing its own parts is how a package is made, not a circle
    return {m for m in found if m and m != module and not m.startswith(module + ".")}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    order, low, stack, on_stack, out = {}, {}, [], set(), []

    def connect(v):
        order[v] = low[v] = len(order)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in order:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in graph:
        if v not in order:
            connect(v)
    return out


def test_no_import_circle():
    modules = _modules()
    graph = {m: _imported(m, p, modules) for m, p in modules.items()}
    assert graph["pamir.index.reading"] >= {"pamir.index.queries", "pamir.index.filters"}
    assert _circles(graph) == []


def test_the_circle_finder_finds_one():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _says_why(lines: list[str], start: int, end: int) -> bool:
    """Whether lines[start:end] (a module's head, or a def with the lines above it) hold a
    reason for the length."""
    return any(REASON in line.lower() for line in lines[max(start, 0):end])


def test_long_modules_and_functions_say_why():
    unsaid = []
    for path in _modules().values():
        lines = path.read_text(encoding="utf-8").splitlines()
        name = path.relative_to(PAMIR.parent).as_posix()
        if len(lines) > MODULE_LINES and not _says_why(lines, 0, 40):
            unsaid.append(f"{name} ({len(lines)} lines)")
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = node.end_lineno - node.lineno + 1
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if (length > FUNCTION_LINES and f"{name}:{node.name}" not in NOT_YET_SAID
                    and not _says_why(lines, first - 7, node.lineno + 25)):
                unsaid.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    assert unsaid == [], "split these, or say why they are long (issue 36's shape rule)"


BENCHMARKS = PAMIR.parent / "benchmarks"


def _benchmark_scripts() -> list[Path]:
    return sorted([*BENCHMARKS.glob("*.py"), *BENCHMARKS.glob("history/*.py")])


def test_no_benchmark_imports_another():
    """What two benchmarks share lives in benchmarks/common/ (a module a concern), so that
    each script can be read, run and moved to history/ alone."""
    names = {p.stem for p in _benchmark_scripts()}
    found = []
    for path in _benchmark_scripts():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            found += [f"{path.name} imports {m}" for m in modules if m.split(".")[0] in names]
    assert found == []



def test_benchmarks_import_what_they_share_from_its_module():
    """A benchmark imports a shared name from the module of benchmarks/common/ that holds it
    (`from common.harness import Run`): common/__init__.py exports nothing, so that a script
    pays only for the modules it uses (harness loads no feature code)."""
    found = []
    for path in _benchmark_scripts():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "common" and not node.level:
                found.append(f"{path.name}:{node.lineno} from common import "
                             + ", ".join(a.name for a in node.names))
    assert found == [], "import these from common.harness, corel, latency, folders, tpami, videos, zero"

def test_every_result_can_be_made_again_by_run_all():
    """Each script a committed result names, and each benchmark script, has its line in
    benchmarks/run_all.sh."""
    run_all = (BENCHMARKS / "run_all.sh").read_text(encoding="utf-8")
    named = {m for md in (BENCHMARKS / "results").glob("*.md")
             for m in re.findall(r"benchmarks/([\w/]+\.py)", md.read_text(encoding="utf-8"))}
    scripts = {p.name for p in BENCHMARKS.glob("bench_*.py")}
    missing = sorted(n for n in named | scripts
                     if not n.startswith("common/") and Path(n).name not in run_all)
    assert missing == []


ARCHITECTURE = PAMIR.parent / "docs" / "architecture.md"
#: Imports that still go up a layer, each with the fix it waits for; an entry leaves as its
#: import goes (test_no_import_goes_up_a_layer fails on one that no longer occurs), so the
#: whole package comes under the rule by removing lines, never by adding them.
UPWARDS: dict[tuple[str, str], str] = {}


def _layers() -> dict[str, int]:
    """{name: height} from the drawing under "## Layers" in docs/architecture.md: a row per
    layer, the top row highest; a row's names are separated by commas, before any "(".
    A name is a package of pamir/ ("index", "facts") or a module outside one ("system")."""
    block = ARCHITECTURE.read_text(encoding="utf-8").split("## Layers", 1)[1].split("```")[1]
    rows = [line.split("(")[0].replace(",", " ").split() for line in block.strip().splitlines()]
    return {name: len(rows) - i for i, row in enumerate(rows) for name in row}


def _layer_of(module: str, layers: dict[str, int]) -> str | None:
    """The finest name of `layers` that holds module (pamir.index.sync -> "index")."""
    parts = module.split(".")[1:]
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in layers:
            return ".".join(parts[:k])
    return None


def _upwards(graph: dict[str, set[str]], layers: dict[str, int]) -> tuple[list, set]:
    """(the modules in no layer, the (module, imported) pairs whose import goes up a layer)."""
    unplaced, upwards = [], set()
    for module, imported in graph.items():
        mine = _layer_of(module, layers)
        if mine is None:
            unplaced.append(module)
            continue
        for other in imported:
            theirs = _layer_of(other, layers)
            if theirs is not None and layers[theirs] > layers[mine]:
                upwards.add((module, other))
    return unplaced, upwards


def test_the_layer_check_finds_an_import_upwards():
    layers = {"facts": 3, "text": 2, "text.embedding": 1, "config": 1}
    graph = {"pamir.text.query": {"pamir.facts.fact", "pamir.config"},
             "pamir.text.words": {"pamir.text.embedding"}, "pamir.facts.fact": {"pamir.text.words"},
             "pamir.features.images": set()}
    assert _upwards(graph, layers) == (["pamir.features.images"],
                                       {("pamir.text.query", "pamir.facts.fact")})


def test_no_import_goes_up_a_layer():
    """Each module imports only from its own layer and those below it, per the drawing in
    docs/architecture.md, a row per package (function-level imports too); every module sits
    in a layer. The text package (the query language) sits below the facts it filters on, and
    the index below the duplicates that work over it."""
    layers, modules = _layers(), _modules()
    assert (layers["commands"] > layers["jobs"] > layers["duplicates"] > layers["index"]
            > layers["facts"] > layers["features"] > layers["text"] > layers["config"])
    graph = {m: _imported(m, p, modules) for m, p in modules.items()
             if m != "pamir"}  # the facade: names imported on first use
    unplaced, upwards = _upwards(graph, layers)
    assert unplaced == [], "add these to the drawing under '## Layers' in docs/architecture.md"
    assert sorted(upwards - UPWARDS.keys()) == []
    assert sorted(UPWARDS.keys() - upwards) == [], "these go up no more: take them off UPWARDS"


def test_architecture_names_every_command_module():
    """docs/architecture.md's row "a command of the tool" names each module cli.COMMANDS
    mounts (it once named 8 of 10)."""
    tree = ast.parse((PAMIR / "cli.py").read_text(encoding="utf-8"))
    [mounted] = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", "") == "COMMANDS"]
    row = next(line for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines()
               if line.startswith("| a command of the tool |"))
    names = sorted({module.rpartition(".")[2] for module, _ in mounted.values()})
    assert len(names) >= 10 and [n for n in names if f"`{n}.py`" not in row] == []


def _unexplained_imports(path: Path) -> list[int]:
    """The lines of the imports inside functions of `path` that give no reason: no comment
    beside them beyond a `noqa`, nor above the block of imports they sit in."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []

    def said(line: str) -> bool:
        return bool(re.sub(r"noqa(: [A-Z]+\d+(, [A-Z]+\d+)*)?", "", line.partition("#")[2])
                    .strip(" -:()"))

    def visit(node, inside: bool):
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                if not said(lines[child.end_lineno - 1]):
                    i = child.lineno - 1
                    indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
                    while (i > 0 and lines[i - 1].startswith(indent)
                           and lines[i - 1][len(indent):].startswith(("import ", "from "))):
                        i -= 1
                    if not lines[i - 1].strip().startswith("#"):
                        found.append(child.lineno)
            visit(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse("\n".join(lines)), False)
    return found


def test_imports_inside_functions_say_why():
    """An import sits inside a function only where start-up time, an optional extra or a cycle
    at import needs it, and a comment beside it (or above its block) says which
    (docs/architecture.md, "Where an import goes")."""
    unsaid = {module: lines for module, path in _modules().items()
              if (lines := _unexplained_imports(path))}
    assert unsaid == {}, "hoist these to the module's top, or say why they cannot be"
