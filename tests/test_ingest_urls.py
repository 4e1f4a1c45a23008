"""URL inputs: SSRF refusals (before any connection, and on every redirect hop),
timeouts, the streamed size cap and HTTP errors, against local test servers."""

from __future__ import annotations

import ipaddress
import json
import socket
import time

import pytest

from fixtures_docs import LocalServer, token


def ingest_json(kompl, *args, code=0):
    result = kompl("ingest", *[str(a) for a in args], "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.fixture
def connections(monkeypatch):
    """Every outgoing connection attempt, recorded (on top of conftest's network guard)."""
    seen = []
    guarded = socket.socket.connect

    def connect(self, address):
        seen.append(address)
        return guarded(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


@pytest.fixture
def server():
    with LocalServer() as srv:
        yield srv


BLOCKED = [
    "http://169.254.169.254/latest/meta-data",
    "http://10.0.0.1/",
    "http://192.168.1.1/admin",
    "http://172.16.5.4/",
    "http://100.64.0.1/",  # shared address space (carrier NAT)
    "http://0.0.0.0/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://[::ffff:169.254.169.254]/",  # IPv4-mapped IPv6
    "http://224.0.0.1/",
]


@pytest.mark.parametrize("url", BLOCKED)
def test_private_and_metadata_addresses_are_refused_before_connecting(kompl, conn, connections, url):
    report = ingest_json(kompl, url, code=1)
    [fail] = report["failed"]
    assert fail["code"] == "blocked_address", fail
    assert "non-public address" in fail["error"] and "--allow-private" in fail["hint"]
    assert connections == []
    row = conn.execute("SELECT input, code FROM ingest_failures").fetchone()
    assert tuple(row) == (url, "blocked_address")


@pytest.mark.parametrize("template", ["http://127.0.0.1:{port}/", "http://[::1]:{port}/", "http://localhost:{port}/",
                                      "HTTP://LOCALHOST:{port}/x"])
def test_loopback_is_refused_without_allow_private(kompl, server, connections, template):
    server.page("/", "<p>secret admin page</p>")
    report = ingest_json(kompl, template.format(port=server.port), code=1)
    assert report["failed"][0]["code"] == "blocked_address"
    assert connections == [] and sum(server.hits.values()) == 0


@pytest.mark.parametrize("url, words", [
    ("ftp://example.com/file.txt", "Only http and https URLs can be ingested, not ftp"),
    ("file:///etc/passwd", "Only http and https URLs can be ingested, not file"),
    ("gopher://127.0.0.1:70/", "not gopher"),
    ("http:///nohost", "has no host"),
])
def test_other_schemes_are_refused(kompl, connections, url, words):
    report = ingest_json(kompl, url, "--allow-private", code=1)  # even with --allow-private
    [fail] = report["failed"]
    assert fail["code"] == "bad_url" and words in fail["error"]
    assert connections == []


def test_hostname_is_checked_after_dns_resolution(kompl, monkeypatch, connections):
    def fake_getaddrinfo(host, port, *args, **kwargs):
        addresses = {"intranet.example": ["10.1.2.3"], "mixed.example": ["93.184.216.34", "127.0.0.1"]}
        if host not in addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in addresses[host]]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    report = ingest_json(kompl, "http://intranet.example/wiki", "https://mixed.example/", "http://nowhere.invalid/",
                         code=1)
    codes = [(f["code"], f["error"]) for f in report["failed"]]
    assert codes[0][0] == "blocked_address" and "resolves to 10.1.2.3" in codes[0][1]
    assert codes[1][0] == "blocked_address" and "127.0.0.1" in codes[1][1]
    assert codes[2][0] == "dns" and "Could not resolve host 'nowhere.invalid'" in codes[2][1]
    assert connections == []


def test_dns_rebinding_is_caught_at_the_connected_address(kompl, ws, server, monkeypatch):
    """The name checks out as public, then resolves to loopback when httpx connects."""
    real = socket.getaddrinfo
    answers = iter(["93.184.216.34"] * 2)  # kompl checks twice (before dedup, before the fetch)

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.example":
            ip = next(answers, "127.0.0.1")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    server.page("/", f"<p>internal {token()}</p>")
    report = ingest_json(kompl, f"http://rebind.example:{server.port}/", code=1)
    [fail] = report["failed"]
    assert fail["code"] == "blocked_address" and "connection went to 127.0.0.1" in fail["error"]
    assert list(ws.raw_dir.glob("*.md.gz")) == []


def test_address_allowed_rules():
    from kompl.ingest.urls import address_allowed

    assert address_allowed(ipaddress.ip_address("93.184.216.34"))
    assert address_allowed(ipaddress.ip_address("2606:2800:220:1:248:1893:25c8:1946"))
    for ip in ("127.0.0.1", "127.8.8.8", "::1", "10.0.0.1", "192.168.0.1", "169.254.169.254", "fc00::1",
               "::ffff:10.0.0.1", "255.255.255.255", "240.0.0.1"):
        assert not address_allowed(ipaddress.ip_address(ip)), ip


def test_every_redirect_hop_is_checked(kompl, conn, monkeypatch, connections):
    """127.0.0.1 counts as public here; its redirect to 127.0.0.2 must still be refused."""
    from kompl.ingest import urls

    monkeypatch.setattr(urls, "address_allowed", lambda ip: str(ip) == "127.0.0.1")
    with LocalServer("127.0.0.1") as first, LocalServer("127.0.0.2") as second:
        second.page("/internal", "<p>internal secret</p>")
        target = second.url("/internal")
        start = first.redirect("/go", target)
        first.page("/final", f"<p>public {token()}</p>")
        fine = first.redirect("/hop", "/final")  # a relative redirect to an allowed host is followed
        report = ingest_json(kompl, start, fine, code=1)
        assert first.hits["/go"] == 1  # the first hop was fetched ...
        assert sum(second.hits.values()) == 0  # ... the redirect target never was
        assert first.hits["/final"] == 1
    [fail] = report["failed"]
    assert fail["input"] == start and fail["code"] == "blocked_address"
    assert target in fail["error"] and "127.0.0.2" in fail["error"]
    assert all(addr[0] != "127.0.0.2" for addr in connections)
    [entry] = report["ingested"]
    row = conn.execute("SELECT url, url_norm FROM sources WHERE source_id = ?", (entry["source_id"],)).fetchone()
    assert row["url"].endswith("/final") and row["url_norm"].endswith("/hop")  # fetched vs. given address


def test_redirect_to_another_scheme_is_refused(kompl, server):
    url = server.redirect("/to-file", "file:///etc/passwd")
    report = ingest_json(kompl, url, "--allow-private", code=1)
    assert report["failed"][0]["code"] == "bad_url"


def test_redirect_loop_stops(kompl, server, monkeypatch):
    monkeypatch.setenv("KOMPL_FETCH_MAX_REDIRECTS", "3")
    url = server.redirect("/a", "/b")
    server.redirect("/b", "/a")
    report = ingest_json(kompl, url, "--allow-private", code=1)
    assert "redirected more than 3 times" in report["failed"][0]["error"]
    assert server.hits["/a"] + server.hits["/b"] == 4


def test_stalled_server_times_out(kompl, server, monkeypatch):
    monkeypatch.setenv("KOMPL_FETCH_TIMEOUT_S", "0.5")

    def stall(handler):
        server.stop.wait(10)  # never answers while the test runs

    def trickle(handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.end_headers()
        for _ in range(100):  # one byte every 0.1 s: each read is quick, the whole fetch is not
            if server.stop.wait(0.1):
                return
            handler.wfile.write(b"x")
            handler.wfile.flush()

    server.routes["/stall"] = stall
    server.routes["/trickle"] = trickle
    started = time.monotonic()
    report = ingest_json(kompl, server.url("/stall"), server.url("/trickle"), "--allow-private", code=1)
    elapsed = time.monotonic() - started
    assert [f["code"] for f in report["failed"]] == ["timeout", "timeout"]
    assert "timed out after 0.5 s" in report["failed"][0]["error"]
    assert "took longer than 0.5 s" in report["failed"][1]["error"]
    assert elapsed < 4


def test_streamed_response_over_the_cap_is_cut_off(kompl, ws, server, monkeypatch):
    monkeypatch.setenv("KOMPL_MAX_INPUT_MB", "0.01")  # 10 KB
    sent = []

    def endless(handler):  # HTTP/1.0, no Content-Length: the body ends when the server closes
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.end_headers()
        try:
            for _ in range(1000):
                handler.wfile.write(b"y" * 4096)
                sent.append(4096)
        except OSError:
            pass  # the client hung up, as it should

    server.routes["/endless"] = endless
    server.page("/declared", "z" * 20_000, content_type="text/plain")
    report = ingest_json(kompl, server.url("/endless"), server.url("/declared"), "--allow-private", code=1)
    endless_fail, declared_fail = report["failed"]
    assert endless_fail["code"] == "too_large" and "larger than the 0.01 MB limit" in endless_fail["error"]
    assert "so far" in endless_fail["error"]
    assert declared_fail["code"] == "too_large" and "20.0 KB" in declared_fail["error"]
    assert sum(sent) < 4_000_000  # it stopped reading long before the server was done
    assert list(ws.raw_dir.glob("*.md.gz")) == []


@pytest.mark.parametrize("status, words", [(404, "HTTP 404 Not Found"), (500, "HTTP 500")])
def test_http_errors(kompl, server, status, words):
    url = server.page("/x", "nope", status=status)
    report = ingest_json(kompl, url, "--allow-private", code=1)
    assert report["failed"][0]["code"] == "http_error" and words in report["failed"][0]["error"]


def test_connection_refused(kompl):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    report = ingest_json(kompl, f"http://127.0.0.1:{port}/", "--allow-private", code=1)
    assert report["failed"][0]["code"] == "network"


def test_retry_keeps_allow_private(kompl, conn, server):
    url = server.page("/flaky", "down", status=503)
    ingest_json(kompl, url, "--allow-private", code=1)
    ingest_json(kompl, "--retry-failed", code=1)  # still down: failing again keeps the option too
    assert server.hits["/flaky"] == 2
    server.page("/flaky", f"<p>up again {token()}</p>")
    report = ingest_json(kompl, "--retry-failed")  # the retry needs no flag repeated
    assert len(report["ingested"]) == 1
    assert conn.execute("SELECT COUNT(*) FROM ingest_failures WHERE resolved_at IS NULL").fetchone()[0] == 0


def test_blocked_url_can_be_retried_with_allow_private(kompl, conn, server):
    url = server.page("/local", f"<p>{token()}</p>")
    ingest_json(kompl, url, code=1)
    assert server.hits["/local"] == 0
    report = ingest_json(kompl, "--retry-failed", "--allow-private")
    assert len(report["ingested"]) == 1 and server.hits["/local"] == 1


def test_allow_private_from_settings(kompl, ws, server):
    (ws.root / "kompl.toml").write_text("allow_private_urls = true\n")
    url = server.page("/ok", f"<p>{token()}</p>")
    assert len(ingest_json(kompl, url)["ingested"]) == 1


def test_markitdown_is_never_handed_a_url(kompl, server, monkeypatch):
    import markitdown

    def refuse(*args, **kwargs):
        raise AssertionError("markitdown was asked to fetch")

    monkeypatch.setattr(markitdown.MarkItDown, "convert_uri", refuse)
    monkeypatch.setattr(markitdown.MarkItDown, "convert_url", refuse, raising=False)
    monkeypatch.setattr(markitdown.MarkItDown, "convert_response", refuse)
    url = server.page("/page", f"<html><body>{token()}</body></html>")
    assert len(ingest_json(kompl, url, "--allow-private")["ingested"]) == 1
