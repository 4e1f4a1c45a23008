"""Generate test documents at test time: one per format, each hiding a planted token.

The markitdown test-vector idea: every generated document carries a unique
token that must survive conversion into the stored markdown, and where it makes
sense a string that must not (a <script> body, a style rule). Nothing binary is
committed; DOCX is written by hand as a minimal OOXML package (python-docx is not
a dependency), PPTX with python-pptx, XLSX with openpyxl, PDF by hand.
"""

from __future__ import annotations

import io
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path


def token() -> str:
    """A planted token: unique, and one word for every converter (no hyphens to split on)."""
    return "tok" + uuid.uuid4().hex


@dataclass
class Doc:
    path: Path
    must_include: list[str]
    must_not_include: list[str] = field(default_factory=list)
    title: str | None = None  # the title kompl should pick
    title_from: str | None = None
    source_type: str | None = None


# --- builders: each returns the file's bytes --------------------------------------------

def docx_bytes(paragraphs: list[str], *, title: str | None = None, heading: str | None = None) -> bytes:
    """A minimal valid .docx: content types, package rels, document and (optionally) core props."""
    from xml.sax.saxutils import escape

    body = ""
    if heading:
        body += (f'<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>{escape(heading)}</w:t></w:r></w:p>')
    body += "".join(f"<w:p><w:r><w:t xml:space=\"preserve\">{escape(p)}</w:t></w:r></w:p>" for p in paragraphs)
    document = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        f"<w:body>{body}</w:body></w:document>"
    )
    styles = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        '<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>'
        "</w:styles>"
    )
    core = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<dc:title>{escape(title or '')}</dc:title></cp:coreProperties>"
    )
    content_types = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/word/document.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
        '<Override PartName="/word/styles.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>'
        '<Override PartName="/docProps/core.xml" '
        'ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>'
        "</Types>"
    )
    rels = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
        'Target="word/document.xml"/>'
        '<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" '
        'Target="docProps/core.xml"/>'
        "</Relationships>"
    )
    doc_rels = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" '
        'Target="styles.xml"/></Relationships>'
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", content_types)
        z.writestr("_rels/.rels", rels)
        z.writestr("word/document.xml", document)
        z.writestr("word/styles.xml", styles)
        z.writestr("word/_rels/document.xml.rels", doc_rels)
        z.writestr("docProps/core.xml", core)
    return buf.getvalue()


def pptx_bytes(title: str, body: str, core_title: str | None = None) -> bytes:
    from pptx import Presentation

    prs = Presentation()
    if core_title:
        prs.core_properties.title = core_title
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = title
    slide.placeholders[1].text = body
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def xlsx_bytes(rows: list[list[object]], sheet: str = "Data", core_title: str | None = None) -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    if core_title:
        wb.properties.title = core_title
    ws = wb.active
    ws.title = sheet
    for row in rows:
        ws.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def pdf_bytes(lines: list[str]) -> bytes:
    """A minimal valid PDF 1.4: one page, Helvetica, one text line per entry, a correct xref."""

    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    ops = ["BT", "/F1 12 Tf", "72 720 Td", "14 TL"]
    for line in lines:
        ops.append(f"({esc(line)}) Tj T*")
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


# --- one document per format ---------------------------------------------------------------

def make_all(folder: Path) -> dict[str, Doc]:
    """Write one document per supported format into `folder`; keyed by format name."""
    folder.mkdir(parents=True, exist_ok=True)
    docs: dict[str, Doc] = {}

    def put(kind: str, name: str, data: bytes | str, **kw) -> None:
        path = folder / name
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        docs[kind] = Doc(path=path, **kw)

    t = {k: token() for k in ("md", "txt", "html", "csv", "json", "docx", "pptx", "xlsx", "pdf")}
    secret = token()
    put("md", "notes.md", f"# Field Notes\n\nThe planted token is {t['md']}.\n\n- one\n- two\n",
        must_include=[t["md"]], title="Field Notes", title_from="heading", source_type="markdown")
    put("txt", "plain-words.txt", f"Plain words without a heading.\n\nToken {t['txt']} here.\n",
        must_include=[t["txt"]], title="plain-words", title_from="filename", source_type="text")
    put("html", "page.html",
        "<!doctype html><html><head><title>The Page Title</title>"
        f"<style>.hidden{{color:red}}</style><script>var leaked = '{secret}';</script></head>"
        f"<body><h1>Heading Not Title</h1><p>Body text with {t['html']} inside.</p></body></html>",
        must_include=[t["html"]], must_not_include=[secret, "color:red"],
        title="The Page Title", title_from="document", source_type="html")
    put("csv", "table.csv", f"name,value\nalpha,1\n{t['csv']},2\n",
        must_include=[t["csv"], "alpha"], title="table", title_from="filename", source_type="csv")
    put("json", "data.json", '{"key": "%s", "n": [1, 2, 3]}\n' % t["json"],
        must_include=[t["json"]], title="data", title_from="filename", source_type="json")
    put("docx", "report.docx", docx_bytes([f"Word body with {t['docx']} planted."], heading="Quarterly Report"),
        must_include=[t["docx"], "Quarterly Report"], title="Quarterly Report", title_from="heading",
        source_type="docx")
    put("pptx", "deck.pptx", pptx_bytes("Slide Deck Title", f"Bullet with {t['pptx']}"),
        must_include=[t["pptx"], "Slide Deck Title"], title="Slide Deck Title", title_from="heading",
        source_type="pptx")
    put("xlsx", "sheet.xlsx", xlsx_bytes([["name", "value"], [t["xlsx"], 42]], core_title="Yield & Costs 1943"),
        must_include=[t["xlsx"], "42"], title="Yield & Costs 1943", title_from="document", source_type="xlsx")
    put("pdf", "paper.pdf", pdf_bytes(["A tiny PDF document", f"Token {t['pdf']} end"]),
        must_include=[t["pdf"]], title="paper", source_type="pdf")
    return docs


# --- a local HTTP server for URL inputs ----------------------------------------------------

class LocalServer:
    """An HTTP server on 127.0.0.1 in a thread, with canned routes and a hit counter.

    A route is (status, headers, body) or a callable taking the request handler.
    Use as a context manager; `url(path)` gives the address of a route.
    """

    def __init__(self, host: str = "127.0.0.1"):
        import collections
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.routes: dict[str, object] = {}
        self.hits: collections.Counter[str] = collections.Counter()
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                path = self.path.split("?")[0]
                server.hits[path] += 1
                route = server.routes.get(path)
                if route is None:
                    self.send_error(404)
                    return
                if callable(route):
                    route(self)
                    return
                status, headers, body = route
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # keep test output clean
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def url(self, path: str = "/") -> str:
        return f"http://{self.httpd.server_address[0]}:{self.port}{path}"

    def page(self, path: str, body: str | bytes, content_type: str = "text/html; charset=utf-8", status: int = 200,
             headers: dict | None = None) -> str:
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.routes[path] = (status, {"Content-Type": content_type, **(headers or {})}, data)
        return self.url(path)

    def redirect(self, path: str, location: str, status: int = 302) -> str:
        self.routes[path] = (status, {"Location": location}, b"")
        return self.url(path)

    def __enter__(self) -> "LocalServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()  # releases stalling handlers
        self.httpd.shutdown()
        self.httpd.server_close()
