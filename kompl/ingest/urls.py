"""URL inputs: normalization for dedup, address checks, and a bounded fetch.

markitdown is never given a URL string: it fetches with no timeout. kompl
fetches itself, refusing non-public addresses (checked after DNS resolution and
again on every redirect hop), with a timeout, a redirect limit and a streamed
size cap, then hands the bytes to the converter.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from kompl.errors import IngestError

USER_AGENT = "kompl/0.1 (+knowledge compiler; single-page fetch)"
DEFAULT_PORTS = {"http": 80, "https": 443}
# Query parameters that only track the click and never change the page.
TRACKING_PARAMS = {
    "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "mc_cid", "mc_eid", "igshid",
    "yclid", "_hsenc", "_hsmi", "mkt_tok", "ref_src", "ref_url", "spm", "si",
}
TRACKING_PREFIXES = ("utm_", "pk_", "vero_", "oly_")


def normalize_url(url: str) -> str:
    """Canonical form for dedup: lower-case scheme and host, no default port, no
    fragment, no tracking parameters, sorted query, no trailing slash (except the root)."""
    try:
        return _normalize(url)
    except ValueError as exc:  # a bad port or IPv6 literal
        raise IngestError("bad_url", f"Not a valid URL: {url} ({exc})") from None


def _normalize(url: str) -> str:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower().rstrip(".")
    if host and ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    path = parts.path or "/"
    if len(path) > 1:
        path = path.rstrip("/") or "/"
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k.lower() not in TRACKING_PARAMS and not k.lower().startswith(TRACKING_PREFIXES)
    ]
    return urlunsplit((scheme, netloc, path, urlencode(sorted(query)), ""))


def is_url(text: str) -> bool:
    return text.lower().startswith(("http://", "https://"))


def address_allowed(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True for globally routable unicast addresses; False for loopback, private,
    link-local (cloud metadata 169.254.169.254), shared, reserved and multicast."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def resolve(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise IngestError("dns", f"Could not resolve host {host!r}: {exc}", hint="check the URL and your connection") from None
    return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]


def check_url(url: str, allow_private: bool) -> None:
    """Refuse anything but http(s) to public addresses (unless allow_private)."""
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError as exc:
        raise IngestError("bad_url", f"Not a valid URL: {url} ({exc})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise IngestError("bad_url", f"Only http and https URLs can be ingested, not {parts.scheme or 'this'}: {url}")
    if not hostname:
        raise IngestError("bad_url", f"The URL has no host: {url}")
    try:
        port = parts.port or DEFAULT_PORTS[parts.scheme.lower()]
    except ValueError:
        raise IngestError("bad_url", f"The URL has an invalid port: {url}") from None
    if allow_private:
        return
    for ip in resolve(hostname, port):
        if not address_allowed(ip):
            raise IngestError(
                "blocked_address",
                f"Refused to fetch {url}: {hostname} resolves to {ip}, a non-public address "
                "(loopback, private, link-local or metadata)",
                hint="pass --allow-private if you really mean to fetch from your own network",
            )


@dataclass
class Fetched:
    url: str  # final URL after redirects
    content: bytes
    mimetype: str | None
    charset: str | None
    status: int


def fetch(url: str, *, timeout_s: float, max_bytes: int, max_redirects: int, allow_private: bool) -> Fetched:
    """GET `url` with every hop checked, a total deadline and a streamed size cap."""
    import httpx

    deadline = time.monotonic() + timeout_s
    current = url
    with httpx.Client(follow_redirects=False, trust_env=False, timeout=httpx.Timeout(timeout_s)) as client:
        for _hop in range(max_redirects + 1):
            check_url(current, allow_private)
            try:
                with client.stream("GET", current, headers={"User-Agent": USER_AGENT, "Accept": "*/*"}) as resp:
                    if not allow_private:
                        _check_peer(current, resp)
                    if resp.is_redirect:
                        location = resp.headers.get("location")
                        if not location:
                            raise IngestError("http_error", f"{current} redirected without a Location header")
                        current = urljoin(current, location)
                        continue
                    if resp.status_code >= 400:
                        raise IngestError(
                            "http_error",
                            f"{current} answered HTTP {resp.status_code} {resp.reason_phrase}",
                            hint="check the address; retry later with `kompl ingest --retry-failed`",
                        )
                    declared = resp.headers.get("content-length")
                    if declared and declared.isdigit() and int(declared) > max_bytes:
                        raise _too_large(current, int(declared), max_bytes)
                    chunks, size = [], 0
                    for chunk in resp.iter_bytes():
                        size += len(chunk)
                        if size > max_bytes:
                            raise _too_large(current, size, max_bytes)
                        if time.monotonic() > deadline:
                            raise IngestError("timeout", f"Fetching {current} took longer than {timeout_s:g} s", hint="retry later, or raise fetch_timeout_s")
                        chunks.append(chunk)
                    content_type = resp.headers.get("content-type", "")
                    mimetype = content_type.split(";")[0].strip().lower() or None
                    charset = resp.charset_encoding
                    return Fetched(str(resp.url), b"".join(chunks), mimetype, charset, resp.status_code)
            except httpx.TimeoutException:
                raise IngestError("timeout", f"Fetching {current} timed out after {timeout_s:g} s", hint="retry later with `kompl ingest --retry-failed`") from None
            except httpx.HTTPError as exc:
                raise IngestError("network", f"Could not fetch {current}: {exc.__class__.__name__}: {exc}", hint="check the URL and your connection, then retry with `kompl ingest --retry-failed`") from None
    raise IngestError("http_error", f"{url} redirected more than {max_redirects} times")


def _check_peer(url: str, resp) -> None:
    """Check the address actually connected to: DNS may answer differently the second
    time (DNS rebinding), so a checked name could still lead to a private address.
    Nothing of such a response is read or kept."""
    stream = resp.extensions.get("network_stream")
    peer = stream.get_extra_info("server_addr") if stream is not None else None
    if not peer:
        return
    ip = ipaddress.ip_address(str(peer[0]).split("%")[0])
    if not address_allowed(ip):
        raise IngestError(
            "blocked_address",
            f"Refused to fetch {url}: the connection went to {ip}, a non-public address "
            "(the host's DNS answer changed after it was checked)",
            hint="pass --allow-private if you really mean to fetch from your own network",
        )


def _too_large(url: str, size: int, cap: int) -> IngestError:
    from kompl.ingest.convert import human_size, limit_text

    return IngestError(
        "too_large",
        f"{url} is larger than {limit_text(cap)} ({human_size(size)} so far)",
        hint="raise max_input_mb in kompl.toml if you need it",
    )
