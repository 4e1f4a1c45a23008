"""Wikilink injection, slugs and frontmatter: examples and properties."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kompl.wiki.markdown import inject_links, one_line, parse_page, render_page, slugify, split_frontmatter, wikilinks

TARGETS = {
    "Alexander Fleming": "Alexander Fleming",
    "Fleming": "Alexander Fleming",
    "Howard Florey": "Howard Florey",
    "C++": "C++",
    "AT&T": "AT&T",
    "New York City": "New York City",
    "York": "York",
}


def test_first_mention_only_and_longest_name_wins():
    out = inject_links("Alexander Fleming met Fleming again. Fleming left.", TARGETS)
    assert out == "[[Alexander Fleming]] met Fleming again. Fleming left."


def test_alias_links_with_display_text():
    out = inject_links("Then Fleming wrote a paper.", TARGETS)
    assert out == "Then [[Alexander Fleming|Fleming]] wrote a paper."


def test_names_with_symbols_are_matched_whole():
    out = inject_links("We used C++ at AT&T, not C or AT.", TARGETS)
    assert "[[C++]]" in out and "[[AT&T]]" in out
    assert "[[C]]" not in out


def test_longest_overlapping_name_wins():
    out = inject_links("She moved to New York City, not York.", TARGETS)
    assert out == "She moved to [[New York City]], not [[York]]."


def test_never_links_inside_protected_spans():
    text = (
        "---\ntitle: Notes\nsummary: Howard Florey\n---\n"
        "# Howard Florey in a heading\n"
        "`Howard Florey` in code and [Howard Florey](https://x.org/Howard-Florey) and https://e.org/Fleming\n"
        "```\nHoward Florey in a fence\n```\n"
        "<span title=\"Fleming\">x</span> [src-0a1b2c]\n"
    )
    out = inject_links(text, TARGETS, self_title="Notes")
    assert out == text


def test_existing_link_is_not_duplicated_and_self_is_not_linked():
    text = "Howard Florey worked with [[Howard Florey]]. Alexander Fleming too."
    out = inject_links(text, TARGETS, self_title="Alexander Fleming")
    assert out == text


def test_wikilinks_lists_targets_once():
    assert wikilinks("[[A]] and [[B|b]] and [[A#x]]") == ["A", "B"]


def test_slugs():
    assert slugify("Alexander Fleming") == "alexander-fleming"
    assert slugify("C++") == "c-plus-plus" and slugify("C#") == "c-sharp"
    assert slugify("AT&T") == "at-and-t"
    assert slugify("Élan vital!") == "elan-vital"
    assert slugify("???") == "page"


names = st.text(alphabet=st.characters(whitelist_categories=("L", "N"), whitelist_characters="+&#-. "), min_size=1, max_size=20).filter(lambda s: s.strip())


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300), name=names)
def test_property_injection_only_adds_link_markup(text, name):
    """Removing the link markup gives back the original text: injection never rewrites prose."""
    out = inject_links(text, {name: name})
    if "[[" in text or "]]" in text:
        return
    unlinked = re.sub(r"\[\[([^\]|]+)\|([^\]]+)\]\]", r"\2", out)
    unlinked = re.sub(r"\[\[([^\]]+)\]\]", r"\1", unlinked)
    assert unlinked == text
    assert out.count("[[") <= 1


@settings(max_examples=200, deadline=None)
@given(title=st.text(min_size=1, max_size=60))
def test_property_slugs_are_safe_file_names(title):
    slug = slugify(title)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug)
    assert len(slug) <= 80


scalar = st.one_of(st.text(max_size=40), st.integers(), st.booleans())


@settings(max_examples=200, deadline=None)
@given(
    title=st.text(min_size=1, max_size=40),
    summary=st.text(max_size=80),
    sources=st.lists(st.from_regex(r"src-[0-9a-f]{12}", fullmatch=True), max_size=4),
    body=st.text(max_size=200),
)
def test_property_frontmatter_round_trip(title, summary, sources, body):
    meta = {"title": title, "page_type": "entity", "summary": summary, "sources": sources}
    text = render_page(meta, body)
    parsed, parsed_body = parse_page(text)
    assert parsed == {k: one_line(v) for k, v in meta.items()}
    expected = body if body.endswith("\n") or not body else body + "\n"
    assert parsed_body == expected
    assert split_frontmatter(text)[0].startswith("---\n")
