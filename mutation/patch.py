"""Putting a mutant into a live, already imported module (inside a forked child, so nothing needs undoing).

The mutated module is executed into a fresh namespace; then the live module takes over what differs:

* every function (and every method of every class, nested classes included) gets the new function's code,
  defaults and keyword defaults (``__code__``/``__defaults__``/``__kwdefaults__``), so every reference to it,
  held by any module or test, runs the mutant;
* class attributes that are plain values take the new value (dataclass field defaults live in the generated
  ``__init__``'s defaults, which the method patch covers), and attributes the new class lacks are removed (a
  dataclass that is no longer frozen loses its ``__setattr__``);
* any other module-level value that is no longer equal (``LOGGED_OUT_MARKERS``, ``MAX_POLL_INTERVAL``, a regex)
  is rebound in the live module and in every module of the repository that holds the same object under the same
  name (``from ...classify import LOGGED_OUT_MARKERS``).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from types import CodeType, FunctionType, ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

#: Module names whose attributes may be rebound (the package and the tests, which pytest imports as
#: ``unit.core.<...>.test_<module>`` and ``integration.<...>``; not the standard library).
_REBIND_PREFIXES = ("airflow_provider_brev", "unit.", "integration.", "test_", "conftest", "helpers", "fixtures_s3")


def _patch_function(live: FunctionType, new: FunctionType) -> None:
    if live.__code__ is not new.__code__:
        live.__code__ = new.__code__
    live.__defaults__ = new.__defaults__
    live.__kwdefaults__ = new.__kwdefaults__


def _function_of(value: Any) -> FunctionType | None:
    if isinstance(value, FunctionType):
        return value
    if isinstance(value, staticmethod | classmethod):
        inner = value.__func__
        return inner if isinstance(inner, FunctionType) else None
    return None


def _patch_class(live: type, new: type, seen: set[int]) -> None:
    if id(live) in seen:
        return
    seen.add(id(live))
    for name in [n for n in vars(live) if n not in vars(new) and n not in ("__dict__", "__weakref__")]:
        with contextlib.suppress(AttributeError, TypeError):  # e.g. a frozen dataclass's __setattr__ is gone
            delattr(live, name)
    for name, value in vars(new).items():
        if name in ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__"):
            continue
        current = vars(live).get(name)
        new_function, live_function = _function_of(value), _function_of(current)
        if new_function is not None and live_function is not None:
            with contextlib.suppress(ValueError):
                _patch_function(live_function, new_function)
            continue
        if isinstance(value, property) and isinstance(current, property):
            for part in ("fget", "fset", "fdel"):
                a, b = getattr(current, part), getattr(value, part)
                if isinstance(a, FunctionType) and isinstance(b, FunctionType):
                    _patch_function(a, b)
            continue
        if isinstance(value, type) and isinstance(current, type):
            _patch_class(current, value, seen)
            continue
        if _is_plain(value) and not _equal(current, value):
            with contextlib.suppress(AttributeError, TypeError):
                setattr(live, name, value)


def _is_plain(value: Any) -> bool:
    return not isinstance(value, FunctionType | type | ModuleType | property | staticmethod | classmethod)


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return False


def apply_mutant(module_name: str, code: CodeType, extra_modules: Iterable[ModuleType] = ()) -> None:
    """Make the live module ``module_name`` behave as the mutated ``code`` (see the module docstring).

    :param extra_modules: more modules whose names may be rebound (pytest's conftest modules, which are not in
        ``sys.modules`` under a name of their own).
    """
    live = sys.modules.get(module_name) or importlib.import_module(module_name)  # not imported by any test yet
    namespace: dict[str, Any] = {
        "__name__": module_name,
        "__file__": live.__file__,
        "__package__": live.__package__,
        "__spec__": live.__spec__,
        "__builtins__": live.__dict__["__builtins__"],
    }
    exec(code, namespace)
    seen: set[int] = set()
    rebound: dict[str, tuple[Any, Any]] = {}
    for name, new in namespace.items():
        if name.startswith("__") and name.endswith("__"):
            continue
        old = live.__dict__.get(name)
        if isinstance(old, FunctionType) and isinstance(new, FunctionType):
            if old.__module__ == module_name:
                with contextlib.suppress(ValueError):
                    _patch_function(old, new)
            continue
        if isinstance(old, type) and isinstance(new, type):
            if old.__module__ == module_name:
                _patch_class(old, new, seen)
            continue
        if isinstance(new, ModuleType) or name not in live.__dict__ or _equal(old, new):
            continue
        rebound[name] = (old, new)
        live.__dict__[name] = new
    if not rebound:
        return
    others = [m for n, m in list(sys.modules.items()) if n.startswith(_REBIND_PREFIXES)] + list(extra_modules)
    for other in others:
        if other is live or other is None:
            continue
        values = getattr(other, "__dict__", {})
        for name, (old, new) in rebound.items():
            if values.get(name) is old:
                values[name] = new
