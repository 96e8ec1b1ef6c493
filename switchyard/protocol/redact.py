"""Keeping the proxy's own secrets out of what it relays, reports and logs.

Layer: ``protocol`` — standard library only, so every layer can use it.

Two kinds of secret reach text the proxy writes somewhere else:

* credentials in URLs (``redis://:password@host``, ``https://user:token@upstream``): every URL
  that is logged or reported goes through :func:`redact_url`, which keeps the scheme, host,
  port and path and replaces the user-info with ``***``;
* the API keys and tokens the proxy sends upstream: an upstream error that quotes the request
  ("invalid x-api-key sk-…") would hand the operator's key to the caller. A backend builds a
  :class:`Redactor` from the secret-bearing headers it sends, and every error body and message
  it passes on goes through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

MASK = "[redacted]"
"""What a redacted secret is replaced with."""

MIN_SECRET = 8
"""Shorter header values are not treated as secrets: replacing every occurrence of a 3-letter
value in an error body would garble it while protecting nothing worth a key's name."""

_SECRET_NAMES = ("authorization", "api-key", "api_key", "apikey", "token", "secret", "password", "cookie")
"""Header names (lower-cased substrings) whose values are credentials: ``authorization``,
``proxy-authorization``, ``x-api-key``, ``api-key``, ``x-goog-api-key``, ``x-auth-token``,
``cookie`` …"""

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]*)@")


def redact_url(url: str) -> str:
    """``url`` with any user name and password replaced by ``***`` (``redis://***@host:6379/0``).

    A string that is not a URL with user-info comes back unchanged.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_urls(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


def redact_urls(text: str) -> str:
    """``text`` with the user-info of every URL in it replaced by ``***`` (error messages that
    quote a URL: redis-py's, httpx's)."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}***@", text)


def is_secret_header(name: str) -> bool:
    """Whether a header of this name carries a credential."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_NAMES)


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The credential values among ``headers``: each secret-bearing header's value, and for
    ``Bearer``/``Basic`` schemes the token alone too (an upstream may quote either)."""
    found: list[str] = []
    for name, value in headers.items():
        if not is_secret_header(name):
            continue
        found.append(value)
        scheme, _, token = value.partition(" ")
        if token and scheme.lower() in ("bearer", "basic", "token"):
            found.append(token.strip())
    return found


class Redactor:
    """Replaces known secrets in text and bytes with :data:`MASK`.

    Args:
        secrets: The values to hide; those shorter than :data:`MIN_SECRET` are ignored.
    """

    __slots__ = ("_bytes", "_text")

    def __init__(self, secrets: Iterable[str]) -> None:
        unique = sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True)
        # Longest first: a token that is part of its own "Bearer <token>" line is hidden whole.
        self._text = re.compile("|".join(re.escape(s) for s in unique)) if unique else None
        self._bytes = re.compile(b"|".join(re.escape(s.encode()) for s in unique)) if unique else None

    def __bool__(self) -> bool:
        return self._text is not None

    def text(self, value: str) -> str:
        """``value`` with every secret replaced."""
        return value if self._text is None else self._text.sub(MASK, value)

    def data(self, value: bytes) -> bytes:
        """``value`` with every secret replaced."""
        return value if self._bytes is None else self._bytes.sub(MASK.encode(), value)


__all__ = ["MASK", "MIN_SECRET", "Redactor", "header_secrets", "is_secret_header", "redact_url", "redact_urls"]
