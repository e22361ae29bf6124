"""Name -> class registries, as MXNet's ``register`` / ``alias`` / ``create``.

One :class:`Registry` backs each family that a name can pick (optimizers, initializers,
metrics, LR schedulers, kvstore types). Names are case-insensitive, as in MXNet.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A case-insensitive map from names to classes of one family.

    Parameters
    ----------
    kind : str
        What the family is called in messages, e.g. ``"optimizer"``.
    case_sensitive : bool, default False
        Operators need True: MXNet's ``Softmax`` (a loss head) is not ``softmax``.
    """

    def __init__(self, kind: str, case_sensitive: bool = False):
        self.kind = kind
        self._key = (lambda n: n) if case_sensitive else str.lower
        self._classes: dict[str, type] = {}

    def register(self, cls: type[T] | None = None, *, name: str | None = None):
        """Register ``cls`` under ``name`` (default: its class name).

        Usable as ``@reg.register`` or ``reg.register(cls, name=...)``. Re-registering a
        name warns and replaces, as MXNet does.
        """
        def add(klass: type[T]) -> type[T]:
            key = self._key(name or klass.__name__)
            old = self._classes.get(key)
            if old is not None and old is not klass:
                warnings.warn(f"{self.kind} {key!r} is being overridden: "
                              f"{old.__module__}.{old.__name__} -> {klass.__module__}.{klass.__name__}",
                              stacklevel=2)
            self._classes[key] = klass
            return klass
        return add if cls is None else add(cls)

    def alias(self, *aliases: str) -> Callable[[type[T]], type[T]]:
        """Decorator registering a class under extra names."""
        def add(klass: type[T]) -> type[T]:
            for a in aliases:
                self.register(klass, name=a)
            return klass
        return add

    def get(self, name: str) -> type[T]:
        """The class registered as ``name``; ``ValueError`` listing the known names if none."""
        if not isinstance(name, str):
            raise TypeError(f"{self.kind} name must be a str, got {type(name).__name__}")
        try:
            return self._classes[self._key(name)]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; known {self.kind}s: "
                             f"{', '.join(sorted(self._classes))}") from None

    def create(self, name: Any, *args, **kwargs) -> T:
        """Instantiate by name; an instance of the family passes through unchanged."""
        if not isinstance(name, str):
            return name
        return self.get(name)(*args, **kwargs)

    def __contains__(self, name: str) -> bool:
        return isinstance(name, str) and self._key(name) in self._classes

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._classes)
