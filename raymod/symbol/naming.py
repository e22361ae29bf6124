"""MXNet's naming and attribute scopes: ``rm.name.Prefix``, ``rm.name.NameManager``, ``rm.AttrScope``."""
from __future__ import annotations

import threading
from typing import Any

_local = threading.local()

# Attributes MXNet stores as ``__key__`` and copies to the variables an op creates for itself.
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage",
               "profiler_scope")


def hidden_key(key: str) -> str:
    """``lr_mult`` -> ``__lr_mult__``; other keys are unchanged."""
    return f"__{key}__" if key in HIDDEN_KEYS else key


class NameManager:
    """Gives unnamed symbols MXNet's automatic names: ``<hint><count>`` (``fullyconnected0``).

    Use as a context manager to scope the counters.
    """

    def __init__(self):
        self._counter: dict[str, int] = {}
        self._old: NameManager | None = None

    def get(self, name: str | None, hint: str) -> str:
        """``name`` if given, else the next automatic name for ``hint``."""
        if name:
            return name
        count = self._counter.get(hint, 0)
        self._counter[hint] = count + 1
        return f"{hint}{count}"

    def __enter__(self) -> "NameManager":
        self._old = current()
        _local.name_manager = self
        return self

    def __exit__(self, *exc) -> None:
        _local.name_manager = self._old


class Prefix(NameManager):
    """A name manager that puts ``prefix`` before every name, given or automatic."""

    def __init__(self, prefix: str):
        super().__init__()
        self._prefix = prefix

    def get(self, name: str | None, hint: str) -> str:
        return self._prefix + super().get(name, hint)


def current() -> NameManager:
    """The innermost active name manager (a process-wide default otherwise)."""
    manager = getattr(_local, "name_manager", None)
    if manager is None:
        manager = _local.name_manager = NameManager()
    return manager


class AttrScope:
    """Attributes given to every symbol created inside ``with AttrScope(key=value):``.

    Values must be strings, as in MXNet. Scopes nest; inner values win.
    """

    def __init__(self, **attrs: str):
        for key, value in attrs.items():
            if not isinstance(value, str):
                raise ValueError(f"AttrScope: attribute {key!r} must be a str, got {value!r}")
        self._attrs = attrs
        self._old: AttrScope | None = None

    def get(self, attrs: dict[str, Any] | None) -> dict[str, str]:
        """The scope's attributes updated by ``attrs``."""
        out = dict(self._attrs)
        if attrs:
            out.update(attrs)
        return out

    def __enter__(self) -> "AttrScope":
        self._old = current_attr_scope()
        merged = AttrScope(**self._old.get(self._attrs))
        _local.attr_scope = merged
        return self

    def __exit__(self, *exc) -> None:
        _local.attr_scope = self._old


def current_attr_scope() -> AttrScope:
    """The innermost active attribute scope."""
    scope = getattr(_local, "attr_scope", None)
    if scope is None:
        scope = _local.attr_scope = AttrScope()
    return scope
