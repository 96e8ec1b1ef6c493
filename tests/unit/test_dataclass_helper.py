"""``switchyard._dataclass.dataclass`` gives what ``dataclasses.dataclass`` gives.

Each shape is defined twice, once with each decorator, and the two are compared on repr,
equality, hashability and hash, immutability and the methods a body defines itself.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from switchyard._dataclass import dataclass as ours

_STD: Callable[..., Any] = dataclasses.dataclass


def _plain(deco: Callable[..., Any]) -> type:
    @deco
    class Plain:
        a: int
        b: str = "x"
        c: list[int] = dataclasses.field(default_factory=list, compare=False)
        d: float = dataclasses.field(default=0.5, repr=False)
        e: int = dataclasses.field(default=0, hash=False)
        kind: ClassVar[str] = "plain"

    return Plain


def _empty(deco: Callable[..., Any]) -> type:
    @deco
    class Empty:
        pass

    return Empty


def _one(deco: Callable[..., Any]) -> type:
    @deco
    class One:
        value: float

    return One


def _own_methods(deco: Callable[..., Any]) -> type:
    @deco
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    return Own


def _own_eq_only(deco: Callable[..., Any]) -> type:
    @deco
    class OwnEq:
        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnEq)

    return OwnEq


OPTIONS = [
    {},
    {"slots": True},
    {"frozen": True},
    {"frozen": True, "slots": True},
    {"slots": True, "kw_only": True},
    {"slots": True, "eq": False},
    {"frozen": True, "eq": False},
    {"repr": False},
    {"order": True},
    {"frozen": True, "unsafe_hash": True},
]


def _make_args(cls: type) -> list[dict[str, Any]]:
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    samples: dict[str, list[Any]] = {
        "a": [1, 1, 2],
        "b": ["x", "x", "y"],
        "c": [[1], [2], [1]],
        "d": [0.5, 0.25, 0.5],
        "e": [0, 9, 0],
        "value": [float("nan"), 1.0, 1.0],
    }
    return [{n: samples[n][i] for n in names} for i in range(3)]


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except Exception as exc:  # the kind of failure must match too
        return ("raised", type(exc))


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "defaults")
@pytest.mark.parametrize("shape", [_plain, _empty, _one, _own_methods, _own_eq_only])
def test_same_behaviour_as_the_standard_library(options: dict[str, Any], shape: Callable[..., type]) -> None:
    std_built, our_built = _outcome(lambda: shape(_STD(**options))), _outcome(lambda: shape(ours(**options)))
    if std_built[0] == "raised":  # e.g. unsafe_hash with a __hash__ of its own
        assert our_built == std_built
        return
    std_cls, our_cls = std_built[1], our_built[1]
    std_objs = [std_cls(**kw) for kw in _make_args(std_cls)]
    our_objs = [our_cls(**kw) for kw in _make_args(our_cls)]
    nan_shared = float("nan")
    if shape is _one:  # the same NaN object on both sides: equal as tuple members, as the stdlib compares
        std_objs.append(std_cls(value=nan_shared))
        our_objs.append(our_cls(value=nan_shared))
        std_objs.append(std_cls(value=nan_shared))
        our_objs.append(our_cls(value=nan_shared))

    def strip(text: str) -> str:  # local classes of different calls, at different addresses
        return re.sub(r"0x[0-9a-f]+", "ADDR", text).rsplit("<locals>.", 1)[-1]

    for s, o in zip(std_objs, our_objs, strict=True):
        assert strip(repr(s)) == strip(repr(o))
        assert _outcome(lambda s=s: hash(s) == hash(s)) == _outcome(lambda o=o: hash(o) == hash(o))
    for i in range(len(std_objs)):
        for j in range(len(std_objs)):
            assert (std_objs[i] == std_objs[j]) == (our_objs[i] == our_objs[j]), (i, j)
            assert (std_objs[i] != std_objs[j]) == (our_objs[i] != our_objs[j]), (i, j)
            same_std = _outcome(lambda i=i, j=j: hash(std_objs[i]) == hash(std_objs[j]))
            same_our = _outcome(lambda i=i, j=j: hash(our_objs[i]) == hash(our_objs[j]))
            if same_std[0] == "ok" and same_std[1] and std_objs[i] == std_objs[j]:
                assert same_our == same_std, (i, j)
            else:
                assert same_our[0] == same_std[0], (i, j)
    stranger = object()
    assert (std_objs[0] == stranger) is (our_objs[0] == stranger)
    assert ("__hash__" in vars(std_cls) and vars(std_cls)["__hash__"] is None) == (
        "__hash__" in vars(our_cls) and vars(our_cls)["__hash__"] is None
    )
    field = next(iter(_make_args(std_cls)[0]), None)
    if field is not None:
        assert (
            _outcome(lambda: setattr(std_objs[0], field, 3))[0] == _outcome(lambda: setattr(our_objs[0], field, 3))[0]
        )
    assert hasattr(std_cls, "__slots__") == hasattr(our_cls, "__slots__")
    assert std_cls.__match_args__ == our_cls.__match_args__
    assert [f.name for f in dataclasses.fields(std_cls)] == [f.name for f in dataclasses.fields(our_cls)]


def test_hash_is_the_hash_of_the_hashed_fields() -> None:
    @ours(frozen=True, slots=True)
    class Key:
        a: int
        b: str
        note: str = dataclasses.field(default="", compare=False)

    assert hash(Key(1, "x", "one")) == hash((1, "x")) == hash(Key(1, "x", "two"))
    assert {Key(1, "x"): 1}[Key(1, "x", "other")] == 1


def test_subclass_compares_own_class_only() -> None:
    @ours(frozen=True)
    class Base:
        a: int

    @ours(frozen=True)
    class Child(Base):
        b: int = 0

    assert Child(1, 2) == Child(1, 2)
    assert Base(1) != Child(1, 0)
    assert repr(Child(1, 2)).endswith("Child(a=1, b=2)")


def test_recursive_repr_shows_an_ellipsis() -> None:
    @ours
    class Node:
        children: list[Any]

    node = Node([])
    node.children.append(node)
    assert repr(node).endswith("Node(children=[...])")


def test_methods_carry_their_class_in_the_qualname() -> None:
    @ours(frozen=True, slots=True)
    class Named:
        a: int

    assert Named.__repr__.__qualname__.endswith("Named.__repr__")
    assert Named.__eq__.__qualname__.endswith("Named.__eq__")
    assert Named.__hash__.__qualname__.endswith("Named.__hash__")


def test_one_decorator_object_decorates_several_classes() -> None:
    quiet = ours(slots=True, eq=False, repr=False)

    @quiet
    class First:
        a: int

    @quiet
    class Second:
        a: int

    for cls in (First, Second):
        assert cls(1) != cls(1)  # identity equality, as eq=False asks, for both classes
        assert "object at 0x" in repr(cls(1))
