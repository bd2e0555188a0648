"""Word counting, engine-neutral: tokenizing lines and updating running totals.

Runs where Spark calls it: `count_words` on the executors (one call per partition of a
batch's lines), `add_counts` in the shuffle's combiners, `update_count` in the state
update. Pure Python, no Spark import, so any engine (and the unit tests) can use it.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import islice

from streaming_app.settings.rules import DEFAULT_TOKEN_PATTERN

# Every ASCII character but letters and digits, as a space. In ASCII text without an
# apostrophe the default pattern's words are exactly the runs of letters and digits, so
# translating the rest to spaces and splitting finds them, in C and without the regex.
_ASCII_SEPARATORS = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalnum()})
# count_words tokenizes this many lines as one text when they allow the shortcut, in
# pieces of about PIECE_CHARS: the words of a piece stay in the CPU's caches while they
# are counted (30,000 lines as one 1.5 MB text: 76-82 ms of CPU; in 16 KiB pieces, 50-55).
CHUNK_LINES = 1000
PIECE_CHARS = 1 << 14


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
        if pattern == DEFAULT_TOKEN_PATTERN:
            return _ascii_words(line.lower() if lowercase else line)
    elif not unicodedata.is_normalized("NFC", line):
        line = unicodedata.normalize("NFC", line)
    words: list[str] = _compiled(pattern).findall(line)
    return [word.lower() for word in words] if lowercase else words


def _ascii_words(text: str) -> list[str]:
    """The default pattern's words of ASCII text (already lower-cased if it should be)."""
    if "'" in text:
        words: list[str] = _compiled(DEFAULT_TOKEN_PATTERN).findall(text)
        return words
    return text.translate(_ASCII_SEPARATORS).split()


def count_words(
    lines: Iterable[str], pattern: str = DEFAULT_TOKEN_PATTERN, lowercase: bool = True
) -> Iterator[tuple[str, int]]:
    """Count the words of one partition's lines: one (word, count) pair per distinct word."""
    # Pre-aggregating per partition sends one pair per distinct word to the
    # shuffle instead of one pair per occurrence.
    counts: Counter[str] = Counter()
    if pattern != DEFAULT_TOKEN_PATTERN:
        for line in lines:
            counts.update(tokenize(line, pattern, lowercase))
        return iter(counts.items())
    remaining = iter(lines)
    while chunk := list(islice(remaining, CHUNK_LINES)):
        # The usual input is ASCII: then the whole chunk is one text for the shortcut,
        # which saves the per-line calls (a separator between lines keeps words apart).
        text = chunk[0] if len(chunk) == 1 else "\n".join(chunk)
        if text.isascii() and "'" not in text:
            for piece in pieces(text, PIECE_CHARS):
                counts.update(_ascii_words(piece.lower() if lowercase else piece))
        else:  # line by line: findall over one long text is slower than per line
            for item in chunk:  # an item may be many lines (the Kafka reader's `joined`)
                for line in item.split("\n"):
                    counts.update(tokenize(line, pattern, lowercase))
    return iter(counts.items())


def pieces(text: str, size: int) -> Iterator[str]:
    """`text` in consecutive pieces of about `size` characters, each cut after a newline
    (so no line, and no word, is cut in two); the pieces joined are the text."""
    start, end = 0, len(text)
    while end - start > size:
        cut = text.find("\n", start + size) + 1
        if not cut:
            break
        yield text[start:cut]
        start = cut
    yield text[start:]


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
