"""The tokenizer, per-partition pre-aggregation and the running-total update."""

from __future__ import annotations

import random
import string
from collections import Counter

import pytest

from streaming_app.jobs.text import (
    CHUNK_LINES,
    DEFAULT_TOKEN_PATTERN,
    _compiled,
    add_counts,
    count_words,
    pieces,
    tokenize,
    update_count,
)


def test_tokenize_lowercases_by_default() -> None:
    assert tokenize("The Cat SAT on THE mat") == ["the", "cat", "sat", "on", "the", "mat"]


def test_tokenize_keeps_case_when_lowercase_is_off() -> None:
    assert tokenize("The Cat SAT", lowercase=False) == ["The", "Cat", "SAT"]


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("hello, world!", ["hello", "world"]),
        ("  tabs\tand\r\nnewlines  ", ["tabs", "and", "newlines"]),
        ("a-b.c;d:e/f", ["a", "b", "c", "d", "e", "f"]),
        ('(parens) [brackets] "quotes" {braces}', ["parens", "brackets", "quotes", "braces"]),
        ("daisy-chain, waistcoat-pocket", ["daisy", "chain", "waistcoat", "pocket"]),
        ("", []),
        ("... !!! --- ", []),
    ],
)
def test_tokenize_splits_on_punctuation_and_whitespace(line: str, words: list[str]) -> None:
    assert tokenize(line) == words


def test_inner_apostrophes_are_kept() -> None:
    assert tokenize("Don't stop, it’s fine") == ["don't", "stop", "it’s", "fine"]


def test_leading_trailing_and_doubled_apostrophes_separate_words() -> None:
    assert tokenize("'tis the dogs' 'bone' a''b") == ["tis", "the", "dogs", "bone", "a", "b"]


def test_replacement_character_and_underscores_separate_words() -> None:
    assert tokenize("foo\ufffdbar snake_case __x__") == ["foo", "bar", "snake", "case", "x"]


def test_letters_and_digits_of_any_script_are_words() -> None:
    assert tokenize("Ünïcödé Straße 42 日本語 v2") == ["ünïcödé", "straße", "42", "日本語", "v2"]


@pytest.mark.parametrize("word", ["Straße", "ÉCOLE", "İstanbul"])
def test_lowercasing_does_not_change_how_a_word_splits(word: str) -> None:
    # One word stays one word whether or not it is lower-cased first.
    assert len(tokenize(word, lowercase=False)) == 1
    assert len(tokenize(word)) == 1


def test_custom_pattern_replaces_the_default() -> None:
    assert tokenize("a-b c_d e.f", pattern=r"\S+") == ["a-b", "c_d", "e.f"]
    assert tokenize("ab1 cd22 x", pattern=r"\d+") == ["1", "22"]


def test_custom_pattern_with_lowercase_off() -> None:
    assert tokenize("Foo-BAR baz", pattern=r"[^\s-]+", lowercase=False) == ["Foo", "BAR", "baz"]


def test_count_words_pre_aggregates_one_pair_per_distinct_word() -> None:
    pairs = list(count_words(["a b a", "B a", "", "c"]))
    assert sorted(pairs) == [("a", 3), ("b", 2), ("c", 1)]
    assert len({word for word, _ in pairs}) == len(pairs)


def test_count_words_takes_a_partition_iterator_and_the_tokenizer_options() -> None:
    lines = iter(["A a-a", "A"])
    assert sorted(count_words(lines, pattern=r"\S+", lowercase=False)) == [("A", 2), ("a-a", 1)]


def test_count_words_of_an_empty_partition_is_empty() -> None:
    assert list(count_words([])) == []


def test_add_counts_adds() -> None:
    assert add_counts(2, 3) == 5


def test_update_count_without_state_or_values_stays_absent() -> None:
    assert update_count([], None) is None


def test_update_count_without_state_starts_from_the_new_values() -> None:
    assert update_count([2, 3], None) == 5


def test_update_count_adds_new_values_to_the_total() -> None:
    assert update_count([4, 1], 10) == 15


def test_update_count_keeps_the_total_when_nothing_is_new() -> None:
    assert update_count([], 7) == 7


def test_update_count_accepts_any_iterable() -> None:
    assert update_count(iter([1, 1, 1]), 2) == 5


