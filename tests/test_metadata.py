"""Keywords, captions and dates read from the pictures' own files (pamir.facts.metadata), written
into real JPEG, PNG and HEIC files by a real writer: exiftool, as people's tools do."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pamir.data import caption_sources
from pamir.facts.collection import load_collection, load_folder
from pamir.facts.metadata import MAX_XMP_BYTES, read_metadata
from pictures import exiftool, picture, write_packet

pytestmark = pytest.mark.skipif(shutil.which("exiftool") is None,
                                reason="exiftool not installed (.ci/run installs it)")


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    """Words outside the vocabulary stay unknown; the server loads no embedding model."""
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


@pytest.mark.parametrize("tags, words, source", [
    (["-IPTC:Keywords=tiger", "-IPTC:Keywords=tall grass"], ("tiger", "tall", "grass"),
     "IPTC Keywords"),
    (["-XMP-dc:Subject=tiger", "-XMP-dc:Subject=water"], ("tiger", "water"), "XMP dc:subject"),
    (["-XMP-lr:HierarchicalSubject=Animals|Birds|Peacock"], ("animals", "birds", "peacock"),
     "XMP lr:hierarchicalSubject"),
    (["-XMP-digiKam:TagsList=Places/Paris"], ("places", "paris"), "XMP digiKam:TagsList"),
    (["-XPKeywords=sun;blue sky"], ("sun", "blue", "sky"), "EXIF XPKeywords"),
    (["-ImageDescription=A frog, called Bob."], ("frog", "bob"), "EXIF ImageDescription"),
    (["-XMP-dc:Description=An albino peahen."], ("albino", "peahen"), "XMP dc:description"),
    (["-IPTC:Caption-Abstract=Brown horses."], ("brown", "horses"), "IPTC Caption-Abstract"),
])
def test_each_embedded_field_of_a_jpeg(tmp_path, tags, words, source):
    p = exiftool(picture(tmp_path / "a.jpg"), *tags)
    meta = read_metadata(p)
    assert meta.caption == words and meta.source == source and not meta.notes


def test_png_and_heic_carry_xmp_and_exif(tmp_path):
    png = exiftool(picture(tmp_path / "b.png"), "-XMP-dc:Subject=rose",
                   "-XMP-photoshop:DateCreated=2018-05-01T09:00:00")
    heic = exiftool(picture(tmp_path / "c.heic"), "-XMP-dc:Subject=snow",
                    "-DateTimeOriginal=2017:01:02 03:04:05")
    assert read_metadata(png).caption == ("rose",)
    assert read_metadata(png).taken == "2018-05-01T09:00:00"
    assert read_metadata(png).taken_from == "XMP photoshop:DateCreated"
    m = read_metadata(heic)
    assert (m.caption, m.taken, m.taken_from) == (("snow",), "2017-01-02T03:04:05",
                                                  "EXIF DateTimeOriginal")


def test_dates_exif_with_offset_then_xmp_then_file_date(tmp_path):
    p = exiftool(picture(tmp_path / "a.jpg"), "-DateTimeOriginal=2019:07:14 10:31:00",
                 "-OffsetTimeOriginal=+02:00", "-XMP-photoshop:DateCreated=2001-01-01")
    assert read_metadata(p).taken == "2019-07-14T10:31:00+02:00"
    q = picture(tmp_path / "b.jpg")
    import os

    os.utime(q, (1_500_000_000, 1_500_000_000))
    m = read_metadata(q)
    assert m.taken_from == "file date" and m.taken.startswith("2017-07-1")


def test_sidecars_win_over_embedded_fields_and_come_in_order(tmp_path):
    p = exiftool(picture(tmp_path / "a.jpg"), "-IPTC:Keywords=embedded")
    assert read_metadata(p).source == "IPTC Keywords"
    google = tmp_path / "a.jpg.json"
    google.write_text('{"title": "a.jpg", "description": "A red kite."}')
    assert read_metadata(p).caption == ("red", "kite")
    assert read_metadata(p).source == "sidecar NAME.EXT.json"
    subprocess.run(["exiftool", "-q", "-q", "-XMP-dc:Subject=lightroom", "-o",
                    str(tmp_path / "a.xmp"), str(p)], check=True)
    assert read_metadata(p).caption == ("lightroom",)
    assert read_metadata(p).source == "sidecar NAME.xmp"
    darktable = tmp_path / "a.jpg.xmp"
    subprocess.run(["exiftool", "-q", "-q", "-XMP-dc:Subject=darktable", "-o", str(darktable),
                    str(p)], check=True)
    assert read_metadata(p).caption == ("darktable",)
    assert read_metadata(p).source == "sidecar NAME.EXT.xmp"
    before = read_metadata(p).sidecars
    darktable.write_text(darktable.read_text().replace("darktable", "edited"))
    assert read_metadata(p).caption == ("edited",) and read_metadata(p).sidecars != before


def test_a_table_wins_over_sidecars_and_unlisted_pictures_stay_uncaptioned(tmp_path):
    p = exiftool(picture(tmp_path / "a.jpg"), "-IPTC:Keywords=embedded")
    exiftool(picture(tmp_path / "b.jpg"), "-IPTC:Keywords=bee")
    (tmp_path / "t.tsv").write_text("path\tkeywords\na.jpg\ttable\n")
    coll = load_collection(tmp_path / "t.tsv")
    assert dict(zip(coll.ids, coll.captions)) == {"a.jpg": ("table",), "b.jpg": None}
    assert read_metadata(p).caption == ("embedded",)


BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
<!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;"><!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
<!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;"><!ENTITY h "&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;">]>
<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF
 xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description
 xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:subject><rdf:Bag><rdf:li>&h;</rdf:li>
</rdf:Bag></dc:subject></rdf:Description></rdf:RDF></x:xmpmeta>"""


