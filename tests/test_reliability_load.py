"""Load (issue 15): the real `pamir serve` on loopback, over a small index of generated
pictures, under concurrent clients doing searches, thumbnails, explanations and uploads.

Every request must get its 200: no 5xx, no refused or dropped connection, nothing in the
server's log. p50 / p99 latencies are printed (and recorded for the benchmark), never
asserted. The server's resident memory after N2 requests must stay within a bound of what it
was after N1 (the issue: 10,000 within 10 % of 1,000; here by default 600 within 25 % of
150, so a shared CI machine does not make it flaky; benchmarks/bench_reliability.py runs the
issue's figures). Knobs: PAMIR_RELIABILITY_LOAD_{SECONDS,CLIENTS,N1,N2,RSS_TOLERANCE,CAP_SECONDS}.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import random
import signal
import threading
import time
from urllib.parse import urlencode

import numpy as np
import pytest

from conftest import free_port, pamir_command

SECONDS = float(os.environ.get("PAMIR_RELIABILITY_LOAD_SECONDS", "4"))
CLIENTS = int(os.environ.get("PAMIR_RELIABILITY_LOAD_CLIENTS", "50"))
N1 = int(os.environ.get("PAMIR_RELIABILITY_LOAD_N1", "150"))
N2 = int(os.environ.get("PAMIR_RELIABILITY_LOAD_N2", "600"))
RSS_TOLERANCE = float(os.environ.get("PAMIR_RELIABILITY_LOAD_RSS_TOLERANCE", "0.25"))
#: The run goes on past SECONDS until N2 requests are answered, but never past this.
CAP_SECONDS = float(os.environ.get("PAMIR_RELIABILITY_LOAD_CAP_SECONDS",
                                   max(4 * SECONDS, SECONDS + 60)))
#: What a client asks for, and how often.
MIX = [("search", 0.50), ("thumbnail", 0.20), ("explain", 0.12), ("annotate", 0.10),
       ("similar", 0.08)]


def _png(seed: int) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    a = np.clip(rng.normal(rng.uniform(30, 220, 3), 20, (40, 56, 3)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, "PNG")
    return buf.getvalue()


def _rss(pid: int) -> int:
    import psutil

    return psutil.Process(pid).memory_info().rss


@pytest.fixture(scope="module", params=["loopback", "tokens"])
def server(request, tiny_system, fork_server, tmp_path_factory):
    """A `pamir serve` child process over an index of the tiny system's 60 pictures: on
    127.0.0.1 as before, or (issue 28) off loopback on 127.0.0.2 with tokens, every client
    sending the editor's (the clients are one address: its upload limit is lifted).
    (host, port, pid, log file, headers)."""
    _, model, pictures, _ = tiny_system
    root = tmp_path_factory.mktemp("load")
    ix = root / "ix"
    status, log = fork_server.run(["index", model, pictures, "--index", ix])
    assert status == 0, log
    host, options, headers = "127.0.0.1", [], {}
    if request.param == "tokens":
        from pamir.server.sharing import load_or_create_tokens

        host, token_file = "127.0.0.2", root / "tokens.json"
        tokens, _ = load_or_create_tokens(token_file)
        options = ["--host", host, "--token-file", token_file, "--uploads-per-minute", "0"]
        headers = {"authorization": f"Bearer {tokens['editor']}"}
    port = free_port()
    log_path = root / "serve.log"
    with open(log_path, "wb") as log_file:
        proc = pamir_command("serve", "--index", ix, "--model", model, "--port", port,
                             *options, stdout=log_file, stderr=log_file)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log_path.read_text(errors="replace")
            try:
                c = http.client.HTTPConnection(host, port, timeout=5)
                c.request("GET", "/api/status", headers=headers)
                if c.getresponse().status == 200:
                    c.close()
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "pamir serve did not answer in 120 s"
            time.sleep(0.2)
        yield host, port, proc.pid, log_path, headers
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except Exception:  # noqa: BLE001
            proc.kill()
            proc.wait()


class Client:
    """One keep-alive HTTP connection; a request's (status, body, seconds). `server` is the
    fixture's (host, port, ...); its headers go with every request."""

    def __init__(self, server):
        self.host, self.port, *_, self.headers = server
        self.conn = None

    def request(self, method, path, body=None, headers=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        t0 = time.perf_counter()
        try:
            self.conn.request(method, path, body=body, headers={**self.headers,
                                                                **(headers or {})})
            r = self.conn.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise
        return r.status, data, time.perf_counter() - t0


def _get_json(server, path):
    status, data, _ = Client(server).request("GET", path)
    assert status == 200, (path, status, data[:300])
    return json.loads(data)


def test_concurrent_clients_get_no_errors_and_memory_stays_flat(server):
    _, _, pid, log_path, _ = server
    words = _get_json(server, "/api/vocabulary")["words"]
    ids = [h["id"] for h in _get_json(server, "/api/search?" + urlencode(
        {"q": " ".join(words), "k": 1000}))["hits"]]
    assert len(ids) == 60 and len(words) >= 4
    uploads = [_png(s) for s in range(16)]
    warm = Client(server)  # the model is loaded on the first upload or explanation
    for method, path, body in [("POST", "/api/annotate", uploads[0]),
                               ("GET", f"/api/pictures/{ids[0]}/explain?q={words[0]}", None)]:
        status, data, _ = warm.request(method, path, body,
                                       {"content-type": "image/png"} if body else None)
        assert status == 200, (path, status, data[:300])

    lock = threading.Lock()
    done = [0]
    latencies: dict[str, list[float]] = {kind: [] for kind, _ in MIX}
    errors: list[tuple] = []
    rss: dict[str, tuple[int, int]] = {}
    rss_start = _rss(pid)
    stop = threading.Event()
    t_start = time.perf_counter()

    def client(seed: int):
        rng = random.Random(seed)
        c = Client(server)
        kinds, weights = zip(*MIX)
        while not stop.is_set():
            kind = rng.choices(kinds, weights)[0]
            body, headers, method = None, None, "GET"
            if kind == "search":
                q = " ".join(rng.sample(words, rng.choice([1, 1, 2, 3])))
                path = "/api/search?" + urlencode({"q": q, "k": rng.choice([10, 24, 60])})
            elif kind == "thumbnail":
                path = (f"/api/pictures/{rng.choice(ids)}/thumbnail?"
                        f"size={rng.choice([64, 128, 256, 512])}")
            elif kind == "explain":
                path = f"/api/pictures/{rng.choice(ids)}/explain?" + urlencode(
                    {"q": " ".join(rng.sample(words, rng.choice([1, 2])))})
            else:
                method, body = "POST", rng.choice(uploads)
                headers = {"content-type": "image/png"}
                path = f"/api/{kind}?k={rng.choice([5, 10])}"
            try:
                status, data, seconds = c.request(method, path, body, headers)
            except Exception as e:  # noqa: BLE001 - a refused or dropped connection
                with lock:
                    errors.append((kind, path, f"{type(e).__name__}: {e}"))
                continue
            with lock:
                if status != 200:
                    errors.append((kind, path, status, data[:200]))
                else:
                    latencies[kind].append(seconds)
                done[0] += 1
                n = done[0]
            if n == N1 or n == N2:
                r = _rss(pid)
                with lock:
                    rss[f"n{n}"] = (n, r)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for th in threads:
        th.start()
    while True:
        time.sleep(0.05)
        elapsed = time.perf_counter() - t_start
        if (elapsed >= SECONDS and done[0] >= N2) or elapsed >= CAP_SECONDS:
            break
    stop.set()
    for th in threads:
        th.join(timeout=120)
    elapsed = time.perf_counter() - t_start
    rss_end = _rss(pid)

    every = sorted(s for v in latencies.values() for s in v)

    def pct(v, p):
        return round(1000 * float(np.percentile(v, p)), 1) if v else None

    result = {"server": "127.0.0.2 with tokens" if server[4] else "127.0.0.1",
              "clients": CLIENTS, "seconds": round(elapsed, 1), "requests": done[0],
              "requests_per_second": round(done[0] / elapsed, 1), "errors": len(errors),
              "p50_ms": pct(every, 50), "p99_ms": pct(every, 99),
              "per_kind": {k: {"requests": len(v), "p50_ms": pct(v, 50), "p99_ms": pct(v, 99)}
                           for k, v in latencies.items()},
              "rss_mb": {"start": round(rss_start / 2**20, 1),
                         **{f"after_{n}": round(r / 2**20, 1) for n, r in rss.values()},
                         "end": round(rss_end / 2**20, 1)},
              "rss_tolerance": RSS_TOLERANCE}
    print("\nload:", json.dumps(result, indent=1))
    from conftest import record

    record("load" if not server[4] else "load_tokens", result)
    log = log_path.read_text(errors="replace")
    assert not errors, f"{len(errors)} of {done[0]} requests failed: {errors[:5]}"
    assert "Traceback" not in log and "Exception" not in log, log[-3000:]
    assert f"n{N1}" in rss and f"n{N2}" in rss, (
        f"only {done[0]} requests in {elapsed:.0f} s: {N2} needed for the memory check")
    before, after = rss[f"n{N1}"][1], rss[f"n{N2}"][1]
    assert after <= before * (1 + RSS_TOLERANCE), (
        f"resident memory grew from {before / 2**20:.1f} MB after {N1} requests to "
        f"{after / 2**20:.1f} MB after {N2}: over {RSS_TOLERANCE:.0%}")


def test_picture_ids_beyond_64_bits_are_404(server):
    """Found by the benchmark's longer schemathesis run: an id over SQLite's 64-bit integers
    was an OverflowError in the catalogue, a 500."""
    log_path = server[3]
    c = Client(server)
    for pid in (2**63, -(2**63) - 1, 10**30):
        for path in (f"/api/pictures/{pid}", f"/api/pictures/{pid}/similar",
                     f"/api/pictures/{pid}/thumbnail", f"/api/pictures/{pid}/explain?q=red"):
            status, data, _ = c.request("GET", path)
            assert status == 404, (path, status, data[:300])
    assert "Traceback" not in log_path.read_text(errors="replace")
