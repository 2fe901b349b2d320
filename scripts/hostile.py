"""A hostile but legitimate client against a running `flightdeck serve`, on loopback
only, every loop bounded in count and time. Run by scripts/test-hostile.sh, which starts
the daemon (with and without TLS) and passes its URL, tokens and pid.

Each probe repeats one of issue 38's findings and asserts the behaviour that fixed it:
- silent TCP connections and a slow-loris set hold up no other client (/healthz answers
  well within the header timeout, which is how long a held-up client would wait);
- connections past the caps are closed at once, the daemon's file descriptors stay
  bounded, and another address is still served;
- a slow-loris is closed at the header timeout;
- unread event streams are capped per token and bounded in memory, which comes back;
- two parallel 15 MB applies leave /healthz answering in well under the time they take
  (a parse on the async workers would hold it up for about as long);
- every error answer is the API's error JSON, checked against the OpenAPI document.
"""

import argparse
import concurrent.futures
import http.client
import json
import os
import socket
import ssl
import sys
import threading
import time
import urllib.parse

ARGS = None
RESULTS = []


def log(msg):
    print(msg, flush=True)


def ok(what):
    RESULTS.append(what)
    log(f"ok: {what}")


def fail(what):
    log(f"FAIL: {what}")
    sys.exit(1)


def host_port():
    u = urllib.parse.urlsplit(ARGS.url)
    return u.hostname, u.port


def tls_context():
    ctx = ssl.create_default_context(cafile=ARGS.ca) if ARGS.ca else None
    return ctx


def connect(source="127.0.0.1", timeout=5.0):
    """A raw connection (TLS when the daemon speaks it), bound to `source`."""
    host, port = host_port()
    s = socket.create_connection((host, port), timeout=timeout, source_address=(source, 0))
    if ARGS.ca:
        s = tls_context().wrap_socket(s, server_hostname="localhost")
    return s


def request(method, path, body=None, headers=None, token="admin", source="127.0.0.1", timeout=10.0):
    """One request on a new connection: (status, headers, body bytes, seconds)."""
    host, port = host_port()
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + (ARGS.admin if token == "admin" else ARGS.viewer)
    start = time.monotonic()
    if ARGS.ca:
        c = http.client.HTTPSConnection(host, port, timeout=timeout, context=tls_context(),
                                        source_address=(source, 0))
    else:
        c = http.client.HTTPConnection(host, port, timeout=timeout, source_address=(source, 0))
    try:
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data, time.monotonic() - start
    finally:
        c.close()


def held_up_bound():
    """Seconds past which /healthz counts as held up: a client held up by a silent or
    slow-loris connection would wait until the header timeout closes it, so a bound under
    that tells the two apart on a busy machine too (CI runs this beside other suites on
    two cores, where a healthy answer has taken over a second)."""
    return max(1.0, ARGS.header_timeout - 1.0)


def healthz_worst(source="127.0.0.1", n=5):
    worst = 0.0
    for _ in range(n):
        status, _, _, took = request("GET", "/healthz", token=None, source=source, timeout=10)
        if status != 200:
            fail(f"/healthz answered {status}")
        worst = max(worst, took)
    return worst


