#!/usr/bin/env python3
"""Prints the shape of src/omenative: the largest modules, classes and functions (by lines), and the import graph
between its packages (read with grimp, the library import-linter is built on).

    .venv/bin/python hack/code-shape.py [--top N] [--src DIR]

Used for the before/after figures of a reshape; it reads the source, it does not import it.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path


def _defs(tree: ast.AST, module: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    classes: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                size = (child.end_lineno or child.lineno) - child.lineno + 1
                classes.append((size, f"{prefix}{child.name}"))
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = (child.end_lineno or child.lineno) - child.lineno + 1
                functions.append((size, f"{prefix}{child.name}"))
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(tree, f"{module}:")
    return classes, functions


def _package_of(module: str, root: str) -> str:
    """omenative.controllers.instance.plan -> controllers.instance; omenative.kube.apply -> kube."""
    parts = module.split(".")[1:]
    if not parts:
        return root
    if parts[0] in ("controllers", "kubectl_ome") and len(parts) > 2:
        return ".".join(parts[:2])
    if len(parts) == 1:
        return parts[0]
    return parts[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--src", default=str(Path(__file__).resolve().parent.parent / "src"))
    args = parser.parse_args()
    src = Path(args.src)
    modules: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []
    total = 0
    for path in sorted((src / "omenative").rglob("*.py")):
        text = path.read_text()
        lines = text.count("\n")
        total += lines
        module = ".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
        modules.append((lines, module))
        c, f = _defs(ast.parse(text), module.removeprefix("omenative."))
        classes += c
        functions += f
    print(f"src/omenative: {total} lines in {len(modules)} modules, {len(classes)} classes, {len(functions)} functions;"
          f" {sum(1 for s, _ in functions if s > 50)} functions over 50 lines")
    for title, rows in (("modules", modules), ("classes", classes), ("functions", functions)):
        print(f"\nlargest {title} (lines)")
        for size, name in sorted(rows, reverse=True)[: args.top]:
            print(f"  {size:5d}  {name}")

    sys.path.insert(0, str(src))
    import grimp

    graph = grimp.build_graph("omenative")
    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = _package_of(module, "omenative"), _package_of(imported, "omenative")
            if a != b:
                edges[a].add(b)
    print("\nimport graph between packages (grimp; A -> what A imports)")
    for package in sorted(edges):
        print(f"  {package} -> {', '.join(sorted(edges[package]))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
