"""A markdown document's own frontmatter (title, outlet, author, date) is kept and shown on its page."""

from __future__ import annotations

import json

from kompl import db

CLIPPED = """---
title: "Harbour council approves the tidal barrier"
source: "The Coastal Herald"
author: "Ines Duarte"
published_at: "2024-03-05T09:30:00+00:00"
url: "https://herald.example/tidal-barrier"
---

# Harbour council approves the tidal barrier

The harbour council of Port Ellis approved the tidal barrier on Tuesday. Mayor Ines Duarte said the
barrier would cost 40 million euros and protect 3,000 homes. Engineers from Keller Marine will build it.

Construction starts in the autumn and should take three years. The council rejected a cheaper earth
dam that engineers said would fail in a once-a-century storm. Residents of the old quarter, which
flooded twice last winter, packed the public gallery and applauded the vote. Keller Marine built a
similar barrier at Vessby in 2019, which has held back every surge since. The national flood agency
will pay half of the cost, and the rest comes from a harbour levy on cruise ships and freight. Critics
on the council said the levy would drive shipping to the rival port of Marrow Bay, but the motion
passed by eleven votes to four after a three-hour debate.
"""


def test_frontmatter_becomes_metadata_and_the_source_page_byline(kompl, ws, tmp_path):
    doc = tmp_path / "clip.md"
    doc.write_text(CLIPPED, encoding="utf-8")
    result = json.loads(kompl("ingest", doc, "--json").stdout)
    row = result["ingested"][0]
    assert row["title"] == "Harbour council approves the tidal barrier" and row["title_from"] == "document"
    conn = db.connect(ws.db_path)
    meta = json.loads(conn.execute("SELECT metadata FROM sources").fetchone()[0])["document"]
    assert meta["publisher"] == "The Coastal Herald" and meta["author"] == "Ines Duarte"
    assert meta["published"].startswith("2024-03-05") and meta["url"] == "https://herald.example/tidal-barrier"
    assert kompl("compile").exit_code == 0
    drafts = json.loads(kompl("drafts", "--json").stdout)
    source_plan = next(d for d in drafts if d["page_type"] in ("source", "original-source"))
    assert kompl("approve", source_plan["plan_id"]).exit_code == 0
    page = json.loads(kompl("show", "Harbour council approves the tidal barrier", "--json").stdout)
    assert page["page_type"] == "source"
    assert "Published by The Coastal Herald on 2024-03-05, written by Ines Duarte" in page["content"]
    hits = json.loads(kompl("search", "Coastal Herald", "--json").stdout)
    assert hits and hits[0]["title"] == "Harbour council approves the tidal barrier"


def test_documents_without_frontmatter_have_no_document_metadata(kompl, ws, tmp_path):
    doc = tmp_path / "plain.md"
    doc.write_text("# Plain\n\nNo frontmatter here, only text about a river.\n", encoding="utf-8")
    assert kompl("ingest", doc).exit_code == 0
    conn = db.connect(ws.db_path)
    assert "document" not in json.loads(conn.execute("SELECT metadata FROM sources").fetchone()[0])
