"""Setting one key of one route in a YAML config without disturbing the rest of the file.

Layer: ``eval``.

The edit is made on the text, at the position PyYAML reports for the node, so comments, key
order, quoting and ``${ENV}`` references elsewhere stay exactly as written.
"""

from __future__ import annotations

from typing import Any

import yaml

from switchyard.config.nested import split


class YamlEditError(ValueError):
    """The file's shape does not allow the edit (the message says where)."""


def _mapping_value(node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return k, v
    return None


def format_number(value: float) -> str:
    """A number YAML 1.1 reads back exactly: an ``int`` as an integer (``persistent_errors.repeats:
    3``), anything else as a float (``0.4132``, ``1.0``, ``1.0e-05``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    text = repr(float(value))
    mantissa, e, exponent = text.partition("e")
    if not e:
        return text
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}e{exponent}"


def set_route_key(text: str, route: str, key: str, value: float) -> str:
    """Returns ``text`` with ``routes.<route>.<key>`` set to ``value``.

    ``key`` may be a path inside the route (``stages[1].threshold`` for a cascade stage).

    An existing scalar is replaced in place; a missing key is added to the route's block (block
    style: a new line with the block's indentation before its first key; flow style
    ``{...}``: appended before the closing brace).

    Raises:
        YamlEditError: The file has no such route, or the route or key is not a plain mapping
            entry.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise YamlEditError(f"invalid YAML: {exc}") from None
    if not isinstance(root, yaml.MappingNode):
        raise YamlEditError("the config must be a mapping at the top level")
    found = _mapping_value(root, "routes")
    if found is None or not isinstance(found[1], yaml.MappingNode):
        raise YamlEditError("the config has no 'routes' mapping")
    entry = _mapping_value(found[1], route)
    if entry is None:
        raise YamlEditError(f"routes.{route} is not in the file")
    block = entry[1]
    where = f"routes.{route}"
    *parents, last = _key_path(key)
    assert isinstance(last, str)  # _key_path guarantees it
    key = last
    for part in parents:
        block, where = _step(block, part, where)
    if not isinstance(block, yaml.MappingNode):
        raise YamlEditError(f"{where} is not a mapping")
    route = where[len("routes.") :]
    number = format_number(value)
    current = _mapping_value(block, key)
    if current is not None:
        node = current[1]
        if not isinstance(node, yaml.ScalarNode):
            raise YamlEditError(f"routes.{route}.{key} is not a plain value")
        start, end = node.start_mark.index, node.end_mark.index
        return text[:start] + number + text[end:]
    if block.flow_style:
        close = block.end_mark.index - 1
        if close < 0 or text[close] != "}":
            raise YamlEditError(f"routes.{route}: cannot find the closing brace of its flow mapping")
        pos = close
        while pos > 0 and text[pos - 1] in " \t\r\n":
            pos -= 1
        sep = ", " if block.value else ""
        return text[:pos] + f"{sep}{key}: {number}" + text[pos:]
    if not block.value:
        raise YamlEditError(f"routes.{route} is empty")
    first = block.value[0][0]
    line_start = text.rfind("\n", 0, first.start_mark.index) + 1
    indent = text[line_start : first.start_mark.index]
    if indent.strip().replace("-", "").strip():
        raise YamlEditError(f"routes.{route}: its first key does not start a line")
    if indent.strip():
        # A mapping that is a block sequence item ("- type: ..."): the new key takes the dash's
        # line, the old first key moves to the next line at the mapping's indentation.
        start = first.start_mark.index
        return text[:line_start] + f"{indent}{key}: {number}\n" + " " * len(indent) + text[start:]
    return text[:line_start] + f"{indent}{key}: {number}\n" + text[line_start:]


def _key_path(key: str) -> list[str | int]:
    parts = list(split(key))
    if not parts or not isinstance(parts[-1], str):
        raise YamlEditError(f"cannot set {key!r}: the last part must be a key")
    return parts


def _step(node: yaml.Node, part: str | int, where: str) -> tuple[yaml.Node, str]:
    if isinstance(part, int):
        if not isinstance(node, yaml.SequenceNode) or part >= len(node.value):
            raise YamlEditError(f"{where}[{part}] is not in the file")
        return node.value[part], f"{where}[{part}]"
    if not isinstance(node, yaml.MappingNode):
        raise YamlEditError(f"{where} is not a mapping")
    found = _mapping_value(node, part)
    if found is None:
        raise YamlEditError(f"{where}.{part} is not in the file")
    return found[1], f"{where}.{part}"


def check_route_key(text: str, route: str, key: str, value: float) -> None:
    """Raises :class:`YamlEditError` unless ``text`` parses and holds ``value`` at the key."""
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise YamlEditError(f"the edited file is not valid YAML: {exc}") from None
    got: Any = data.get("routes", {}).get(route, {}) if isinstance(data, dict) else None
    for part in _key_path(key):
        if isinstance(part, int):
            got = got[part] if isinstance(got, list) and part < len(got) else None
        else:
            got = got.get(part) if isinstance(got, dict) else None
    if not isinstance(got, int | float) or abs(float(got) - value) > 1e-12 * max(1.0, abs(value)):
        raise YamlEditError(f"the edited file holds {got!r} at routes.{route}.{key}, expected {value}")