def rss_mb():
    with open(f"/proc/{ARGS.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_fds():
    return len(os.listdir(f"/proc/{ARGS.pid}/fd"))


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def silent_and_slowloris():
    """Three silent TCP connections and a slow-loris set do not hold up /healthz."""
    host, port = host_port()
    silent = [socket.create_connection((host, port), timeout=5) for _ in range(3)]
    loris = []
    for _ in range(ARGS.loris):
        s = connect()
        s.sendall(b"GET /api/v1/clusters HTTP/1.1\r\nHost: x\r\n")
        loris.append(s)
    stop = threading.Event()

    def dribble():
        # One header byte a second: each connection stays just alive.
        while not stop.wait(1.0):
            for s in loris:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass

    t = threading.Thread(target=dribble, daemon=True)
    t.start()
    time.sleep(0.5)
    worst = healthz_worst()
    if worst >= held_up_bound():
        fail(f"/healthz took {worst:.2f}s with 3 silent connections and {ARGS.loris} slow-loris open (bound {held_up_bound():.0f}s)")
    ok(f"/healthz in {worst * 1000:.0f} ms (worst of 5) with 3 silent connections and {ARGS.loris} slow-loris open")
    # The slow-loris are closed at the header timeout, however they dribble.
    deadline = time.monotonic() + ARGS.header_timeout + 5
    while time.monotonic() < deadline:
        alive = 0
        for s in loris:
            try:
                s.sendall(b"X")
                alive += 1
            except OSError:
                pass
        if alive == 0:
            break
        time.sleep(0.5)
    stop.set()
    if alive:
        fail(f"{alive} slow-loris connections still open {ARGS.header_timeout + 5}s after they started")
    ok(f"every slow-loris connection closed by the header timeout ({ARGS.header_timeout}s)")
    close_all(silent + loris)


def connection_caps():
    """Past the per-address cap, connections are closed at once; fds stay bounded;
    another address is still served."""
    host, port = host_port()
    before = open_fds()
    flood = []
    refused = 0
    for _ in range(ARGS.flood):
        try:
            flood.append(socket.create_connection((host, port), timeout=5))
        except OSError:
            refused += 1
    # A connection the daemon closed at once reads as EOF (or a reset). The daemon
    # accepts them as fast as the machine lets it: they are counted until all past the
    # cap are closed, for at most 10 s (an open one past the cap never closes by itself:
    # the idle timeout is longer).
    want = ARGS.flood - ARGS.per_address - refused
    deadline = time.monotonic() + 10
    shut = set()
    while True:
        time.sleep(0.5)
        for i, s in enumerate(flood):
            if i in shut:
                continue
            s.settimeout(0.0)
            try:
                if s.recv(1) == b"":
                    shut.add(i)
            except BlockingIOError:
                pass
            except OSError:
                shut.add(i)
        if len(shut) >= want or time.monotonic() > deadline:
            break
    closed = len(shut)
    fds = open_fds()
    if fds - before > ARGS.per_address + 16:
        fail(f"the daemon holds {fds} file descriptors ({before} before {ARGS.flood} idle connections); the per-address cap is {ARGS.per_address}")
    if closed < ARGS.flood - ARGS.per_address - refused:
        fail(f"only {closed} of {ARGS.flood} idle connections from one address were closed; the cap is {ARGS.per_address}")
    ok(f"{ARGS.flood} idle connections from 127.0.0.1: {closed} closed at once, the daemon holds {fds} fds ({before} before)")
    worst = healthz_worst(source="127.0.0.2")
    if worst >= held_up_bound():
        fail(f"/healthz from 127.0.0.2 took {worst:.2f}s while 127.0.0.1 floods (bound {held_up_bound():.0f}s)")
    ok(f"/healthz from another address in {worst * 1000:.0f} ms while one address is at its cap")
    close_all(flood)
    time.sleep(0.5)
    worst = healthz_worst()
    if worst >= held_up_bound():
        fail(f"/healthz from the flooding address took {worst:.2f}s after its connections closed (bound {held_up_bound():.0f}s)")
    ok("the flooding address is served again once its connections close")


def follow_stream(token, source="127.0.0.1"):
    """Opens a follow stream and never reads it: (socket, status line)."""
    s = connect(source=source, timeout=10)
    tok = ARGS.admin if token == "admin" else ARGS.viewer
    s.sendall(
        f"GET /api/v1/events?follow=true&limit=1000 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tok}\r\n\r\n".encode()
    )
    s.settimeout(10)
    head = b""
    while b"\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            break
        head += chunk
    return s, head.decode(errors="replace").strip()


def unread_streams():
    """600 follow streams that never read: capped per token, memory bounded and back."""
    status, _, body, _ = request("GET", "/api/v1/events?follow=true&limit=10000", token="viewer")
    if status != 422:
        fail(f"a follow stream asking for 10,000 events of history answered {status}, not 422")
    ok("a follow stream's history above 1,000 events is refused (422, names `limit`)")
    base = rss_mb()
    socks, accepted, refused = [], 0, 0
    for i in range(ARGS.streams):
        # From eight addresses, so that the per-address cap is not what refuses them.
        s, line = follow_stream("viewer" if i % 2 else "admin", f"127.0.0.{10 + i % 8}")
        if " 200 " in line:
            accepted += 1
        elif " 429 " in line:
            refused += 1
        else:
            fail(f"follow stream {i}: {line!r}")
        socks.append(s)
    peak = rss_mb()
    if accepted > 2 * ARGS.streams_per_token:
        fail(f"{accepted} follow streams accepted for two tokens; the cap is {ARGS.streams_per_token} each")
    if peak - base > ARGS.rss_bound_mb:
        fail(f"{ARGS.streams} unread follow streams took RSS from {base:.0f} to {peak:.0f} MB (bound: +{ARGS.rss_bound_mb} MB)")
    ok(f"{ARGS.streams} unread follow streams: {accepted} accepted, {refused} refused (429); RSS {base:.0f} -> {peak:.0f} MB (bound +{ARGS.rss_bound_mb})")
    close_all(socks)
    # The daemon frees the streams as it notices them closed: on a busy machine that may
    # take a few seconds.
    deadline = time.monotonic() + 10
    while True:
        time.sleep(1.0)
        after = rss_mb()
        if after - base <= ARGS.rss_back_mb or time.monotonic() > deadline:
            break
    if after - base > ARGS.rss_back_mb:
        fail(f"RSS {after:.0f} MB after the streams closed, {base:.0f} before (bound +{ARGS.rss_back_mb} MB)")
    s, line = follow_stream("viewer")
    if " 200 " not in line:
        fail(f"a new follow stream after the others closed: {line!r}")
    s.close()
    ok(f"after they close: RSS {after:.0f} MB (bound +{ARGS.rss_back_mb} over {base:.0f}), and a token may follow again")


def big_spec():
    """15 MB of YAML that takes seconds to parse (a flow sequence of 7.8 million numbers
    under a field the daemon refuses): on the server's async workers, two of them would
    hold up every other request for as long."""
    head = "apiVersion: flightdeck.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: big\nspec:\n  x: ["
    n = (15 * 1024 * 1024) // 2
    return (head + "1," * n + "1]\n").encode()


def parallel_big_applies():
    body = big_spec()
    worst = [0.0]
    done = threading.Event()

    def probe():
        while not done.is_set():
            _, _, _, took = request("GET", "/healthz", token=None)
            worst[0] = max(worst[0], took)
            time.sleep(0.1)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(request, "POST", "/api/v1/clusters", body,
                               {"Content-Type": "application/yaml"}, "admin", "127.0.0.1", 120)
                   for _ in range(2)]
        answers = [f.result() for f in futures]
    done.set()
    t.join()
    for status, _, data, took in answers:
        if status != 422:
            fail(f"a 15 MB apply answered {status}: {data[:200]!r}")
    # Parsed on the async workers, the two applies would hold /healthz up for about as long
    # as the shorter of them takes; on a busy machine both take longer, so the bound does too.
    bound = max(1.0, min(a[3] for a in answers) / 2)
    if worst[0] >= bound:
        fail(f"/healthz took {worst[0]:.2f}s during two parallel 15 MB applies (bound {bound:.1f}s, half the shorter apply)")
    ok(f"two parallel 15 MB applies ({answers[0][3]:.1f}s, {answers[1][3]:.1f}s, each 422): /healthz worst {worst[0] * 1000:.0f} ms")


