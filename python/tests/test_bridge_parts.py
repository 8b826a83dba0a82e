"""The bridge's parts (vqcheck._bridge, a package): how it patches and
undoes, how vqcheck.torch.step() reaches it without importing it, and which
part may import which (the layering, as a rule that fails when broken)."""
import ast
import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import vqcheck
from vqcheck._bridge import _patching

HERE = Path(__file__).resolve().parent
BRIDGE = HERE.parents[1] / "python" / "bridge"
PACKAGE = Path(vqcheck.__file__).resolve().parent


@pytest.fixture
def own_undo_list(monkeypatch):
    """patch()'s undo list and wrapper table for this test alone: its
    unpatch_all() undoes only what the test patched."""
    monkeypatch.setattr(_patching, "_undo", [])
    monkeypatch.setattr(_patching, "_wrappers", {})


def test_patch_keeps_metadata_marks_once_and_undoes(own_undo_list):
    asked = []
    module = types.ModuleType("fake_torch_module")

    def all_reduce(tensor, op=None, group=None, async_op=False):
        """The original's docstring."""
        return ("original", tensor)

    def module_getattr(name):  # PEP 562: must never see the bridge
        asked.append(name)
        raise AttributeError(name)
    module.all_reduce = all_reduce
    module.__getattr__ = module_getattr
    alias = types.ModuleType("fake_alias")
    alias.all_reduce = all_reduce

    calls = []

    def make(original):
        def wrapper(*args, **kwargs):
            calls.append(args)
            return original(*args, **kwargs)
        return wrapper
    wrapper = _patching.patch(module, "all_reduce", make)
    assert module.all_reduce is wrapper
    assert wrapper.__name__ == "all_reduce"
    assert wrapper.__doc__ == "The original's docstring."
    assert wrapper.__wrapped__ is all_reduce
    assert inspect.signature(wrapper) == inspect.signature(all_reduce)
    assert _patching.is_ours(wrapper) and not _patching.is_ours(all_reduce)
    assert wrapper(1) == ("original", 1) and calls == [(1,)]
    # marked: not wrapped again; the same function under the same name in
    # another module gets the same wrapper
    assert _patching.patch(module, "all_reduce", make) is None
    assert _patching.patch(alias, "all_reduce", make) is wrapper
    # a name the module lacks: nothing patched, its __getattr__ never asked
    assert _patching.patch(module, "barrier", make) is None
    assert asked == []

    class Base:
        def step(self):
            return "base"

    class Derived(Base):
        pass
    _patching.patch(Derived, "step", make)
    assert Derived().step() == "base" and "step" in vars(Derived)

    _patching.unpatch_all()
    assert module.all_reduce is all_reduce and alias.all_reduce is all_reduce
    assert "step" not in vars(Derived) and Derived.step is Base.step
    assert _patching.patch(module, "all_reduce", make) is not None  # again
    _patching.unpatch_all()


def test_the_import_hook_is_undone(own_undo_list):
    before = list(sys.meta_path)
    _patching.hook_imports(("no_such_module_here",), lambda name: None)
    assert len(sys.meta_path) == len(before) + 1
    _patching.unpatch_all()
    assert sys.meta_path == before


def test_torch_step_reaches_the_bridge_only_through_its_hook():
    """vqcheck.torch.step() runs the step-end hooks and imports no bridge;
    nothing is registered outside `vqcheck watch`."""
    code = ("import sys, vqcheck.torch, vqcheck._hooks as h\n"
            "vqcheck.torch.step()\n"
            "calls = []\n"
            "h.on_step_end(lambda: calls.append(1))\n"
            "vqcheck.torch.step(); vqcheck.torch.step()\n"
            "print('vqcheck._bridge' in sys.modules, calls)\n")
    env = dict(os.environ)
    env.pop("VQC_WATCH_DIR", None)
    env.pop("PYTHONPATH", None)
    p = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False [1, 1]", p.stdout


