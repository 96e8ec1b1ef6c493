"""``dataclass``: the standard library's decorator, with ``__repr__``, ``__eq__`` and
``__hash__`` made without compiling source.

Python 3.11's :func:`dataclasses.dataclass` writes each method it adds as source text and
compiles it with ``exec``: some 0.15 ms per method on this project's CI machine, up to six
methods per frozen class. ``switchyard serve`` defines about fifty dataclasses on its way to the
first answer, and their methods were ~40 ms of a ~0.3 s cold start. Here the standard library
still makes ``__init__`` (the one method on the request path, kept as fast as it makes it) and,
for ``frozen=True``, ``__setattr__``/``__delattr__``; ``__repr__``, ``__eq__`` and ``__hash__``
are closures over the field names, with the standard library's results:

- ``__repr__``: ``Name(field=value, ...)`` over the fields with ``repr=True``, ``...`` for a
  recursive reference;
- ``__eq__``: the tuples of the fields with ``compare=True`` when both sides have the same class,
  else ``NotImplemented``;
- ``__hash__``: with ``eq`` and ``frozen``, the hash of the tuple of the hashed fields; with
  ``eq`` and not ``frozen``, ``None`` (unhashable); a ``__hash__`` the class defines is kept,
  as are a ``__repr__`` or ``__eq__`` it defines.

``order=True`` and ``unsafe_hash=True`` go to the standard library unchanged. One difference
is visible: ``__dataclass_params__`` says ``repr=False, eq=False`` for the methods made here.
Type checkers see :func:`dataclasses.dataclass` itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from reprlib import recursive_repr
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:

    def dataclass(cls: type | None = None, /, **options: Any) -> Any:
        """:func:`dataclasses.dataclass` with the same options and results (module docstring)."""

        def wrap(target: type) -> type:
            return _make(target, options)

        return wrap if cls is None else wrap(cls)


def _make(cls: type, given: dict[str, Any]) -> type:
    options = dict(given)  # one dataclass(...) may decorate several classes
    want_repr = options.pop("repr", True)
    want_eq = options.pop("eq", True)
    if options.get("order") or options.get("unsafe_hash"):
        return dataclasses.dataclass(cls, repr=want_repr, eq=want_eq, **options)
    own = cls.__dict__  # the body as written: slots=True makes a new class
    has_repr, has_eq = "__repr__" in own, "__eq__" in own
    # As dataclasses decides it: a body with __eq__ and no __hash__ gets __hash__ = None from type().
    body_hash = own.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (body_hash is dataclasses.MISSING or (body_hash is None and has_eq))
    made: type = dataclasses.dataclass(cls, repr=False, eq=False, **options)
    fields = dataclasses.fields(made)
    if want_repr and not has_repr:
        _attach(made, "__repr__", _repr_of(tuple(f.name for f in fields if f.repr)))
    if want_eq and not has_eq:
        _attach(made, "__eq__", _eq_of(_key([f.name for f in fields if f.compare])))
    if want_eq and not explicit_hash:
        if options.get("frozen"):
            hashed = [f.name for f in fields if f.hash or (f.hash is None and f.compare)]
            _attach(made, "__hash__", _hash_of(_key(hashed)))
        else:
            made.__hash__ = None  # type: ignore[assignment]
    return made


def _attach(cls: type, name: str, fn: Callable[..., Any]) -> None:
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, fn)


def _key(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of ``names`` of an instance (``attrgetter`` of one name gives no tuple)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _repr_of(names: tuple[str, ...]) -> Callable[[Any], str]:
    @recursive_repr()
    def __repr__(self: Any) -> str:
        inner = ", ".join([f"{name}={getattr(self, name)!r}" for name in names])
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


def _eq_of(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _hash_of(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__
