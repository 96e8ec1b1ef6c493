"""The per-turn shortcuts give exactly the answers of the straightforward reading.

Tool output is read with gates, a hit index for long texts and lazily computed fields; shell
commands skip segmentation when nothing can cut them; the prefix cache shares fingerprints; the
scorer keeps verdicts; the state store copies flat state in one step. Each is checked here
against the plain version on generated inputs (deterministic seeds) and recorded outputs.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import _reference as ref
import pytest
from _convo import bash, decode, tool

from switchyard.protocol.messages import Message, TextPart, ToolResultPart
from switchyard.routers.stage import NVIDIA_PROFILE, Signals, pick, tables
from switchyard.routers.stage import shell as sh
from switchyard.routers.stage import text as tx
from switchyard.routers.stage.prefix import PrefixCache, conversation_key, fingerprint
from switchyard.routers.stage.signals import DEFAULT_PROFILE, details_of, extract_from, read_from
from switchyard.state.memory import MemoryStore
from switchyard.wire import codec

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from stage_trajectories import trajectories


def _needles() -> list[str]:
    found = {n for _, _, needles in tables.SUBSTRING_ERRORS for n in needles}
    for group in (
        tables.ANCHORS,
        tables.EXIT_PHRASES,
        tables.COMPILER_LINES,
        tables.EXCEPTION_LINE_PREFIXES,
        tables.STACK_FRAME_MARKERS,
        tables.PANIC_CONTEXT,
        tables.PATCH_LINE_PREFIXES,
        tables.DIAGNOSTIC_MARKERS,
        tables.TEST_PASS_ANCHORS,
        tables.TEST_PASS_PHRASES,
        tables.TEST_FAILURE_LITERALS,
        tables.COUNTED_FAILURE_WORDS,
    ):
        found.update(group)
    found.update((tables.PANIC_LINE_PREFIX, tables.PATCH_LINE_INFIX))
    found.update(
        [
            "error[e0308]: x",
            "error[e12]:",
            "error[ex]:",
            "error: could not compile `x`",
            "exit code: 1",
            "exit code 0",
            "exited with code '2'",
            "2 failed",
            "0 failed",
            " 10 errors",
            "3 failures",
            "error: bad",
            '{"error": "x"}',
            '{"error": null}',
            "ValueError: x",
            'File "/app/a.py", line 3',
            "/tmp/x",
            "\r\n",
            "\t",
            "é",
            "✓",
            "İ",
            "٣",
            "panic: runtime error: index\n\ngoroutine 1",
            "typeerror: x\n    at f (a.js:1)",
            "patch failed: a.c:1",
            "x: patch does not apply",
        ]
    )
    return sorted(found)


NEEDLES = _needles()
PADDING = ("log line with some output 0123456789\n", "def f(x):\n    return x + 1\n", "Ünïcode line — fine\n")


def _texts(seed: int, count: int) -> list[str]:
    """Short and long (hit-index) texts: needles at random places, in any case, sometimes many times."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        pieces = [rng.choice(NEEDLES) for _ in range(rng.randrange(0, 6))]
        if rng.random() < 0.5:
            filler = rng.choice(PADDING) * rng.randrange(1, 150)
            for _ in range(rng.randrange(0, 4)):
                at = rng.randrange(len(filler) + 1)
                filler = filler[:at] + rng.choice(NEEDLES) + filler[at:]
            pieces.insert(rng.randrange(len(pieces) + 1), filler)
        if rng.random() < 0.1:
            pieces.append("error: x\n" * rng.randrange(20, 40))  # more hits than the index keeps
        text = rng.choice(("", " ", "\n", ": ", " 3 ")).join(pieces)
        out.append(text.upper() if rng.random() < 0.2 else text)
    return out


def _recorded_outputs() -> list[str]:
    return [
        m["content"]
        for traj in trajectories()
        for m in traj["messages"]
        if m.get("role") == "tool" and isinstance(m.get("content"), str)
    ]


