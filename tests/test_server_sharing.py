"""A server a household can share (issue 28): tokens off loopback, viewers and editors,
--read-only, per-client limits, upload limits, and the OpenAPI schema fuzzed for each role.

The servers here are real uvicorn servers bound to 127.0.0.2 (off loopback as far as pamir is
concerned); clients connect from other loopback addresses (127.0.0.3, ...) so that each is
its own client for the per-client limits.
"""

from __future__ import annotations

import io
import os
import stat
import time

import httpx
import pytest
from PIL import Image

from pamir.server import create_app
from pamir.server.app import MAX_PIXELS
from pamir.server.duplicates import EDITOR_ROUTES as COPIES_EDITOR_ROUTES
from pamir.server.people import EDITOR_ROUTES as PEOPLE_EDITOR_ROUTES
from pamir.server.sharing import Sharing, TokenFileError, load_or_create_tokens
from conftest import free_port, serve_in_thread
from fakes import TOKENS, indexed_with_model

HOST = "127.0.0.2"
EXAMPLES = int(os.environ.get("PAMIR_RELIABILITY_EXAMPLES", "40"))
#: Wrong tokens one client tries (the benchmark: 1,000).
WRONG_TOKENS = int(os.environ.get("PAMIR_RELIABILITY_WRONG_TOKENS", "30"))
READ_ROUTES = ["/api/status", "/api/vocabulary", "/api/search?q=red",
               "/api/pictures/1", "/api/pictures/1/thumbnail", "/api/pictures/1/similar",
               "/api/pictures/1/explain?q=red", "/", "/static/app.js", "/docs",
               "/openapi.json"]
UPLOAD_ROUTES = ["/api/annotate", "/api/similar"]
EDITOR_ROUTES = ["/api/feedback", "/api/feedback/keep"]


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def _png(w=40, h=30, colour=(200, 20, 20)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), colour).save(buf, "PNG")
    return buf.getvalue()