def test_torch_step_ends_a_step_under_the_bridge(tmp_path):
    """A program without an optimizer under the bridge: each
    vqcheck.torch.step() ends a step (its digests and its live line)."""
    code = ("import torch, vqcheck.torch\n"
            "torch.manual_seed(0)\n"
            "m = torch.nn.Linear(2, 2)\n"
            "for _ in range(3):\n"
            "    with torch.no_grad():\n"
            "        m.weight.add_(1.0)\n"
            "    vqcheck.torch.step()\n")
    env = dict(os.environ, VQC_WATCH_DIR=str(tmp_path), PYTHONPATH=str(BRIDGE),
               RANK="0", WORLD_SIZE="1")
    p = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    trace = [json.loads(line) for line in
             (tmp_path / "rank-0.trace.jsonl").read_text().splitlines()]
    assert [(t["step"], t["tensor"]) for t in trace] == [
        (s, n) for s in range(3)
        for n in ("Linear.weight", "Linear.bias", "Linear.modules.training")]
    assert len({t["digest"] for t in trace
                if t["tensor"] == "Linear.weight"}) == 3
    live = [json.loads(line) for line in
            (tmp_path / "rank-0.live.jsonl").read_text().splitlines()]
    assert [e["step"] for e in live if e.get("event") == "step"] == [0, 1, 2]
    assert live[-1]["event"] == "finished" and live[-1]["status"] == "VQC_OK"


# Which modules each part of the bridge may import (relative imports of
# the vqcheck package): the bottom ones none of the others, no part the
# package's __init__ (the wiring), and vqcheck.torch never the bridge.
ALLOWED = {
    "_bridge/_records.py": {"_core", "_heartbeat", "_text", "_trace"},
    "_bridge/_patching.py": set(),
    "_bridge/_sites.py": {"_bridge._patching"},
    "_bridge/_overlap.py": {"_digest"},
    "_bridge/_lost.py": {"_bridge._patching", "_bridge._records",
                         "_bridge._sites"},
    "_bridge/_collectives.py": {"_heartbeat", "_text", "_bridge._lost",
                                "_bridge._overlap", "_bridge._patching",
                                "_bridge._records", "_bridge._sites"},
    "_bridge/_state.py": {"_heartbeat", "_bridge._overlap",
                          "_bridge._patching", "_bridge._records", "torch"},
    "_hooks.py": set(),
    "torch.py": {"_hooks", "_layout", "_dense", "_digest", "_trace"},
    "_dense.py": {"_core", "_digest"},
    "_trace.py": {"_text"},
    "_text.py": set(),
}


def _package_imports(path):
    """The vqcheck modules a file imports (relative imports, as dotted
    names under vqcheck: "_bridge._records", "_digest")."""
    inside = path.parent.relative_to(PACKAGE).parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = list(inside[:len(inside) - (node.level - 1)])
        if node.module:
            found.add(".".join(base + node.module.split(".")))
        else:  # from . import x, y
            found.update(".".join(base + [a.name]) for a in node.names)
    return found


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_bridge_layers(name):
    path = PACKAGE / name
    assert path.is_file(), f"{path} is not installed"
    extra = _package_imports(path) - ALLOWED[name]
    assert not extra, f"{name} imports {sorted(extra)}"


def test_every_bridge_part_is_installed_and_listed():
    parts = {f"_bridge/{p.name}" for p in (PACKAGE / "_bridge").glob("*.py")}
    assert parts - {"_bridge/__init__.py"} == \
        {n for n in ALLOWED if n.startswith("_bridge/")}


def test_an_optimizers_step_hook_is_undone(own_undo_list, monkeypatch):
    """The bridge's hook on an optimizer's step (an instance attribute) is
    taken off by unpatch_all; one an LR scheduler put over it since stays."""
    torch = pytest.importorskip("torch")
    from vqcheck._bridge._state import StateCheck
    monkeypatch.setattr(_patching, "_instance_undo", [])
    p = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.SGD([p], lr=0.1)
    assert "step" not in vars(opt)
    ends = []
    state = StateCheck.__new__(StateCheck)
    state.overlap = types.SimpleNamespace(pending=None)
    state.step_depth = types.SimpleNamespace()
    state.step_end = lambda: ends.append(1)
    state.hook_step(opt)
    assert "step" in vars(opt)
    opt.step()
    assert ends == [1]
    _patching.unpatch_all()
    assert "step" not in vars(opt)
    opt.step()
    assert ends == [1]
    # a scheduler's wrapper installed after the hook is left alone
    state.hook_step(opt)
    theirs = types.MethodType(lambda self: "scheduler's", opt)
    opt.step = theirs
    _patching.unpatch_all()
    assert vars(opt)["step"] is theirs
