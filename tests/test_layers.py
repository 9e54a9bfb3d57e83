"""The layer rule of STYLE.md, enforced: every module imports only its own layer or those below."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "chatcli"

# Lower number = lower layer. Modules of one layer may import each other, except front ends.
LAYERS = {
    "core": 0,
    "config": 1,
    "store": 2,
    "providers": 2,
    "engine": 3,
    "commands": 4,
    "render": 5,
    "cli": 6,
    "repl": 6,
    "mcp": 6,
    "acp": 6,
    "gateway": 6,
    "main": 7,
    "__main__": 8,
    "__init__": -1,  # chatcli/__init__.py holds only the version; anyone may read it
}
FRONT_ENDS = {"cli", "repl", "mcp", "acp", "gateway"}
# Peers that must not import each other even though they share a level.
PEERS = {("store", "providers"), ("providers", "store")} | {(a, b) for a in FRONT_ENDS for b in FRONT_ENDS if a != b}
# Heavy libraries that may be imported only inside functions (never at module import time).
HEAVY = {"openai", "anthropic", "mcp", "acp", "llama_cpp", "httpx"}


def _layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1].removesuffix(".py") if len(parts) > 1 else "__init__"


def _modules():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        yield ".".join(rel.parts).removesuffix(".__init__"), path


def _imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node, node.module


def layer_violations(module: str, path: Path) -> list[str]:
    own = _layer_of(module)
    if own not in LAYERS:
        return [f"{module}: package '{own}' is not placed in a layer"]
    found = []
    for node, target in _imports(path):
        if not target.startswith("chatcli.") and target != "chatcli":
            continue
        other = _layer_of(target)
        if other == "__init__" or other == own:
            continue
        if (own, other) in PEERS:
            found.append(f"{module} imports its peer {target} (line {node.lineno})")
        elif LAYERS[other] > LAYERS[own]:
            found.append(f"{module} imports upward: {target} (line {node.lineno})")
    return found


@pytest.mark.parametrize("module,path", list(_modules()), ids=lambda v: str(v) if isinstance(v, str) else "")
def test_module_imports_only_downward(module: str, path: Path) -> None:
    assert layer_violations(module, path) == []


@pytest.mark.parametrize("module,path", list(_modules()), ids=lambda v: str(v) if isinstance(v, str) else "")
def test_heavy_libraries_are_not_imported_at_module_level(module: str, path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:  # module level statements only
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] not in HEAVY, f"{module} imports {name} at import time"


def test_the_layer_check_catches_upward_and_peer_imports(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from chatcli.repl.app import run_repl\nimport chatcli.engine\n")
    assert len(layer_violations("chatcli.engine.bad", bad)) == 1
    assert len(layer_violations("chatcli.cli.bad", bad)) == 1
    assert layer_violations("chatcli.main", bad) == []


# The layout under CHATCLI_HOME: directory names joined onto a path, and the suffixes and names
# of the files chatcli keeps there.
_LAYOUT = re.compile(r"""/\s*["'](?:sessions|transcripts|ccr|index|logs)["']"""
                     r"""|join\([^)]*["'](?:sessions|transcripts|ccr|index|logs)["']"""
                     r"""|["']\.(?:jsonl|lock|sqlite)["']|key-check|search\.sqlite|sealed\.sqlite"""
                     r"""|\.catalog\.(?:json|log)|\.latest\.json|\.listing\.txt""")
# The prompt history's lock sits beside HISTORY_FILE, outside CHATCLI_HOME.
_LAYOUT_ELSEWHERE = {"chatcli.store.history": "'.lock'"}
# The readers of `chatcli import` spell other tools' layouts (Codex's `sessions/`, Gemini CLI's
# `.jsonl`), not chatcli's; but another ChatCLI home is read through store/home's own names.
_OTHER_TOOLS = "chatcli.store.sources."


def test_the_storage_layout_is_spelled_in_store_home_only():
    spelled = []
    for module, path in _modules():
        if module == "chatcli.store.home" or (module.startswith(_OTHER_TOOLS) and module != _OTHER_TOOLS + "chatcli"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found = _LAYOUT.search(line)
            if found and found.group(0).strip("\"'") not in _LAYOUT_ELSEWHERE.get(module, "").strip("\"'"):
                spelled.append(f"{module}:{number}: {line.strip()}")
    assert spelled == []
