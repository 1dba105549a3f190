"""The measured children import the same Conveyor as the suite process that starts them."""

from __future__ import annotations

import os
import sys
import types

from bench import harness


def test_children_import_the_library_the_suite_imports(monkeypatch, tmp_path):
    # compare --suite head: the head's suite (this repo) drives a base library installed elsewhere
    installed = tmp_path / "site-packages"
    (installed / "conveyor").mkdir(parents=True)
    fake = types.ModuleType("conveyor")
    fake.__file__ = str(installed / "conveyor" / "__init__.py")
    monkeypatch.setitem(sys.modules, "conveyor", fake)
    monkeypatch.delenv("PYTHONPATH", raising=False)

    paths = harness.child_env()["PYTHONPATH"].split(os.pathsep)

    assert str(installed) in paths
    assert str(harness.REPO_ROOT / "queue") not in paths


def test_children_of_a_normal_run_use_the_repo_library():
    assert harness.library_path() == harness.REPO_ROOT / "queue"