class Clock:
    """A clock the test moves: the per-minute limits without waiting a minute."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def serve(app):
    """Run `app` on HOST in a thread; yields its base URL."""
    os.environ["PAMIR_EMBEDDINGS"] = "0"
    yield from serve_in_thread(app, HOST)


@pytest.fixture(scope="module")
def index_and_model(tmp_path_factory):
    return indexed_with_model(tmp_path_factory.mktemp("sharing"))


@pytest.fixture(scope="module")
def clock():
    return Clock()


@pytest.fixture(scope="module")
def shared(index_and_model, clock):
    """A server with tokens, 3 uploads a client a minute, 5 wrong tokens a client a minute,
    uploads up to 20,000 bytes and 100,000 pixels."""
    index_dir, model_dir, system = index_and_model
    sharing = Sharing(dict(TOKENS), uploads_per_minute=3, max_failed_attempts=5, clock=clock)
    app = create_app(index_dir, model_dir, system=system, sharing=sharing,
                     max_upload_bytes=20_000, max_pixels=100_000)
    yield from serve(app)
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS  # Pillow's limit is the process's: as it was


def client(base: str, source: str = "127.0.0.3", token: str | None = None) -> httpx.Client:
    """An HTTP client connecting from the loopback address `source` (its own client for the
    limits), with a bearer token if given."""
    return httpx.Client(base_url=base, transport=httpx.HTTPTransport(local_address=source),
                        headers={"authorization": f"Bearer {token}"} if token else {},
                        timeout=60, follow_redirects=False)


def _feedback():
    return {"q": "red", "right": [1], "wrong": []}  # a Keep of right marks only: 400


# ------------------------------------------------------------------------------- tokens
def test_without_a_token_every_route_is_401_the_page_saying_how_to_get_in(shared):
    with client(shared) as c:
        for path in READ_ROUTES:
            r = c.get(path)
            assert r.status_code == 401, (path, r.status_code)
            assert r.headers["www-authenticate"] == "Bearer"
        for path in UPLOAD_ROUTES:
            assert c.post(path, content=_png()).status_code == 401, path
        for path in EDITOR_ROUTES:
            assert c.post(path, json=_feedback()).status_code == 401, path
        page = c.get("/")
        assert "token" in page.text and "pamir serve" in page.text
        # not a bearer token, nor a token anywhere but the page's first visit
        for headers in ({"authorization": f"Basic {TOKENS['editor']}"},
                        {"x-token": TOKENS["editor"]}):
            assert c.get("/api/status", headers=headers).status_code == 401
        assert c.get("/api/status", params={"token": TOKENS["editor"]}).status_code == 401


def test_a_viewer_searches_views_and_annotates_but_cannot_teach(shared):
    with client(shared, "127.0.0.4", TOKENS["viewer"]) as c:
        for path in READ_ROUTES:
            r = c.get(path)
            assert r.status_code == 200, (path, r.status_code, r.text[:200])
        assert c.post("/api/annotate", content=_png()).status_code == 200
        for path in EDITOR_ROUTES:
            r = c.post(path, json=_feedback())
            assert r.status_code == 403 and "editor" in r.json()["detail"], (path, r.text)


def test_an_editor_passes_to_the_feedback_routes(shared):
    with client(shared, "127.0.0.5", TOKENS["editor"]) as c:
        assert c.get("/api/search", params={"q": "red"}).status_code == 200
        # through the access rules to the route itself, which wants a wrong mark too
        r = c.post("/api/feedback/keep", json=_feedback())
        assert r.status_code == 400 and "one wrong" in r.json()["detail"], r.text


def test_the_page_keeps_the_token_in_an_httponly_strict_cookie(shared):
    with client(shared, "127.0.0.6") as c:
        r = c.get("/", params={"token": TOKENS["viewer"], "q": "red"})
        assert r.status_code == 303
        assert r.headers["location"] == "/?q=red"  # the token leaves the URL
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert cookie.startswith(f"pamir_token={TOKENS['viewer']};")
        # httpx keeps the cookie: the page, its script and the API now answer
        for path in ("/", "/static/app.js", "/api/search?q=red"):
            assert c.get(path).status_code == 200, path
        assert c.post("/api/feedback", json=_feedback()).status_code == 403  # still a viewer
    with client(shared, "127.0.0.6") as c:  # a wrong token in the URL sets nothing
        r = c.get("/", params={"token": "not-the-token"})
        assert r.status_code == 401 and "set-cookie" not in r.headers


def test_wrong_tokens_are_limited_per_client_and_a_right_one_elsewhere_works(shared, clock):
    """A client that keeps guessing gets 429 (its right token too, for the rest of the
    minute); another client with a right token is served; a minute later, the first too."""
    statuses = []
    with client(shared, "127.0.0.7") as c:
        for i in range(WRONG_TOKENS):
            r = c.get("/api/status", headers={"authorization": f"Bearer guess-{i}"})
            statuses.append(r.status_code)
            assert f"guess-{i}" not in r.text  # never repeated back
        assert set(statuses[:5]) == {401} and set(statuses[5:]) == {429}, statuses
        assert "retry-after" in r.headers
        right = {"authorization": f"Bearer {TOKENS['viewer']}"}
        assert c.get("/api/status", headers=right).status_code == 429
        with client(shared, "127.0.0.8", TOKENS["viewer"]) as other:
            assert other.get("/api/status").status_code == 200
        clock.now += 61
        assert c.get("/api/status", headers=right).status_code == 200
    from conftest import record

    record("wrong_tokens", {"tried": WRONG_TOKENS, "limit_per_minute": 5,
                            "answered_401": statuses.count(401),
                            "answered_429": statuses.count(429),
                            "right_token_from_another_client": 200})


# ------------------------------------------------------------------------------- limits
def test_uploads_per_client_per_minute(shared, clock):
    clock.now += 61
    with client(shared, "127.0.0.9", TOKENS["viewer"]) as c:
        got = [c.post(UPLOAD_ROUTES[i % 2], content=_png()).status_code for i in range(5)]
        assert got == [200, 200, 200, 429, 429], got
        with client(shared, "127.0.0.10", TOKENS["viewer"]) as other:
            assert other.post("/api/annotate", content=_png()).status_code == 200
        clock.now += 61
        assert c.post("/api/annotate", content=_png()).status_code == 200


def test_upload_size_pixels_and_query_length_limits(shared, clock):
    clock.now += 61
    with client(shared, "127.0.0.11", TOKENS["viewer"]) as c:
        r = c.post("/api/annotate", content=_png() + b"\0" * 30_000)
        assert r.status_code == 413 and "20,000" in r.json()["detail"]
        r = c.post("/api/annotate", content=_png(400, 300))  # 120,000 pixels > 100,000
        assert r.status_code == 400 and "pixels" in r.json()["detail"], r.text
        r = c.get("/api/search", params={"q": "red " * 600})
        assert r.status_code == 400 and "2,000" in r.json()["detail"]
        assert c.get("/api/search", params={"q": "red " * 400}).status_code == 200


def test_read_only_refuses_keep_even_to_an_editor_and_on_loopback(index_and_model):
    from fastapi.testclient import TestClient

    index_dir, model_dir, system = index_and_model
    for sharing in (Sharing(dict(TOKENS), read_only=True), Sharing(read_only=True)):
        app = create_app(index_dir, model_dir, system=system, sharing=sharing)
        headers = {"authorization": f"Bearer {TOKENS['editor']}"}
        with TestClient(app) as c:
            r = c.post("/api/feedback/keep", json=_feedback(), headers=headers)
            assert r.status_code == 403 and "read-only" in r.json()["detail"]
            assert c.get("/api/search", params={"q": "red"}, headers=headers).status_code == 200


def test_on_loopback_without_options_nothing_changes(index_and_model):
    from fastapi.testclient import TestClient

    index_dir, model_dir, system = index_and_model
    with TestClient(create_app(index_dir, model_dir, system=system)) as c:
        assert c.get("/").status_code == 200
        assert c.get("/api/search", params={"q": "red"}).status_code == 200
        assert all(c.post("/api/annotate", content=_png()).status_code == 200
                   for _ in range(70))  # no upload limit


# ------------------------------------------------------------------------------- token file
def test_token_file_is_made_owner_only_and_read_back(tmp_path):
    path = tmp_path / "conf" / "tokens.json"
    tokens, made = load_or_create_tokens(path)
    assert made and set(tokens) == {"viewer", "editor"} and tokens["viewer"] != tokens["editor"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_tokens(path) == (tokens, False)
    path.chmod(0o644)
    with pytest.raises(TokenFileError, match="chmod 600"):
        load_or_create_tokens(path)
    for bad in ("not json", '{"viewer": "short", "editor": "short"}', '["a"]'):
        path.write_text(bad)
        path.chmod(0o600)
        with pytest.raises(TokenFileError, match=str(path)):
            load_or_create_tokens(path)


def test_pamir_serve_off_loopback_needs_a_token_and_never_logs_it(tmp_path, index_and_model):
    """The real command on 127.0.0.2: tokens made owner-only, printed once (a URL each), the
    printed URL gets in, and no token appears again in what the server writes."""
    import signal
    import subprocess

    from conftest import pamir_command

    index_dir, model_dir, _ = index_and_model
    port = free_port(HOST)
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = pamir_command("serve", "--index", index_dir, "--host", HOST, "--port", port,
                             stdout=log, stderr=subprocess.STDOUT,
                             env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")})
    try:
        base = f"http://{HOST}:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log_path.read_text()
            try:
                with client(base) as c:
                    if c.get("/api/status").status_code == 401:
                        break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        token_file = tmp_path / "config" / "pamir" / "serve-tokens.json"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        tokens, _ = load_or_create_tokens(token_file)
        urls = [ln.split(": ", 1)[1].strip() for ln in log_path.read_text().splitlines()
                if ln.strip().startswith(("viewer:", "editor:"))]
        assert len(urls) == 2 and urls[0].endswith(tokens["viewer"]), log_path.read_text()
        with client(base, "127.0.0.12") as c:
            r = c.get(urls[0].replace(urls[0].split("/?")[0], base), follow_redirects=True)
            assert r.status_code == 200 and "<html" in r.text.lower()
            c.get("/api/status", headers={"authorization": "Bearer wrong-token"})
            c.get("/api/search", params={"q": "red"},
                  headers={"authorization": f"Bearer {tokens['editor']}"})
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    log = log_path.read_text()
    for role, token in tokens.items():
        assert log.count(token) == 1, (role, log)
    assert "wrong-token" not in log


# ------------------------------------------------------------------------------- schemathesis
@pytest.fixture(scope="module")
def fuzzed(index_and_model):
    """A server off loopback with tokens and no per-client limits (the fuzzer is one client
    sending hundreds of requests), and its schema as a viewer reads it."""
    index_dir, model_dir, system = index_and_model
    sharing = Sharing(dict(TOKENS), uploads_per_minute=0, max_failed_attempts=0)
    for base in serve(create_app(index_dir, model_dir, system=system, sharing=sharing)):
        with client(base, token=TOKENS["viewer"]) as c:
            yield base, c.get("/openapi.json").json()


@pytest.mark.parametrize("role", ["none", "viewer", "editor"])
def test_schemathesis_for_each_role(fuzzed, role):
    """Every operation of the schema, fuzzed: without a token every one is 401; with a
    viewer's, every read route answers (never 401/403/5xx) and every editor route is 403;
    with an editor's, no 5xx."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings

    base, spec = fuzzed
    schema = schemathesis.openapi.from_dict(spec)
    headers = {"authorization": f"Bearer {TOKENS[role]}"} if role != "none" else {}
    bad, calls = [], 0
    examples = max(5, EXAMPLES // 4) if role != "editor" else EXAMPLES
    for result in schema.get_all_operations():
        operation = result.ok()
        editor_route = operation.path in (EDITOR_ROUTES + list(PEOPLE_EDITOR_ROUTES)
                                          + list(COPIES_EDITOR_ROUTES))

        @given(case=operation.as_strategy())
        @settings(max_examples=examples, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        def run(case):
            nonlocal calls
            calls += 1
            status = case.call(base_url=base, headers=headers).status_code
            want_ok = {"none": status == 401,
                       "viewer": (status == 403) if editor_route else (
                           status < 500 and status not in (401, 403, 429)),
                       "editor": status < 500}[role]
            if not want_ok:
                bad.append((operation.label, status, case.path_parameters, case.query))

        run()
    from conftest import record

    record(f"schemathesis_{role}", {"calls": calls, "failures": len(bad)})
    assert calls > 0 and not bad, bad[:5]


# ------------------------------------------------------------------------------- TLS
def test_certfile_and_keyfile_serve_https_with_a_secure_cookie(tmp_path, index_and_model):
    """`--certfile/--keyfile` are passed to uvicorn: the server speaks HTTPS, and the page's
    cookie is then marked Secure. One without the other is a clear error."""
    import shutil
    import signal
    import ssl
    import subprocess

    from conftest import pamir_command

    if shutil.which("openssl") is None:
        pytest.skip("openssl absent: cannot make a test certificate")
    index_dir = index_and_model[0]
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", f"/CN={HOST}", "-addext", f"subjectAltName=IP:{HOST}",
                    "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    r = subprocess.run([*_pamir(), "serve", "--index", str(index_dir), "--certfile", str(cert)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--keyfile" in r.stdout + r.stderr
    token_file = tmp_path / "tokens.json"
    tokens, _ = load_or_create_tokens(token_file)
    port = free_port(HOST)
    proc = pamir_command("serve", "--index", index_dir, "--host", HOST, "--port", port,
                         "--token-file", token_file, "--certfile", cert, "--keyfile", key,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base, deadline = f"https://{HOST}:{port}", time.monotonic() + 60
        with httpx.Client(base_url=base, timeout=30,
                          verify=ssl.create_default_context(cafile=str(cert))) as c:
            while True:
                assert proc.poll() is None
                try:
                    r = c.get("/", params={"token": tokens["viewer"]})
                    break
                except httpx.ConnectError as e:  # not listening yet; a TLS error fails
                    assert "SSL" not in str(e) and time.monotonic() < deadline, e
                    time.sleep(0.1)
            assert r.status_code == 303 and "Secure" in r.headers["set-cookie"]
            assert c.get("/api/search", params={"q": "red"}).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def _pamir() -> list[str]:
    import sys

    return [sys.executable, "-c", "from pamir.cli import main; main()"]
