"""The public surface: what ``import fabric_memory`` offers, and the error dialect."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import fabric_memory
from fabric_memory import compaction, errors
from fabric_memory.errors import ExpandError, FabricMemoryError, clipped

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_every_public_name_resolves_from_its_home() -> None:
    """Each name of __all__ loads from the module _HOMES names, and nothing else is listed."""
    for package in (fabric_memory, compaction):
        listed = {name for name in package.__all__ if name != "__version__"}
        assert listed == {name for names in package._HOMES.values() for name in names}
        for name in listed:
            assert getattr(package, name) is not None, name
        with pytest.raises(AttributeError, match="no attribute 'nothing'"):
            package.nothing  # noqa: B018
    assert fabric_memory.__all__ == sorted(fabric_memory.__all__)


def test_settings_and_catchable_errors_are_public() -> None:
    """A caller can build CompactionSettings and catch every error class without private
    imports; each error class is under FabricMemoryError."""
    settings = fabric_memory.CompactionSettings(reserve_tokens=63, keep_recent_tokens=1)
    assert settings.keep_recent_tokens == 1
    public_errors = [getattr(fabric_memory, n) for n in fabric_memory._HOMES[".errors"]]
    assert all(issubclass(cls, FabricMemoryError) for cls in public_errors)
    raised = {name for name, value in vars(errors).items()
              if isinstance(value, type) and issubclass(value, FabricMemoryError)}
    assert raised - set(fabric_memory.__all__) <= {"CertificationError", "TaskPayloadError"}


def test_version_comes_from_package_metadata() -> None:
    """__version__ is the installed distribution's version, not a second copy."""
    assert fabric_memory.__version__ == metadata.version("fabric-memory")


def test_importing_the_package_loads_no_engine() -> None:
    """import fabric_memory loads neither Tantivy nor the compactor until a name is used."""
    code = ("import sys, fabric_memory; print('tantivy' in sys.modules, "
            "'fabric_memory.compaction' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "False"]


def test_the_hook_loads_only_what_it_runs() -> None:
    """``fabric-memory hook`` starts a process per compaction, so its imports are its start
    time: a host hands it Pi's preparation, so it loads neither the session reader nor
    the preparation rules (nor Tantivy), and no secret pattern is compiled until a text
    holds one of its signatures."""
    code = ("import sys, fabric_memory.compaction.hook, fabric_memory.redact as r; "
            "print(sorted(sys.modules)); print(r._compiled.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    modules, compiled = eval(out[0]), int(out[1])
    assert "fabric_memory.compaction.compactor" in modules
    unneeded = ("tantivy", "fabric_memory.session", "fabric_memory.compaction.prepare",
                "fabric_memory.compaction.files", "fabric_memory.memory", "argparse")
    assert [m for m in modules if m.startswith(unneeded)] == []
    assert compiled == 0


def test_reading_a_claude_code_file_loads_only_the_readers_tried() -> None:
    """The prompt hook starts a process per prompt: reading its Claude Code transcript loads
    the readers tried before Claude Code's (Qwen's and the tables it borrows) and Claude
    Code's, never the other agents' (Aider's, the database readers, …)."""
    code = ("import sys, fabric_memory.prompt_context, fabric_memory.memory.recall; "
            "from fabric_memory.sources import read_source; "
            f"read_source({str(FIXTURES / 'handoff' / 'entire-two-compactions.jsonl')!r}); "
            "print(sorted(m for m in sys.modules if m.startswith('fabric_memory.sources.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    loaded = {name.rpartition(".")[2] for name in eval(out)}
    assert {"qwen", "claude_code"} <= loaded
    assert loaded <= {"reader", "registry", "tools", "qwen", "gemini", "pi", "claude_code"}


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("other", '"other"'),
        (12, "12"),
        (True, "true"),
        (None, "null"),
        ([1, [2]], "an array of 2"),
        ({"a": {"b": 1}}, "an object with 1 key"),
        ("\ud800", '"\\ud800"'),
        (2**70, str(2**70)),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_values_are_shown_json_quoted_never_as_a_container_repr(value: object, shown: str) -> None:
    """Error messages show scalars as JSON and containers by their kind, never a repr."""
    assert clipped(value) == shown


def test_a_huge_value_is_clipped_with_its_length() -> None:
    """A 100 KB string is shown cut, with its full length named."""
    text = clipped("x" * 100_000)
    assert len(text) < 100 and "100002 characters" in text


def test_expand_exit_statuses_are_explicit() -> None:
    """Each expand error code has its own fixed exit status (docs/errors.md#expand)."""
    assert ExpandError.EXIT_STATUS == {
        "stale_pointer": 10, "index_out_of_bounds": 11, "session_not_found": 12,
        "source_unavailable": 13, "address_not_found": 14, "ambiguous_address": 15,
        "ambiguous_session": 16, "text_offset_out_of_bounds": 17, "session_forgotten": 18,
    }
    assert set(ExpandError.CODES) == set(ExpandError.EXIT_STATUS)


def _import_graph() -> dict[str, set[str]]:
    """Every fabric_memory module and the fabric_memory modules it imports anywhere in its
    text (top level, under TYPE_CHECKING or inside a function)."""
    import ast
    from pathlib import Path

    root = Path(fabric_memory.__file__).parent
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                deps.update(c for c in [target, *(f"{target}.{a.name}" for a in node.names)]
                            if c in modules)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in modules)
        graph[name] = deps - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for dep in sorted(graph[node]):
            if dep not in order:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], order[dep])
        if low[node] == order[node]:
            group = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    """The package's import graph has no circle, type-checking and lazy imports included."""
    graph = _import_graph()
    assert {"fabric_memory.compaction.render", "fabric_memory.cli"} <= set(graph)
    assert "fabric_memory.compaction.details" in graph["fabric_memory.compaction.render"]
    assert _circles(graph) == []


def test_the_circle_check_finds_a_circle() -> None:
    """A graph with a two-module loop (as details and render once were) is reported."""
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": set()}
    assert _circles(graph) == [["a", "b"]]
