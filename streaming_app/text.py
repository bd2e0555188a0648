"""Pure word-count logic handed to Spark: tokenizing lines and updating running totals."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache

# Words are runs of letters and digits, with inner apostrophes kept ("don't").
# Everything else (whitespace, punctuation, underscores, U+FFFD from undecodable
# input) separates words.
DEFAULT_TOKEN_PATTERN = r"[^\W_]+(?:['’][^\W_]+)*"


@lru_cache(maxsize=16)
def _compiled(pattern: str) -> re.Pattern[str]:
    # Executors call tokenize once per line; compile each pattern once per worker.
    return re.compile(pattern)


def tokenize(line: str, pattern: str = DEFAULT_TOKEN_PATTERN, lowercase: bool = True) -> list[str]:
    """Split a line into words: every match of `pattern`, lower-cased unless told not to.

    The line is NFC-normalized first, so "café" counts as one word however it was encoded.
    Words are lower-cased after matching: lower-casing can add combining marks ("İ").
    """
    if line.isascii():  # O(1): ASCII is NFC, and lower() keeps its letters letters
        if lowercase and pattern == DEFAULT_TOKEN_PATTERN:
            ascii_words: list[str] = _compiled(pattern).findall(line.lower())
            return ascii_words
    elif not unicodedata.is_normalized("NFC", line):
        line = unicodedata.normalize("NFC", line)
    words: list[str] = _compiled(pattern).findall(line)
    return [word.lower() for word in words] if lowercase else words


def count_words(
    lines: Iterable[str], pattern: str = DEFAULT_TOKEN_PATTERN, lowercase: bool = True
) -> Iterator[tuple[str, int]]:
    """Count the words of one partition's lines: one (word, count) pair per distinct word."""
    # Pre-aggregating per partition sends one pair per distinct word to the
    # shuffle instead of one pair per occurrence.
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(tokenize(line, pattern, lowercase))
    return iter(counts.items())


def add_counts(a: int, b: int) -> int:
    """Reduce function for per-batch counts."""
    return a + b


def update_count(new: Iterable[int], total: int | None) -> int | None:
    """updateStateByKey function: the running total after this batch's counts."""
    added = sum(new)
    if total is None:
        # A key with no state and no new values has no total yet; None keeps it absent.
        return added if added else None
    return total + added
