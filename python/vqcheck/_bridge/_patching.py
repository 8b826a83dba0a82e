"""How the bridge hooks into a program, and how that is undone.

- hook_imports(names, on_import): torch is hooked right after the program
  imports it, not before (importing it at start-up would change when its
  import-time settings are read): a finder first on sys.meta_path finds
  the modules `names` the normal way and wraps their loaders, so that
  on_import(name) runs once each module's import has run, before the
  importer binds any of its names.
- patch(owner, name, make): the one way the bridge replaces a function:
  the wrapper make(original) returns keeps the original's name, signature
  and docstring (functools.update_wrapper, which also sets __wrapped__),
  carries the mark `_vqcheck` (a function already marked is not wrapped
  again), and goes on an undo list; unpatch_all() puts every original
  back (tests), and the instance attributes noted by remember_instance
  (an optimizer's step) too.

Marks and attributes are read from __dict__, never through getattr on an
object that may define __getattr__: a module's __getattr__ (PEP 562, or an
nn.Module's) would see the bridge's look-ups, may import or forward, and
FSDP1's constructor raised RecursionError on one (`_vqcheck_seen`, in
_state.py, is read the same way). This module imports none of the
bridge's other parts.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import sys
import types
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

MARK = "_vqcheck"

# (owner, name, whether owner held name itself, what it held): undone in
# reverse order by unpatch_all.
_undo: List[Tuple[Any, str, bool, Any]] = []
# (id(original), name) -> (original, its wrapper): one function reached
# under the same name through two modules (torch.distributed.all_reduce
# and torch.distributed.distributed_c10d.all_reduce, torch.distributed.nn
# and its .functional) gets one wrapper; the original is kept, so its id
# is never reused.
_wrappers: Dict[Tuple[int, str], Tuple[Any, Any]] = {}
_finders: List[Any] = []
# (weakref to an object, name, whether it held name itself, what it held,
# what the bridge put there): an instance attribute the bridge set (an
# optimizer's step), undone by unpatch_all while the object lives and
# still holds the bridge's value (an LR scheduler that wrapped it since
# keeps its wrapper). Weak: an optimizer is not kept alive for this.
_instance_undo: List[Tuple[Any, str, bool, Any, Any]] = []


def own_attribute(obj: Any, name: str, default: Any = None) -> Any:
    """obj's own attribute `name` from its __dict__ (default without one),
    without getattr: no __getattr__ runs, no descriptor."""
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return default
    return d.get(name, default)


def is_ours(value: Any) -> bool:
    """Whether value is one of the bridge's wrappers (marked by patch)."""
    return bool(own_attribute(value, MARK, False))


def lookup(owner: Any, name: str) -> Any:
    """What patch(owner, name, ...) would wrap: a module's own attribute
    (from its __dict__: a module-level __getattr__ is never asked), a
    class's attribute as getattr finds it (inherited ones too); None
    without one."""
    if isinstance(owner, types.ModuleType):
        return own_attribute(owner, name)
    return getattr(owner, name, None)


def patch(owner: Any, name: str,
          make: Callable[[Any], Callable[..., Any]]) -> Optional[Any]:
    """Replaces owner.name (a function of a module, a method of a class)
    with make(original), given the original's metadata and the bridge's
    mark, and remembers how to undo it. Nothing (None) when owner has no
    callable `name` or it is the bridge's already; returns the wrapper."""
    original = lookup(owner, name)
    if original is None or not callable(original) or is_ours(original):
        return None
    known = _wrappers.get((id(original), name))
    if known is not None and known[0] is original:
        wrapper = known[1]
    else:
        wrapper = make(original)
        functools.update_wrapper(wrapper, original)
        wrapper.__dict__[MARK] = True  # after the original's __dict__
        _wrappers[(id(original), name)] = (original, wrapper)
    held = vars(owner)
    _undo.append((owner, name, name in held, held.get(name)))
    setattr(owner, name, wrapper)
    return wrapper


def remember_instance(obj: Any, name: str, had: bool, held: Any,
                      installed: Any) -> None:
    """Notes that the bridge set obj.name (in obj's __dict__) to
    `installed` where obj held `held` itself (had) or nothing, for
    unpatch_all to put back."""
    _instance_undo.append((weakref.ref(obj), name, had, held, installed))


def unpatch_all() -> None:
    """Puts back everything patch() replaced (the latest first) and takes
    the import finder off sys.meta_path. A wrapper the program kept a
    reference to still runs, as the original would have been called."""
    while _instance_undo:
        ref, name, had, held, installed = _instance_undo.pop()
        obj = ref()
        if obj is None or own_attribute(obj, name) is not installed:
            continue
        d = object.__getattribute__(obj, "__dict__")
        if had:
            d[name] = held
        else:
            d.pop(name, None)
    while _undo:
        owner, name, had, value = _undo.pop()
        if had:
            setattr(owner, name, value)
        else:
            try:
                delattr(owner, name)
            except AttributeError:
                pass
    _wrappers.clear()
    while _finders:
        finder = _finders.pop()
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)


# ---- modules hooked as they are imported


def hook_imports(names: Tuple[str, ...],
                 on_import: Callable[[str], None]) -> None:
    """on_import(name) after each of the modules `names` is imported from
    now on (see the module comment)."""
    finder = _ImportHook(names, on_import)
    sys.meta_path.insert(0, finder)
    _finders.append(finder)


class _ImportHook(importlib.abc.MetaPathFinder):
    """Finds the modules it watches the normal way and wraps their loaders
    (_PatchingLoader)."""

    def __init__(self, names: Tuple[str, ...],
                 on_import: Callable[[str], None]) -> None:
        self._names = names
        self._on_import = on_import
        self._busy = False

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self._names or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, name, self._on_import)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: Any, name: str,
                 on_import: Callable[[str], None]) -> None:
        self._inner, self._name, self._on_import = inner, name, on_import

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        self._on_import(self._name)