def test_hostile_xmp_is_uncaptioned_with_a_note(tmp_path):
    # exiftool itself refuses to write these: the packets are put there by hand
    bomb = write_packet(tmp_path / "bomb.png", BOMB)
    broken = write_packet(tmp_path / "broken.png", b"<x:xmpmeta><rdf:RDF>\xff\xfe not xml")
    for p in (bomb, broken):
        m = read_metadata(p)
        assert m.caption is None and m.notes and "XMP not readable" in m.notes[0]
    assert "EntitiesForbidden" in read_metadata(bomb).notes[0]
    # a 100 MB sidecar (sparse: no time spent writing it) is not even read
    ok = exiftool(picture(tmp_path / "ok.jpg"), "-IPTC:Keywords=kept")
    huge = tmp_path / "ok.jpg.xmp"
    with open(huge, "wb") as f:
        f.write(b"<x:xmpmeta>")
        f.truncate(100 << 20)
    m = read_metadata(ok)
    assert m.caption == ("kept",) and f"over the {MAX_XMP_BYTES:,}" in m.notes[0]
    # a bomb in a sidecar: the embedded keywords still count
    huge.write_bytes(BOMB)
    assert read_metadata(ok).caption == ("kept",)


def test_a_folder_without_a_table(tmp_path):
    exiftool(picture(tmp_path / "pics" / "2019" / "a.jpg"), "-IPTC:Keywords=tiger")
    exiftool(picture(tmp_path / "pics" / "b.png"), "-XMP-dc:Subject=rose")
    picture(tmp_path / "pics" / "c.jpg")
    write_packet(tmp_path / "pics" / "d.png", BOMB)
    coll = load_folder(tmp_path / "pics")
    assert dict(zip(coll.ids, coll.captions)) == {
        "2019/a.jpg": ("tiger",), "b.png": ("rose",), "c.jpg": None, "d.png": None}
    assert caption_sources(coll) == ("2 of 4 pictures captioned: 1 IPTC Keywords, "
                                     "1 XMP dc:subject")
    assert any("d.png" in w for w in coll.warnings)
    words = load_folder(tmp_path / "pics", folder_words=True)
    assert words.captions[words.ids.index("2019/a.jpg")] == ("tiger", "2019")


# ------------------------------------------------------------------------- the index
def dated_pictures(root: Path) -> dict[str, Path]:
    """Red JPEGs taken on different days (EXIF), their files' dates all equal."""
    import os

    out = {}
    for name, when, tags in (("a", "2019:07:14 10:31:00", ["-IPTC:Keywords=tiger"]),
                             ("b", "2019:06:01 08:00:00", ["-XMP-dc:Subject=grass"]),
                             ("c", "2018:12:31 23:59:59", []),
                             ("d", "2019:08:31 20:00:00", ["-IPTC:Keywords=water"])):
        p = exiftool(picture(root / f"{name}.jpg"), f"-DateTimeOriginal={when}", *tags)
        os.utime(p, ns=(1_600_000_000 * 10**9, 1_600_000_000 * 10**9))
        out[name] = p
    return out


