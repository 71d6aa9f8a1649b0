"""Deterministic pseudo-English text: same bytes on every run and in every venv.

Words are drawn from a fixed vocabulary (common English words plus syllable
compounds) with a Zipf distribution, so the text compresses like prose (about
2.8x with gzip or zstd) instead of like random bytes (1x) or repeated lines (50x+).
"""

from __future__ import annotations

import itertools
import random

_SYLLABLES = (
    "ka",
    "ri",
    "to",
    "men",
    "sa",
    "lo",
    "ven",
    "tra",
    "in",
    "or",
    "el",
    "an",
    "del",
    "qui",
    "por",
    "st",
    "ex",
    "pre",
    "con",
    "ment",
    "ing",
    "tion",
    "er",
    "al",
    "re",
    "de",
    "is",
    "ver",
    "ab",
    "um",
    "ol",
    "ust",
)
_COMMON = (
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "or",
    "from",
    "at",
    "which",
    "an",
    "have",
    "not",
    "but",
    "they",
    "their",
    "has",
    "more",
    "can",
    "will",
    "one",
    "all",
    "also",
    "been",
    "would",
    "other",
    "when",
    "about",
    "into",
    "than",
    "its",
    "some",
    "only",
    "these",
    "may",
    "such",
    "there",
    "time",
    "first",
    "new",
    "use",
    "two",
    "like",
    "over",
)


def _vocabulary(size: int = 6000, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = list(_COMMON)
    seen = set(out)
    while len(out) < size:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
        if word not in seen:
            seen.add(word)
            out.append(word)
    return out


_WORDS = _vocabulary()
_CUM = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(_WORDS))))


def text(rng: random.Random, size: int) -> str:
    """``size`` characters of sentences drawn from ``rng``."""
    parts: list[str] = []
    total = 0
    while total < size:
        words = rng.choices(_WORDS, cum_weights=_CUM, k=rng.randint(6, 20))
        sentence = " ".join(words).capitalize() + rng.choice((". ", ". ", ", ", "? ", "; "))
        if rng.random() < 0.1:
            sentence = f"{rng.randint(1, 99999)} {sentence}"
        parts.append(sentence)
        total += len(sentence)
    return "".join(parts)[:size]


def seeded(*key: object) -> random.Random:
    """A generator seeded by ``key`` (string seeds are stable across processes)."""
    return random.Random("/".join(str(k) for k in key))
