"""Property tests (hypothesis): wikilink injection idempotence and protected spans, URL normalisation.

Slugs, frontmatter round-trips and "injection only adds link markup" are in
tests/test_wiki_markdown.py.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kompl.errors import IngestError
from kompl.ingest.urls import normalize_url
from kompl.wiki.markdown import inject_links

TARGETS = {"Alexander Fleming": "Alexander Fleming", "Fleming": "Alexander Fleming", "Howard Florey": "Howard Florey",
           "C++": "C++", "penicillin": "Penicillin", "York": "York", "New York": "New York"}
NAMES = list(TARGETS)
words = st.sampled_from(NAMES + ["mould", "the", "and", "lab", "in", "1928", ".", ",", "\n", "\n\n"])
prose = st.lists(words, max_size=40).map(" ".join)
fast = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(text=st.one_of(prose, st.text(max_size=200)))
def test_injecting_twice_equals_once(text):
    once = inject_links(text, TARGETS)
    assert inject_links(once, TARGETS) == once


@fast
@given(before=prose, inside=st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map(" ".join), after=prose)
def test_never_links_inside_code_or_headings(before, inside, after):
    for protected in (f"`{inside}`", f"```\n{inside}\n```\n", f"# {inside}", f"## {inside} notes"):
        text = f"{before}\n\n{protected}\n\n{after}"
        linked = inject_links(text, TARGETS)
        assert protected in linked, (protected, linked)
        assert linked.replace("[[", "").replace("]]", "").count(protected) >= 1


@fast
@given(text=prose)
def test_each_target_linked_at_most_once(text):
    linked = inject_links(text, TARGETS)
    titles = [m.split("|")[0] for m in re.findall(r"\[\[([^\]]+)\]\]", linked)]
    assert len(titles) == len(set(titles))


hosts = st.sampled_from(["example.com", "Example.COM", "sub.example.org", "127.0.0.1", "[::1]", "xn--bcher-kva.example"])
paths = st.lists(st.text(alphabet="abcxyz019-_.~%", min_size=1, max_size=8), max_size=4).map(lambda p: "/" + "/".join(p))
params = st.lists(st.tuples(st.sampled_from(["q", "page", "id", "a"]), st.text(alphabet="abc123", max_size=5)),
                  max_size=3, unique_by=lambda kv: kv[0])
tracking = st.lists(st.sampled_from(["utm_source=news", "utm_campaign=x", "fbclid=abc", "gclid=zz"]), max_size=2,
                    unique=True)


def _url(scheme, host, port, path, query, fragment):
    netloc = host + (f":{port}" if port else "")
    qs = "&".join(f"{k}={v}" for k, v in query)
    return f"{scheme}://{netloc}{path}" + (f"?{qs}" if qs else "") + (f"#{fragment}" if fragment else "")


@fast
@given(scheme=st.sampled_from(["http", "https"]), host=hosts, path=paths, query=params, extra=tracking,
       fragment=st.text(alphabet="abc-", max_size=6))
def test_url_normalisation_invariances(scheme, host, path, query, extra, fragment):
    base = _url(scheme, host, None, path, query, "")
    norm = normalize_url(base)
    assert normalize_url(norm) == norm  # idempotent
    default_port = 443 if scheme == "https" else 80
    assert normalize_url(_url(scheme.upper(), host.upper(), default_port, path, query, fragment)) == norm
    with_tracking = _url(scheme, host, None, path, list(query) + [tuple(t.split("=")) for t in extra], fragment)
    assert normalize_url(with_tracking) == norm
    assert normalize_url(_url(scheme, host, None, path, list(reversed(query)), "")) == norm
    assert "#" not in norm


@fast
@given(text=st.text(max_size=120))
def test_url_normalisation_never_raises_anything_but_an_ingest_error(text):
    for candidate in (text, "http://" + text, "https://example.com/" + text, "http://[" + text + "]/"):
        try:
            out = normalize_url(candidate)
        except IngestError:
            continue
        assert isinstance(out, str)
        assert normalize_url(out) == out or _idempotence_exempt(out), (candidate, out)


def _idempotence_exempt(out: str) -> bool:
    """Outputs that do not parse as URLs again (no scheme) are not required to be fixed points."""
    return "://" not in out
