"""Facts: the words pictures hold for certain (keywords, places, ...) are found with or without
a model, rank above pictures that only look like the word, exclude, filter, and survive an
upgrade from an index older than them."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from pamir.facts.fact import Fact, fold, keyword_facts
from pamir.index import Index
from pamir.index.fact_reading import FACT_PROBABILITY
from pathlib import Path


from fakes import FakeSystem
from pictures import make_pictures


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def captioned_index(tmp_path, captions: dict[str, list[str]]):
    """The nine coloured pictures of test_server, indexed with these captions (by name)."""
    system = FakeSystem()
    folder = tmp_path / "pictures"
    paths = {p.name: p for p in make_pictures(folder)}
    table = {str(paths[name]): words for name, words in captions.items()}
    ix = Index.create(tmp_path / "index", system.vocabulary, system.idf)
    ix.update([folder], system.transform_paths, captions=table)
    return ix


def names(hits) -> list[str]:
    return [h.path.rsplit("/", 1)[1] for h in hits]


def test_fold_takes_off_case_and_accents():
    assert fold("Reykjavík") == "reykjavik"
    assert fold("  São   Paulo ") == "sao paulo"
    assert fold("KYŌTO") == "kyoto"
    assert [f.word for f in keyword_facts(["Kauai", "kauai", "Æther"])] == ["kauai", "æther"]
    with pytest.raises(ValueError, match="folded"):
        Fact("place", "Kyoto")
    with pytest.raises(ValueError, match="kind"):
        Fact("mood", "happy")


def test_a_keyword_outside_the_vocabulary_finds_its_pictures(tmp_path):
    with captioned_index(tmp_path, {"blue-0.png": ["kauai", "beach"],
                                    "green-1.png": ["kauai"]}) as ix:
        q = ix.parse_query("Kauai")
        assert q.unknown == [] and q.matches[0].how == "fact" and q.matches[0].facts == 2
        hits = ix.search(q, 5)
        # only the tagged pictures: nothing else answers a word the model does not know
        assert sorted(names(hits)) == ["blue-0.png", "green-1.png"]
        assert all(h.matched == ["kauai"] for h in hits)
        assert all(h.probability == pytest.approx(FACT_PROBABILITY) for h in hits)


def test_a_tagged_picture_ranks_above_those_that_only_look_like_the_word(tmp_path):
    with captioned_index(tmp_path, {"blue-1.png": ["red"]}) as ix:
        hits = ix.search("red", 4)
        assert names(hits)[0] == "blue-1.png" and hits[0].matched == ["red"]
        # then the model's answer, in its order, the tagged picture not twice
        model = [n for n in names(ix.search(ix.parse_query("red").vector, 9))
                 if n != "blue-1.png"]
        assert names(hits)[1:] == model[:3]
        assert all(h.matched == [] for h in hits[1:])


def test_an_excluded_fact_leaves_its_pictures_out(tmp_path):
    with captioned_index(tmp_path, {"red-0.png": ["kauai"], "red-1.png": ["kauai"]}) as ix:
        hits = ix.search("red -kauai", 9)
        assert "red-0.png" not in names(hits) and "red-1.png" not in names(hits)
        assert names(hits)[0] == "red-2.png"


def test_fact_filters_narrow_by_kind(tmp_path):
    with captioned_index(tmp_path, {"red-0.png": ["kauai"]}) as ix:
        ix.set_facts({ix.id_of_path(tmp_path / "pictures" / name): [
            Fact("place", "kyoto", detail='{"shown": "Kyōto"}'), Fact("place", "japan")]
            for name in ("red-1.png", "blue-0.png")}, ("place",))
        assert sorted(names(ix.search("place:kyoto", 9))) == ["blue-0.png", "red-1.png"]
        assert names(ix.search("red place:Kyōto", 9)) == ["red-1.png", "blue-0.png"]
        assert ix.search("tag:kyoto", 9) == []  # a place is not a keyword
        assert names(ix.search("tag:kauai", 9)) == ["red-0.png"]
        hit = ix.search("kyoto", 1)[0]
        assert hit.facts == {"place": ["japan", "Kyōto"]} and hit.matched == ["kyoto"]
        assert ix.count_likely(ix.parse_query("kyoto")) == 2
        assert ix.count_likely(ix.parse_query("kyoto japan")) == 2
        assert ix.count_likely(ix.parse_query("kyoto kauai")) == 0


def test_a_phrase_matches_pictures_holding_each_of_its_words(tmp_path):
    with captioned_index(tmp_path, {"green-0.png": ["polar", "bear"],
                                    "green-1.png": ["polar"]}) as ix:
        assert names(ix.search('"polar bear"', 9)) == ["green-0.png"]


def test_facts_follow_captions_and_removals(tmp_path):
    with captioned_index(tmp_path, {"red-0.png": ["kauai"]}) as ix:
        pid = ix.id_of_path(tmp_path / "pictures" / "red-0.png")
        ix.set_caption(pid, ["maui"])
        assert names(ix.search("maui", 9)) == ["red-0.png"]
        with pytest.raises(ValueError, match="vocabulary"):
            ix.search("kauai", 9)
        (tmp_path / "pictures" / "red-0.png").unlink()
        ix.update([tmp_path / "pictures"], FakeSystem().transform_paths)
        conn = sqlite3.connect(tmp_path / "index" / "catalog.sqlite")
        assert conn.execute("SELECT count(*) FROM facts WHERE picture = ?",
                            (pid,)).fetchone()[0] == 0


def test_an_index_from_before_facts_gets_its_keywords_as_facts(tmp_path):
    captioned_index(tmp_path, {"red-0.png": ["kauai"]}).close()
    conn = sqlite3.connect(tmp_path / "index" / "catalog.sqlite")
    with conn:  # what schema 3 wrote: no facts, no position
        conn.execute("DROP TRIGGER facts_of_removed")
        conn.execute("DROP TABLE facts")
        conn.execute("ALTER TABLE pictures DROP COLUMN position")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.close()
    with Index.open(tmp_path / "index") as old:  # read-only: no facts yet, no error
        assert names(old.search("red", 1)) == ["red-0.png"]
        with pytest.raises(ValueError, match="vocabulary"):
            old.search("kauai", 9)
    with Index.open(tmp_path / "index", writable=True) as ix:
        assert names(ix.search("kauai", 9)) == ["red-0.png"]
        assert np.isfinite(ix.search("red", 1)[0].score)


def test_a_pass_reads_each_picture_once_resumes_and_reads_changed_ones_again(tmp_path):
    """A pass (pamir.index.passes) killed after its first batch goes on from its last
    commit; a run with nothing new reads nothing; a changed picture is read again."""
    from pamir.index.passes import run_pass

    read = []

    def reader(paths):
        read.extend(paths)
        return [([Fact("text", "bakery")], "") if "red" in p else
                (None, "no text model") if "green-0" in p else ([], "") for p in paths]

    class Killed(Exception):
        pass

    def dying(paths):  # read the first batch, then died (its batches read on 2 threads)
        if paths != first:
            raise Killed
        return reader(paths)

    with captioned_index(tmp_path, {}) as ix:
        first = [p for _, p, _ in ix.pass_todo("text")[:4]]
        with pytest.raises(Killed):
            run_pass(ix, "text", ("text",), dying, batch_size=4, threads=2)
        assert len(read) == 4 and len(ix.pass_todo("text")) == 5
        report = run_pass(ix, "text", ("text",), reader, batch_size=4, threads=2)
        assert report.read == 5 and len(read) == 9 and len(set(read)) == 9
        assert sorted(names(ix.search("bakery", 9))) == ["red-0.png", "red-1.png", "red-2.png"]
        assert sorted(names(ix.search("text:bakery blue", 9))) == [
            "red-0.png", "red-1.png", "red-2.png"]
        assert run_pass(ix, "text", ("text",), reader).read == 0
        changed = tmp_path / "pictures" / "red-0.png"
        changed.write_bytes(changed.read_bytes() + b"\0")  # other bytes, same picture
        ix.update([tmp_path / "pictures"], FakeSystem().transform_paths)
        again = run_pass(ix, "text", ("text",), reader)
        assert again.read == 1 and read[-1].endswith("red-0.png")
        # green-0 could not be read in the first batch: recorded, not read again
        assert report.failed == 0 and sum(p.endswith("green-0.png") for p in read) == 1


def test_a_probability_floor_keeps_the_facts(tmp_path):
    with captioned_index(tmp_path, {"red-0.png": ["kauai"], "blue-0.png": ["kauai"]}) as ix:
        assert sorted(names(ix.search("kauai p:0.5", 9))) == ["blue-0.png", "red-0.png"]
        assert ix.search("kauai p:0.99", 9) == []
        assert sorted(names(ix.search("tag:kauai p:0.5", 9))) == ["blue-0.png", "red-0.png"]
        # sorted by date: the facts first (both likely), by date
        assert len(ix.search("kauai sort:date", 9)) == 2


def test_the_cli_and_the_api_find_a_keyword_and_show_why(fake, tmp_path):
    """`pamir index MODEL FOLDER --captions TABLE`, then a keyword the model does not know,
    through `pamir search` and GET /api/search: the same pictures, marked as holding it."""
    import json

    from fastapi.testclient import TestClient

    from pamir.server import create_app
    from fakes import run

    model, pictures = fake
    table = pictures / "captions.tsv"
    table.write_text("path\tkeywords\nred-0.png\tkauai beach\nblue-2.png\tKauai\n")
    ix = tmp_path / "ix"
    run("index", model, pictures, "--index", ix, "--captions", table)
    r = run("search", "kauai", "--index", ix)
    assert "kauai (2 pictures say so)" in r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and all("[kauai]" in line for line in lines)
    body = json.loads(run("search", "kauai", "--index", ix, "--json").stdout)
    cli = [(h["path"], h["matched"]) for h in body["hits"]]
    with TestClient(create_app(ix)) as client:
        api = client.get("/api/search", params={"q": "kauai"}).json()
    assert [(h["path"], h["matched"]) for h in api["hits"]] == cli
    assert {Path(p).name for p, _ in cli} == {"red-0.png", "blue-2.png"}
    assert all(h["probability"] == pytest.approx(FACT_PROBABILITY) for h in api["hits"])


def test_bare_words_that_pictures_hold_as_one_fact_are_one_phrase(tmp_path):
    """`united kingdom` typed bare finds the pictures taken there, as "united kingdom"
    does; words that are no fact together stay words."""
    with captioned_index(tmp_path, {}) as ix:
        ix.set_facts({ix.id_of_path(tmp_path / "pictures" / n): [
            Fact("place", "united kingdom"), Fact("place", "london")]
            for n in ("green-0.png", "blue-1.png")}, ("place",))
        q = ix.parse_query("united kingdom red")
        assert [m.term for m in q.matches] == ["united kingdom", "red"]
        assert sorted(names(ix.search("united kingdom", 9))) == ["blue-1.png", "green-0.png"]
        assert [m.term for m in ix.parse_query("london red").matches] == ["london", "red"]


def test_a_stop_word_that_pictures_are_tagged_with_is_searched(tmp_path):
    with captioned_index(tmp_path, {"red-1.png": ["detail"]}) as ix:
        assert names(ix.search("detail", 9)) == ["red-1.png"]
        assert names(ix.search("detail red", 1)) == ["red-1.png"]
