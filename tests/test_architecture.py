"""ARCHITECTURE.md's table of what each folder may import is the code's: every import of one of
autoloader's folders (or top-level modules) from another is one the table allows."""

from __future__ import annotations

import ast
import os
import re

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
ROOT = os.path.join(REPO, "autoloader")


def _allowed() -> dict[str, set[str]]:
    """The table: folder (or top-level module, without .py) -> what it may import."""
    text = open(os.path.join(REPO, "ARCHITECTURE.md"), encoding="utf-8").read()
    table = text.split("## What each folder may import", 1)[1].split("\n## ", 1)[0]
    allowed = {}
    for row in re.findall(r"^\| (`[^|]+`) \| ([^|]+) \|$", table, re.M):
        names = [n.strip("`/").removesuffix(".py") for n in re.findall(r"`[^`]+`", row[0])]
        may = set() if row[1].startswith("nothing") else {
            w for w in re.findall(r"\b([a-z]+)\b", row[1].split("(")[0]) if w not in ("any", "folder")}
        for name in names:
            allowed[name] = {"*"} if row[1].startswith("any") else may
    return allowed


def _imports():
    """(the importing unit, the unit it imports) for every relative import in autoloader/."""
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
            unit = parts[0] if len(parts) > 1 else parts[0]
            package = parts[:-1]   # the file's package below autoloader
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.ImportFrom) and node.level:
                    base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                    target = base + (node.module.split(".") if node.module else [])
                    if not target:   # ``from . import x`` at the top: x is the unit
                        target = [alias.name for alias in node.names][:1]
                    yield os.path.relpath(path, REPO), unit, target[0]


def test_every_import_across_folders_is_one_architecture_md_allows():
    allowed = _allowed()
    assert {"search", "probe", "store", "tuning", "api", "errors"} <= set(allowed), sorted(allowed)
    wrong = set()
    for where, unit, target in _imports():
        if target == unit or unit not in allowed:
            continue
        may = allowed[unit]
        if "*" not in may and target not in may:
            wrong.add(f"{where} imports {target}")
    units = {p[:-3] if p.endswith(".py") else p for p in os.listdir(ROOT)
             if not p.startswith("_") and (p.endswith(".py") or os.path.isdir(os.path.join(ROOT, p)))} - {"__pycache__"}
    assert units <= set(allowed), f"not in ARCHITECTURE.md's table: {sorted(units - set(allowed))}"
    assert not wrong, sorted(wrong)