@pytest.mark.parametrize("seed", [1, 2])
def test_tool_output_reading_equals_the_reference(seed: int) -> None:
    texts = _texts(seed, 700) + (_recorded_outputs() if seed == 1 else [])
    assert any(len(x) >= tx._HITS_FROM for x in texts) and any(len(x) < tx._HITS_FROM for x in texts)
    for text in texts:
        lower = text.lower()
        for profile in (False, True):
            info = tx._analyse(text, profile, profile)
            assert (info.level, info.names, info.fingerprint, info.clean_pass) == ref.analyse(text, profile, profile), (
                text
            )
            assert tx.severity_of(lower, tool_errors=profile, failing_tests=profile) == ref.severity(
                lower, profile, profile
            )
        assert tx.has_failure_count(lower) == ref.failure_count(lower), text
        assert tx.failure_fingerprint(lower, ("a",)) == ref.fingerprint(lower, ("a",)), text


def test_tables_hold_what_the_shortcuts_assume() -> None:
    assert all(tx._EXCEPTION_KEY in p for p in tables.EXCEPTION_LINE_PREFIXES)
    assert all(tx._STACK_KEY in m for m in tables.STACK_FRAME_MARKERS)
    assert tx._KEY in tables.PANIC_LINE_PREFIX
    assert all(w.startswith(("fail", tx._KEY)) for w in tables.COUNTED_FAILURE_WORDS)
    assert all(any(a in p for a in tables.TEST_PASS_ANCHORS) for p in tables.TEST_PASS_PHRASES)
    assert all("compil" in line for line in tables.COMPILER_LINES)
    assert all("patch failed:" in p or p == "invalid context" for p in tables.PATCH_LINE_PREFIXES)
    assert sorted(n for _, entries in tables.ANCHORED_ERRORS for _, _, n in entries) == sorted(
        n for _, _, needles in tables.SUBSTRING_ERRORS for n in needles
    )


def test_result_fields_computed_on_demand_match_eager_reading() -> None:
    text = 'Traceback (most recent call last):\n  File "/app/a.py", line 9\nValueError: bad 9\n5 passed in 0.1s'
    info = tx.analyse_result(text, True, True)
    assert info.level == 0.7 and info._fingerprint is None and info._clean_pass is None
    assert info.fingerprint == ref.fingerprint(text.lower(), info.names) == info.fingerprint
    assert info.clean_pass is ref.clean_pass(text.lower()) is False  # "valueerror:" is a failure literal
    clean = tx.analyse_result("===== 4 passed in 0.12s =====", True, True)
    assert clean._clean_pass is True and clean.fingerprint is None


