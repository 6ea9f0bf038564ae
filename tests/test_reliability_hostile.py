"""Hostile input (issue 15): the served OpenAPI schema fuzzed by schemathesis; the captions-table
reader and the query parser fuzzed by hypothesis; uploads over the limit, decompression bombs
and client-chosen names; Host-header and cross-origin requests; hostile file names and
queries. Bounded example counts (PAMIR_RELIABILITY_EXAMPLES scales them for the benchmark).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from pamir.server import create_app
from fakes import FakeSystem, build_index
from pictures import hostile_names, red_png

EXAMPLES = int(os.environ.get("PAMIR_RELIABILITY_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES * 5, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    os.environ["PAMIR_EMBEDDINGS"] = "0"
    system = FakeSystem()
    return create_app(build_index(tmp_path_factory.mktemp("hostile"), system), system=system,
                      allowed_hosts=["127.0.0.1", "localhost", "testserver"])


@pytest.fixture
def client(app):
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


# ----------------------------------------------------------------------------- schemathesis
def test_schemathesis_no_5xx_and_answers_match_the_schema(app):
    """Every operation of the served schema, fuzzed: no 5xx, every answer conforms."""
    import schemathesis
    from hypothesis import given as h_given
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures, calls = [], 0
    for result in schema.get_all_operations():
        operation = result.ok()
        strategy = operation.as_strategy()

        @h_given(case=strategy)
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        def run(case):
            nonlocal calls
            calls += 1
            response = case.call()
            if response.status_code >= 500:
                failures.append((operation.label, response.status_code, case.path_parameters,
                                 case.query, response.text[:200]))
                return
            try:
                # a schema-valid query of words outside the vocabulary is refused by design
                # (400): the schema cannot spell the vocabulary
                case.validate_response(response, excluded_checks=[positive_data_acceptance])
            except Exception as e:  # noqa: BLE001 - collect them all
                failures.append((operation.label, response.status_code, str(e)[:300]))

        run()
    from conftest import record

    record("schemathesis", {"calls": calls, "failures": len(failures)})
    assert calls > 0 and not failures, failures[:5]


# ----------------------------------------------------------------------------- uploads
def _bomb() -> bytes:
    """A small PNG declaring 30000 x 30000 pixels (900 M > PIL's 179 M limit)."""
    buf = io.BytesIO()
    Image.new("1", (30000, 30000)).save(buf, "PNG")
    return buf.getvalue()


def test_uploads_over_the_limit_are_413(client, monkeypatch):
    import pamir.server.app as server

    monkeypatch.setattr(server, "MAX_UPLOAD_BYTES", 10_000)
    big = red_png() + b"\0" * 20_000
    for route in ("/api/annotate", "/api/similar"):
        assert client.post(route, content=big).status_code == 413
        # no Content-Length (chunked): counted while read
        assert client.post(route, content=iter([big[:8000], big[8000:]])).status_code == 413
        # a lying Content-Length
        r = client.post(route, content=big, headers={"content-length": "100"})
        assert r.status_code in (400, 413, 422)


def test_decompression_bombs_are_400(client):
    bomb = _bomb()
    assert len(bomb) < 200_000
    for route in ("/api/annotate", "/api/similar"):
        r = client.post(route, content=bomb)
        assert r.status_code == 400 and "pixels" in r.json()["detail"], r.text


def test_the_server_never_writes_an_upload_where_the_client_says(client, tmp_path):
    target = tmp_path / "chosen.png"
    for headers in ({"content-disposition": f'attachment; filename="{target}"'},
                    {"content-disposition": 'attachment; filename="../../../chosen.png"'},
                    {"x-file-name": str(target)}):
        r = client.post("/api/annotate", content=red_png(), headers=headers,
                        params={"filename": str(target), "path": str(target)})
        assert r.status_code == 200
    assert not target.exists() and not Path("chosen.png").exists()
    assert not list(Path("/").glob("chosen.png"))


# ----------------------------------------------------------------------------- who may call
def test_host_header_and_cross_origin_requests_are_refused(client):
    assert client.get("/api/status", headers={"host": "evil.example"}).status_code == 400
    assert client.get("/api/status").status_code == 200
    own = {"origin": "http://testserver"}
    assert client.get("/api/status", headers=own).status_code == 200
    for origin in ("http://evil.example", "null", "http://testserver.evil.example",
                   "file://", "http://127.0.0.1:1"):
        h = {"origin": origin}
        assert client.get("/api/status", headers=h).status_code == 403, origin
        r = client.post("/api/feedback", json={"q": "red", "right": [1], "wrong": [2]},
                        headers={**h, "content-type": "text/plain"})
        assert r.status_code == 403
        assert client.post("/api/annotate", content=red_png(), headers=h).status_code == 403
        r = client.options("/api/search", headers={**h, "access-control-request-method": "GET"})
        assert "access-control-allow-origin" not in {k.lower() for k in r.headers}


# ----------------------------------------------------------------------------- names, queries
HOSTILE_QUERIES = ["a" * 10_000, "red " * 2_500, "red\0blue", "red\nblue\r\n", "\ud800red",
                   "red \udcff", '"' * 5000, "-" * 10_000, "^" * 3000 + "red", "1e308:red",
                   "floor:nan red", "floor:inf red", "in:" + "/" * 4000 + " red", "sort:" + "x" * 5000,
                   "red^99999999999999999999", "\u202ered\u202c", "ｒｅｄ", "red" + "\u0301" * 3000]


@pytest.mark.parametrize("q", HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
def test_hostile_queries_get_an_answer_or_a_clear_400(client, q):
    r = client.get("/api/search", params={"q": q.encode("utf-8", "surrogatepass")
                                          .decode("utf-8", "replace")})
    assert r.status_code in (200, 400, 422), (r.status_code, r.text[:200])
    if r.status_code != 200:
        assert r.json()["detail"]


def test_invalid_utf8_in_the_url_is_a_client_error(client):
    r = client.get("/api/search?q=%FF%FEred")
    assert r.status_code in (200, 400, 422)
    r = client.get("/api/pictures/%FF/thumbnail")
    assert r.status_code in (404, 422)


def test_hostile_file_names_are_indexed_and_served(tmp_path):
    """Index, search, thumbnails and the JSON of pictures whose names are hostile."""
    _index_and_serve(tmp_path, invalid_utf8=False)


def test_a_file_name_that_is_not_utf8_is_indexed_and_served(tmp_path):
    """Its name is given escaped in the JSON (the bytes as \\xNN); the picture, by id."""
    hits = _index_and_serve(tmp_path, invalid_utf8=True)
    assert any("\\x" in h["path"] for h in hits)


def _index_and_serve(tmp_path, invalid_utf8: bool):
    from pamir.index import Index

    system = FakeSystem()
    folder = tmp_path / "pictures"
    folder.mkdir()
    made = hostile_names(folder, invalid_utf8)
    with Index.create(tmp_path / "ix", system.vocabulary, system.idf) as ix:
        report = ix.update([folder], system.transform_paths)
        assert report.added == len(made) and not report.failed
    app = create_app(tmp_path / "ix", system=system)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/api/search", params={"q": "red", "k": 50})
        assert r.status_code == 200, r.text[:300]
        hits = r.json()["hits"]
        assert len(hits) == len(made)
        for h in hits:
            assert c.get(h["thumbnail"]).status_code == 200
            assert c.get(f"/api/pictures/{h['id']}").status_code == 200
    return hits


def test_nul_in_a_path_argument_is_a_clear_error(tmp_path):
    from typer.testing import CliRunner

    from pamir.cli import app

    r = CliRunner().invoke(app, ["search", "red\0blue", "--index", str(tmp_path / "no\0ix")])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert not isinstance(r.exception, ValueError) or "null" not in str(r.exception), r.output


# ----------------------------------------------------------------------------- hypothesis
@FUZZ
@given(st.text(max_size=300))
def test_fuzz_query_parser(text):
    from pamir.text.query import QuerySyntaxError, parse

    try:
        parsed = parse(text)
    except QuerySyntaxError:
        return
    for term in parsed.terms:
        assert np.isfinite(term.weight) and abs(term.weight) <= 100.0


@FUZZ
@given(st.text(alphabet=st.sampled_from('red blue "^-+:.0123456789 floor:sort:in:date\t'),
               max_size=80))
def test_fuzz_query_parser_grammar_alphabet(text):
    from pamir.text.query import QuerySyntaxError, parse

    try:
        parse(text)
    except QuerySyntaxError:
        pass


TABLE_BYTES = st.one_of(
    st.binary(max_size=400),
    st.lists(st.lists(st.sampled_from(["p0.png", "p1.png", "../p0.png", "/etc/passwd", "",
                                       "red blue", '"q', "\x00", "é", "path", "keywords",
                                       "caption", "a" * 300, "\udcff"]),
                      max_size=4), max_size=6)
    .map(lambda rows: "\n".join("\t".join(r) for r in rows).encode("utf-8", "surrogateescape")),
    st.lists(st.dictionaries(st.sampled_from(["path", "file", "caption", "keywords", "x"]),
                             st.one_of(st.text(max_size=20), st.integers(), st.none(),
                                       st.lists(st.text(max_size=5), max_size=3))),
             max_size=5)
    .map(lambda rows: "\n".join(__import__("json").dumps(r) for r in rows).encode()),
)


@pytest.fixture(scope="module")
def table_folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("tables")
    for i in range(2):
        (d / f"p{i}.png").write_bytes(red_png())
    return d


@pytest.mark.parametrize("suffix", [".tsv", ".csv", ".jsonl"])
def test_fuzz_captions_table_reader(table_folder, suffix):
    """Any bytes as a captions table: a Collection or a DataError, nothing else; and never a
    picture outside the table's folder."""
    from pamir.data import DataError, load_captions_table

    table = table_folder / f"captions{suffix}"

    @FUZZ
    @given(TABLE_BYTES)
    def run(data):
        table.write_bytes(data)
        try:
            coll = load_captions_table(table)
        except DataError:
            return
        for p in coll.paths:
            assert Path(p).resolve().is_relative_to(table_folder.resolve()), p

    run()
