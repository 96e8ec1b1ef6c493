"""A small progress bar on stderr for long offline runs (no dependency).

Layer: ``eval``.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``label [#########.........]  5120/15344  33%  2410/s  eta 4s``, redrawn in place.

    On a terminal the bar is redrawn in place at most ~10 times a second. Anywhere else (CI logs,
    ``nohup``, a pipe) it writes the same text as plain lines, one every ``interval`` seconds
    plus a final one, so a long run is never silent and the log stays readable. Use as a
    context manager; :meth:`close` ends the line.

    Args:
        total: Expected number of steps (``None``: unknown, no bar or ETA).
        label: Text in front of the bar.
        stream: Where to draw (default ``sys.stderr``).
        enabled: ``True``: redraw in place whatever the stream; ``False``: nothing; default:
            in place on a terminal, plain lines elsewhere.
        width: Bar width in characters.
        interval: Seconds between plain lines (not on a terminal).
    """

    def __init__(
        self,
        total: int | None,
        label: str = "",
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        width: int = 28,
        interval: float = 10.0,
    ) -> None:
        self.total = total
        self.label = label
        self.count = 0
        self._stream = stream if stream is not None else sys.stderr
        self._lines = enabled is None and not _is_tty(self._stream)
        self._enabled = enabled if enabled is not None else True
        self._interval = interval if self._lines else 0.1
        self._width = width
        self._start = time.monotonic()
        self._last = self._start if self._lines else 0.0
        self._drawn = False

    def update(self, n: int = 1) -> None:
        """Advances by ``n`` steps."""
        self.count += n
        if not self._enabled:
            return
        now = time.monotonic()
        if self._lines:
            if now - self._last >= self._interval:
                self._last = now
                self._draw(now)
            return
        if now - self._last >= self._interval or (self.total is not None and self.count >= self.total):
            self._last = now
            self._draw(now)

    def render(self, now: float | None = None) -> str:
        """The current line (without the carriage return)."""
        elapsed = max((now if now is not None else time.monotonic()) - self._start, 1e-9)
        rate = self.count / elapsed
        parts = [self.label] if self.label else []
        if self.total:
            frac = min(self.count / self.total, 1.0)
            filled = int(frac * self._width)
            parts.append("[" + "#" * filled + "." * (self._width - filled) + "]")
            parts.append(f"{self.count}/{self.total}")
            parts.append(f"{frac:4.0%}")
        else:
            parts.append(str(self.count))
        parts.append(f"{rate:.0f}/s")
        if self.total and rate > 0 and self.count < self.total:
            parts.append(f"eta {_duration((self.total - self.count) / rate)}")
        elif self.count and (not self.total or self.count >= self.total):
            parts.append(f"in {_duration(elapsed)}")
        return "  ".join(parts)

    def _draw(self, now: float) -> None:
        if self._lines:
            self._stream.write(self.render(now) + "\n")
        else:
            self._stream.write("\r" + self.render(now) + "\x1b[K")
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Draws the final state and ends the line."""
        if self._enabled:
            self._draw(time.monotonic())
            if not self._lines:
                self._stream.write("\n")
            self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # closed stream
        return False


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