def _commands(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    words = (
        "cat > >> echo tee printf /tmp/x sed -i perl -pi -e git apply status diff branch remote get-url config --get "
        "ls -la find . grep python -c open(x).write(1) node fs.writefilesync( mv rm cp mkdir touch env foo=1 -- cargo "
        "fmt --check ruff format check --fix prettier --write black gofmt -w npx uv run command -v type x.py && || ; "
        "| & 'a;b' \"c|d\" \\; <<eof 'eof' patch -p1 awk head /usr/bin/cat ./run.sh $(ls) =x stat jq rg"
    ).split(" ")
    out = []
    for _ in range(count):
        cmd = " ".join(rng.choice(words) for _ in range(rng.randrange(1, 9)))
        out.append(rng.choice(("", "  ", "\n")) + cmd + rng.choice(("", " ", "\t")))
    return out


def test_shell_classification_equals_the_reference() -> None:
    recorded = [
        sh.command_of(tc["function"]["arguments"])
        for traj in trajectories()
        for m in traj["messages"]
        for tc in m.get("tool_calls") or []
    ]
    commands = [c for c in recorded if c] + _commands(7, 3000)
    assert any(not any(s in c for s in sh._SPECIAL) for c in commands)
    for cmd in commands:
        assert sh.classify_command(cmd) is ref.classify_command(cmd), cmd


# -- prefix cache ---------------------------------------------------------------------------------


def test_fingerprints_follow_content_not_identity() -> None:
    a = Message(role="tool", content=[ToolResultPart(call_id="1", content=[TextPart(text="out")])])
    same = Message(role="tool", content=[ToolResultPart(call_id="1", content=[TextPart(text="out")])])
    other = Message(role="tool", content=[ToolResultPart(call_id="1", content=[TextPart(text="out!")])])
    assert fingerprint(a) == fingerprint(same) != fingerprint(other)
    assert fingerprint(Message.of("user", "out")) != fingerprint(a)
    assert fingerprint(Message.of("user", "x")) != fingerprint(Message.of("assistant", "x"))


def test_shared_fingerprints_store_the_same_entry() -> None:
    steps = [("system", "sys"), ("user", "task"), *[bash(f"python s{i}.py", "ok") for i in range(40)]]
    messages = decode(steps).messages
    agg = extract_from(messages, None)[1]
    plain, shared = PrefixCache(), PrefixCache()
    known: dict[int, int] = {}
    key = conversation_key(decode(steps), known)
    plain.store("k", messages, agg)
    assert shared.lookup(key, messages, known) is None
    shared.store(key, messages, agg, known)
    assert plain._entries["k"] == shared._entries[key]
    assert known.keys() >= {0, 1, len(messages) - 1}
    longer = decode([*steps, tool("Read", "x")]).messages
    assert shared.lookup(key, longer, {}) == agg
    assert conversation_key(decode(steps)) == key != conversation_key(decode(steps[1:]))


def test_middle_check_catches_an_edit_in_the_middle() -> None:
    steps = [("user", "task"), *[bash(f"python s{i}.py", "ok") for i in range(40)]]
    messages = decode(steps).messages
    cache = PrefixCache()
    cache.store("s", messages, extract_from(messages, None)[1])
    middle = len(messages) // 2 & ~7
    edited = list(messages)
    edited[middle] = Message.of(edited[middle].role, "changed")
    assert cache.lookup("s", messages) is not None
    assert cache.lookup("s", edited) is None


# -- readings, verdicts, state copies --------------------------------------------------------------------


@pytest.mark.parametrize("profile", [DEFAULT_PROFILE, NVIDIA_PROFILE])
def test_readings_are_the_signals(profile: object) -> None:
    for traj in trajectories()[:20]:
        request = codec("openai_chat").decode_request({"model": "m", "messages": traj["messages"]})
        readings, agg = read_from(request.messages, None, profile=profile)  # type: ignore[arg-type]
        sig, agg2 = extract_from(request.messages, None, profile=profile)  # type: ignore[arg-type]
        assert Signals(*readings) == sig and agg == agg2
        assert details_of(readings) == sig.as_details()
        for picker in ("efficient_first", "capable_first"):
            assert pick(readings, picker=picker, threshold=0.5) == pick(sig, picker=picker, threshold=0.5)


async def test_flat_state_is_copied_and_nested_state_deeply() -> None:
    store = MemoryStore()
    flat = {"tier": "capable", "left": 2, "previous": None}
    await store.set("a", flat)
    flat["left"] = 99
    got = await store.get("a")
    assert got == {"tier": "capable", "left": 2, "previous": None}
    assert got is not None
    got["left"] = 7
    assert (await store.get("a")) == {"tier": "capable", "left": 2, "previous": None}
    nested = {"history": ["capable"], "meta": {"n": 1}}
    await store.set("b", nested)
    nested["history"].append("efficient")
    out = await store.get("b")
    assert out == {"history": ["capable"], "meta": {"n": 1}}
    assert out is not None
    out["meta"]["n"] = 5
    assert (await store.get("b")) == {"history": ["capable"], "meta": {"n": 1}}
