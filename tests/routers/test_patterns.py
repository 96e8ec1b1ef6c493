"""One regular-expression check for the router keys that take patterns, with their messages."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from switchyard.routers.patterns import checked_pattern
from switchyard.routers.restrict import RestrictRule
from switchyard.routers.verify import VerifyCheck


def test_a_pattern_that_compiles_is_returned_and_one_that_does_not_is_named() -> None:
    assert checked_pattern(r"(?i)\bsecret\b") == r"(?i)\bsecret\b"
    with pytest.raises(ValueError, match=r"^not a valid regular expression: missing \), unterminated subpattern"):
        checked_pattern("(unclosed")
    with pytest.raises(ValueError, match=r"^plan_patterns\[2\] is not a valid regular expression: "):
        checked_pattern("(unclosed", "plan_patterns[2]")


def test_restrict_and_verify_reject_a_bad_pattern_in_the_same_words() -> None:
    for build in (
        lambda: RestrictRule(pattern="(unclosed", require=["onprem"]),
        lambda: VerifyCheck(type="regex", pattern="(unclosed"),
    ):
        with pytest.raises(ValidationError, match="pattern\n  Value error, not a valid regular expression: missing"):
            build()
    assert RestrictRule(pattern="a+", require=["onprem"]).pattern == "a+"
