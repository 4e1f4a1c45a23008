"""Small text helpers shared by every stage (no heavy imports)."""

from __future__ import annotations

import re
import unicodedata

_PUNCT = re.compile(r"[^\w\s+#&.-]")
_SPACES = re.compile(r"\s+")
_POSSESSIVE = re.compile(r"'s\b")


def norm_name(name: str) -> str:
    """Case- and punctuation-normalized key of an entity name ("The  F.B.I." -> "the f.b.i.").

    Keeps '+', '#', '&', '.', '-' so that C++, C#, AT&T and GPT-4 stay distinct.
    """
    text = unicodedata.normalize("NFKC", name).casefold()
    text = _POSSESSIVE.sub("", text.replace("\u2019", "'"))
    text = _PUNCT.sub(" ", text)
    return _SPACES.sub(" ", text).strip(" .-")


def approx_tokens(text: str) -> int:
    """A fast token estimate (about 4 characters per token for English)."""
    return max(1, (len(text) + 3) // 4)