def _reference_words(line: str, lowercase: bool = True) -> list[str]:
    """The slow path for ASCII: match the default pattern, then lower-case each word."""
    words = _compiled(DEFAULT_TOKEN_PATTERN).findall(line)
    return [word.lower() for word in words] if lowercase else words


def _random_lines(seed: int, count: int, alphabet: str) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(count)]


@pytest.mark.parametrize("lowercase", [True, False])
def test_ascii_lines_tokenize_as_matching_then_lower_casing(lowercase: bool) -> None:
    # ASCII lines take a shortcut (translate separators to spaces and split, or match
    # the lower-cased line when it has an apostrophe): the same words.
    for line in _random_lines(3, 2000, string.printable + "''"):
        assert tokenize(line, lowercase=lowercase) == _reference_words(line, lowercase)


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize(
    "extra",
    [
        "",  # every chunk takes the whole-chunk shortcut
        "'",  # some chunks have an apostrophe: line by line
        "éß’İ\ufffd",  # some chunks are not ASCII: line by line
    ],
)
def test_count_words_in_chunks_counts_as_line_by_line(lowercase: bool, extra: str) -> None:
    alphabet = string.printable.replace("'", "") + "aeiou" * 5 + extra
    lines = _random_lines(7, 5 * CHUNK_LINES + 17, alphabet)
    expected: Counter[str] = Counter()
    for line in lines:
        expected.update(tokenize(line, DEFAULT_TOKEN_PATTERN, lowercase))
    assert dict(count_words(iter(lines), lowercase=lowercase)) == dict(expected)
    # A word never spans two lines of a chunk, whatever ends them.
    assert dict(count_words(["ab", "cd"] * CHUNK_LINES)) == {"ab": CHUNK_LINES, "cd": CHUNK_LINES}


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("extra", ["", "'", "éß’İ\ufffd\u0301"])
def test_lines_joined_with_newlines_count_as_the_lines_one_by_one(
    lowercase: bool, extra: str
) -> None:
    # The Kafka reader may hand on a poll's values as one text joined with newlines
    # (reader.joined_text): the same words, ASCII or not, combining marks at a line's
    # start included (NFC never composes across a newline).
    alphabet = string.printable.replace("'", "") + "aeiou" * 5 + extra
    lines = _random_lines(11, 3 * CHUNK_LINES + 5, alphabet)
    expected: Counter[str] = Counter()
    for line in lines:
        expected.update(tokenize(line, DEFAULT_TOKEN_PATTERN, lowercase))
    rng = random.Random(5)
    items, at = [], 0
    while at < len(lines):
        size = rng.choice([1, 2, 7, 300, 2500])
        items.append("\n".join(lines[at : at + size]))
        at += size
    assert dict(count_words(iter(items), lowercase=lowercase)) == dict(expected)


@pytest.mark.parametrize("size", [1, 5, 64])
def test_pieces_cut_after_newlines_and_join_to_the_text(size: int) -> None:
    text = "\n".join(_random_lines(13, 300, string.ascii_letters + " "))
    cut = list(pieces(text, size))
    assert "".join(cut) == text
    assert all(piece.endswith("\n") for piece in cut[:-1])
    assert all(len(piece) >= size for piece in cut[:-1])
    assert len(cut) > 1
    assert list(pieces("no newline at all, however long", 3)) == ["no newline at all, however long"]


@pytest.mark.parametrize("lowercase", [True, False])
def test_a_text_counted_in_pieces_counts_as_the_lines_one_by_one(
    lowercase: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small pieces: every joined text is cut many times, never inside a line.
    monkeypatch.setattr("streaming_app.jobs.text.PIECE_CHARS", 50)
    lines = _random_lines(17, 3 * CHUNK_LINES, string.ascii_letters + string.digits + " .,")
    expected: Counter[str] = Counter()
    for line in lines:
        expected.update(tokenize(line, DEFAULT_TOKEN_PATTERN, lowercase))
    joined = ["\n".join(lines[i : i + 700]) for i in range(0, len(lines), 700)]
    assert dict(count_words(iter(joined), lowercase=lowercase)) == dict(expected)
    assert dict(count_words(iter(lines), lowercase=lowercase)) == dict(expected)