def test_index_keeps_captions_and_dates_and_sees_sidecar_changes(tmp_path):
    from pamir.index import Index
    from fakes import FakeSystem

    system = FakeSystem()
    pics = dated_pictures(tmp_path / "pics")
    with Index.create(tmp_path / "ix", system.vocabulary, system.idf) as ix:
        report = ix.update([tmp_path / "pics"], system.transform_paths)
        assert report.added == 4 and report.captioned == 3
        by_name = {Path(p.path).name: p for p in ix.pictures()}
        assert by_name["a.jpg"].caption == ("tiger",)
        assert by_name["a.jpg"].source == "IPTC Keywords"
        assert by_name["b.jpg"].taken == "2019-06-01T08:00:00"
        assert by_name["c.jpg"].caption is None

        def names(query, **kw):
            return [Path(h.path).name for h in ix.search(query, 10, **kw)]

        # every picture is red: equal scores, so the order is the dates' (mtimes are equal)
        assert names("red sort:oldest") == ["c.jpg", "b.jpg", "a.jpg", "d.jpg"]
        assert names("red sort:date") == ["d.jpg", "a.jpg", "b.jpg", "c.jpg"]
        assert sorted(names("red date:2019")) == ["a.jpg", "b.jpg", "d.jpg"]
        assert names("red date:2019-07") == ["a.jpg"]
        assert names("red date:2019-06..2019-07 sort:oldest") == ["b.jpg", "a.jpg"]
        assert names("red date:2019-06-02..2019-08-31 -sky sort:date floor:-5") == [
            "d.jpg", "a.jpg"]
        assert names("red date:2019-06-02.. in:nowhere") == []
        hit = ix.search("red date:2019-07", 1)[0]
        assert (hit.taken, hit.caption) == ("2019-07-14T10:31:00", ["tiger"])

        # a sidecar written beside a: its caption wins, its vector is kept (not recomputed)
        subprocess.run(["exiftool", "-q", "-q", "-XMP-dc:Subject=cat", "-o",
                        str(pics["a"]) + ".xmp", str(pics["a"])], check=True)
        report = ix.update([tmp_path / "pics"], system.transform_paths)
        assert (report.recaptioned, report.changed, report.added) == (1, 0, 0)
        a = [p for p in ix.pictures() if p.path.endswith("a.jpg")][0]
        assert (a.caption, a.source) == (("cat",), "sidecar NAME.EXT.xmp")
        assert ix.update([tmp_path / "pics"], system.transform_paths).recaptioned == 0
        Path(str(pics["a"]) + ".xmp").unlink()
        assert ix.update([tmp_path / "pics"], system.transform_paths).recaptioned == 1
        a = [p for p in ix.pictures() if p.path.endswith("a.jpg")][0]
        assert a.caption == ("tiger",)