def error_answers():
    """Every error answer is the API's error JSON, valid against the OpenAPI document."""
    import jsonschema

    status, _, doc, _ = request("GET", "/api/v1/openapi.json")
    openapi = json.loads(doc)
    schemas = openapi["components"]["schemas"]
    schema = dict(schemas["ApiError"])
    schema["components"] = {"schemas": schemas}

    def resolve(node):
        if isinstance(node, dict):
            if "$ref" in node:
                return resolve(schemas[node["$ref"].split("/")[-1]])
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    schema = resolve(schemas["ApiError"])
    cases = [
        ("no token", "GET", "/api/v1/clusters", None, {}, None, 401),
        ("an unknown token", "GET", "/api/v1/clusters", None, {"Authorization": "Bearer nope"}, "raw", 401),
        ("a viewer's write", "POST", "/api/v1/clusters", b"x", {"Content-Type": "application/yaml"}, "viewer", 403),
        ("an unknown route", "GET", "/api/v1/nothing", None, {}, "admin", 404),
        ("an unknown cluster", "GET", "/api/v1/clusters/nope", None, {}, "admin", 404),
        ("a method not allowed", "PUT", "/api/v1/clusters", b"", {}, "admin", 405),
        ("a bad query string", "GET", "/api/v1/events?limit=abc", None, {}, "admin", 400),
        ("bad UTF-8", "POST", "/api/v1/clusters", b"\xff\xfe\xfd", {"Content-Type": "application/yaml"}, "admin", 400),
        ("a form body", "POST", "/api/v1/clusters", b"a=b", {"Content-Type": "application/x-www-form-urlencoded"}, "admin", 415),
        ("a body over the limit", "POST", "/api/v1/clusters", b"#" * (17 * 1024 * 1024), {"Content-Type": "application/yaml"}, "admin", 413),
        ("a bad spec", "POST", "/api/v1/clusters", b"kind: Cluster\n", {"Content-Type": "application/yaml"}, "admin", 422),
    ]
    for what, method, path, body, headers, token, want in cases:
        h = dict(headers)
        tok = token if token in ("admin", "viewer") else None
        status, rh, data, _ = request(method, path, body, h, tok)
        if status != want:
            fail(f"{what}: {method} {path} answered {status}, not {want}: {data[:200]!r}")
        if not rh.get("content-type", "").startswith("application/json"):
            fail(f"{what}: answered {rh.get('content-type')!r}, not the error JSON")
        try:
            jsonschema.validate(json.loads(data), schema)
        except Exception as e:  # noqa: BLE001: any failure is the finding
            fail(f"{what}: the answer is not an ApiError: {e}: {data[:200]!r}")
        if path.startswith("/api/") and rh.get("cache-control") != "no-store":
            fail(f"{what}: no `Cache-Control: no-store`")
        if want == 401:
            if "bearer" not in rh.get("www-authenticate", "").lower():
                fail(f"{what}: a 401 without `WWW-Authenticate: Bearer`")
            if "/" in json.loads(data)["error"].replace("Authorization: Bearer", ""):
                fail(f"{what}: the 401 names a path: {data!r}")
        if ARGS.ca and "strict-transport-security" not in rh:
            fail(f"{what}: no HSTS under TLS")
    ok(f"{len(cases)} error answers (401, 403, 404, 405, 400, 413, 415, 422) are ApiError JSON by the OpenAPI schema, never cached")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--admin", required=True)
    p.add_argument("--viewer", required=True)
    p.add_argument("--pid", required=True, type=int)
    p.add_argument("--ca")
    p.add_argument("--header-timeout", type=float, required=True)
    p.add_argument("--per-address", type=int, required=True)
    p.add_argument("--streams-per-token", type=int, required=True)
    p.add_argument("--loris", type=int, default=100)
    p.add_argument("--flood", type=int, default=2000)
    p.add_argument("--streams", type=int, default=600)
    p.add_argument("--rss-bound-mb", type=float, default=100)
    p.add_argument("--rss-back-mb", type=float, default=60)
    p.add_argument("--only", default="")
    ARGS = p.parse_args()
    probes = {
        "errors": error_answers,
        "silent": silent_and_slowloris,
        "caps": connection_caps,
        "streams": unread_streams,
        "applies": parallel_big_applies,
    }
    for name, probe in probes.items():
        if ARGS.only and name not in ARGS.only.split(","):
            continue
        log(f"== {name}")
        probe()
    log(f"{len(RESULTS)} passed, 0 failed")


if __name__ == "__main__":
    main()
