"""The examples use the public API only: no import of a private module (a name starting with "_")
of mindspore_bn_grad, and only names the public packages list in __all__."""
import ast
import importlib
import pathlib

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[2] / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_imports_public_names_only(path):
    tree = ast.parse(path.read_text())
    found = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mindspore_bn_grad"):
            found += 1
            parts = node.module.split(".")
            assert not any(p.startswith("_") for p in parts), f"{path.name}: imports {node.module}"
            public = getattr(importlib.import_module(node.module), "__all__", None)
            for alias in node.names:
                assert not alias.name.startswith("_"), f"{path.name}: imports {alias.name}"
                if public is not None:
                    assert alias.name in public, f"{path.name}: {alias.name} is not in {node.module}.__all__"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert not any(p.startswith("_") for p in alias.name.split(".")
                               if alias.name.startswith("mindspore_bn_grad")), f"{path.name}: {alias.name}"
    assert found, f"{path.name} does not use mindspore_bn_grad at all"