def test_search_shows_dates_and_captions_cli_and_api(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    import pamir.commands.index as product
    from pamir.cli import app
    from pamir.server import create_app
    from fakes import FakeSystem

    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")
    system = FakeSystem()
    monkeypatch.setattr(product, "load_system", lambda path: system)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.json").write_text("{}")  # what marks a model folder
    dated_pictures(tmp_path / "pics")
    runner = CliRunner()
    r = runner.invoke(app, ["index", str(tmp_path / "model"), str(tmp_path / "pics"),
                            "--index", str(tmp_path / "ix")])
    assert r.exit_code == 0 and "captions: 3 of the pictures read" in r.output, r.output
    r = runner.invoke(app, ["search", "red date:2019-07", "--index", str(tmp_path / "ix")])
    assert r.exit_code == 0 and r.stdout.split("  ")[-2:] == [
        "2019-07-14", f"{tmp_path / 'pics' / 'a.jpg'}\ttiger\n"], r.stdout
    r = runner.invoke(app, ["search", "red date:2019-13", "--index", str(tmp_path / "ix")])
    assert r.exit_code != 0 and "no such date" in r.output
    with TestClient(create_app(tmp_path / "ix", system=system)) as c:
        body = c.get("/api/search", params={"q": "red sort:oldest date:2019"}).json()
        assert [(h["name"], h["taken"][:10], h["caption"]) for h in body["hits"]] == [
            ("b.jpg", "2019-06-01", ["grass"]), ("a.jpg", "2019-07-14", ["tiger"]),
            ("d.jpg", "2019-08-31", ["water"])]
        assert body["options"]["dates"] == [["2019-01-01", "2019-12-31"]]
        one = c.get(f"/api/pictures/{body['hits'][0]['id']}").json()
        assert one["caption_source"] == "XMP dc:subject" and one["taken"].startswith("2019-06")


def test_free_text_captions_lose_stop_words_and_single_letters(tmp_path):
    from pamir.index import Index

    for name, text in (("frog", "A frog."),
                       ("peahen", "An albino peahen (a female peafowl, or peacock)."),
                       ("kite", "A kite is called a bird; the word means you used it. X")):
        exiftool(picture(tmp_path / "pics" / f"{name}.jpg"), f"-ImageDescription={text}")
    coll = load_folder(tmp_path / "pics")
    words = {w for c in coll.captions for w in c}
    assert words == {"frog", "albino", "peahen", "female", "peafowl", "peacock", "kite", "bird",
                     "word"}
    # a stop word that is a vocabulary word (Corel 5k's "detail") stays searchable
    with Index.create(tmp_path / "ix", ["detail", "frog"], np.ones(2)) as ix:
        assert ix.parse_query("the detail").words == ["detail"]


def test_an_index_from_before_dates_is_read_then_upgraded(tmp_path):
    import sqlite3

    from pamir.index import Index
    from fakes import FakeSystem

    system = FakeSystem()
    dated_pictures(tmp_path / "pics")
    with Index.create(tmp_path / "ix", system.vocabulary, system.idf) as ix:
        ix.update([tmp_path / "pics"], system.transform_paths)
    conn = sqlite3.connect(tmp_path / "ix" / "catalog.sqlite")
    with conn:  # what schema 2 wrote: no metadata columns, no captions read from files
        for c in ("taken", "source", "sidecars"):
            conn.execute(f"ALTER TABLE pictures DROP COLUMN {c}")
        conn.execute("UPDATE pictures SET caption = NULL")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()
    with Index.open(tmp_path / "ix") as old:
        hits = old.search("red sort:oldest", 4)
        assert len(hits) == 4 and all(h.taken is None for h in hits)
        assert old.search("red date:2019", 4) == []  # no dates read yet
    with Index.open(tmp_path / "ix", writable=True) as ix:
        report = ix.update([tmp_path / "pics"], system.transform_paths)
        assert (report.recaptioned, report.changed, report.added) == (4, 0, 0)
        assert [h.path[-5:] for h in ix.search("red sort:oldest", 4)] == [
            "c.jpg", "b.jpg", "a.jpg", "d.jpg"]


def test_pamir_fit_folder_learns_what_pamir_fit_table_does(tmp_path):
    """The same pictures and words, once in a table and once in the pictures themselves
    (XMP dc:subject, written by exiftool into the PNGs): the same model, array for array."""
    from typer.testing import CliRunner

    from conftest import fit_argv, model_arrays
    from pictures import coloured_pictures
    from pamir.cli import app

    table = coloured_pictures(tmp_path / "pics", n=24, seed=5, size=(32, 40))
    rows = [line.split("\t") for line in table.read_text().splitlines()[1:]]
    args = []
    for name, words in rows:
        args += [*(f"-XMP-dc:Subject={w}" for w in words.split()), "-q", "-q",
                 "-overwrite_original", str(tmp_path / "pics" / name), "-execute"]
    (tmp_path / "args").write_text("\n".join(args) + "\n")
    subprocess.run(["exiftool", "-q", "-q", "-@", str(tmp_path / "args")], check=True)
    runner = CliRunner()
    r = runner.invoke(app, list(map(str, fit_argv(table, tmp_path / "m-table"))))
    assert r.exit_code == 0, r.output
    table.rename(tmp_path / "captions.tsv")  # a folder with no table
    r = runner.invoke(app, list(map(str, fit_argv(tmp_path / "pics", tmp_path / "m-folder"))))
    assert r.exit_code == 0, r.output
    assert "24 of 24 pictures captioned: 24 XMP dc:subject" in r.output
    a, b = model_arrays(tmp_path / "m-table"), model_arrays(tmp_path / "m-folder")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
