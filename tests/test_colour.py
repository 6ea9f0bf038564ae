"""The colour pass (pamir.facts.colour), one row of the pass table (pamir.jobs.fact_passes):
each picture's dominant colours become facts that `colour:red` and `color:red` find, with no
model and no extra; a corrupt picture is skipped with a note; the pass is resumable."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fakes import run
from pamir.facts.colour import MIN_SHARE, colour_facts, read_colours
from pamir.index import Index
from pamir.jobs.fact_passes import FACT_PASSES, fact_pass
from pamir.jobs.indexing import IndexJob, index_folders, read_pass, run_index
from pictures import COLOURS, SHADES, colour_pictures, two_colours


def _words(rgb) -> list[str]:
    return [f.word for f in colour_facts(rgb)]


@pytest.mark.parametrize("name", [*COLOURS, *SHADES])
def test_a_picture_of_one_colour_holds_that_colour(name):
    rgb = np.full((48, 64, 3), {**COLOURS, **SHADES}[name], np.uint8)
    assert _words(rgb) == ([name, "gray"] if name == "grey" else [name])  # gray: its alias


def test_a_picture_of_two_colours_holds_both_by_their_shares():
    facts = {f.word: f.confidence for f in colour_facts(two_colours())}
    assert facts == pytest.approx({"blue": 2 / 3, "red": 1 / 3}, abs=0.01)
    # a colour under MIN_SHARE of the picture is none of its colours
    rgb = np.full((60, 100, 3), COLOURS["red"], np.uint8)
    rgb[: int(60 * MIN_SHARE) - 2] = COLOURS["blue"]
    assert _words(rgb) == ["red"]


def test_a_corrupt_picture_is_skipped_with_a_note(tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff not a jpeg")
    Image.new("RGB", (40, 30), COLOURS["green"]).save(tmp_path / "good.png")
    (found, note), (good, none) = read_colours([str(bad), str(tmp_path / "good.png")])
    assert found is None and "bad.jpg" in note
    assert [f.word for f in good] == ["green"] and none is None


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """An index of colour_pictures and a corrupt file, with no model (the zero-caption system),
    the text and faces passes left out."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAMIR_EMBEDDINGS", "0")
        root = tmp_path_factory.mktemp("colours")
        colour_pictures(root / "pictures")
        (root / "pictures" / "broken.jpg").write_bytes(b"\xff\xd8\xff not a jpeg")
        report = index_folders(None, [root / "pictures"], index=root / "ix", text=False,
                               faces=False)
    return root, report


def _found(ix: Path, query: str) -> set[str]:
    with Index.open(ix) as index:
        return {Path(h.path).stem for h in index.search(query, 50)}


def test_color_red_finds_the_red_pictures_with_no_model(indexed):
    root, report = indexed
    assert report.colour["read"] == 9 and report.colour["with_facts"] == 9
    assert [Path(p).name for p, _ in report.failed] == ["broken.jpg"]  # skipped, said why
    assert _found(root / "ix", "color:red") == {"red-0", "red-1", "split"}
    assert _found(root / "ix", "colour:red") == _found(root / "ix", "color:red")
    assert _found(root / "ix", "colour:blue") == {"blue-0", "blue-1", "split"}
    assert _found(root / "ix", "color:gray") == _found(root / "ix", "colour:grey") == {"grey-0"}
    assert _found(root / "ix", "colour:white") == {"white-0"}


def test_a_colour_is_a_filter_alone_and_shown_with_its_share(indexed):
    root, _ = indexed
    with Index.open(root / "ix") as index:
        [split] = [h for h in index.search("colour:red", 50) if Path(h.path).stem == "split"]
        assert split.held == [("colour", "red", pytest.approx(1 / 3, abs=0.01))]
        assert split.facts["colour"] == ["blue", "red"]  # the larger first
        # the plain word "red" meets no colour: no picture holds it as a fact ("dog" keeps the
        # query searchable where no embedding bridges "red" to ImageNet's classes)
        hits = index.search("dog red", 50)
        assert hits and all(not h.matched and not h.held for h in hits)


def test_the_colour_pass_is_resumable_and_reads_alone(indexed, tmp_path):
    """Read with the look's decode, each picture is recorded: nothing is read again; a job
    without the pass leaves it to `read_pass`, which decodes for itself, once."""
    root, _ = indexed
    with Index.open(root / "ix", writable=True) as index:
        assert read_pass(index, "colour")["read"] == 0
    job = IndexJob([root / "pictures"], index_dir=tmp_path / "ix", passes=())
    report, _ = run_index(job)
    assert report.colour is None and report.as_dict()["colour"] is None
    with Index.open(tmp_path / "ix", writable=True) as index:
        assert read_pass(index, "colour")["read"] == 9
        assert read_pass(index, "colour")["read"] == 0
    assert _found(tmp_path / "ix", "color:red") == {"red-0", "red-1", "split"}


def test_pamir_index_runs_the_colour_pass_unless_told_not_to(indexed, tmp_path, monkeypatch):
    root, _ = indexed
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")
    r = json.loads(run("index", root / "pictures", "--index", tmp_path / "ix", "--json",
                       "--no-text", "--no-faces", "--no-colour").stdout)
    assert r["colour"] is None and r["text"] is None and r["copies"]["read"] == 9
    r = json.loads(run("index", root / "pictures", "--index", tmp_path / "ix", "--json",
                       "--no-text", "--no-faces").stdout)
    assert r["colour"]["read"] == 9 and r["copies"]["read"] == 0  # the looks were read
    hits = json.loads(run("search", "color:red", "--index", tmp_path / "ix", "--json").stdout)
    assert {Path(h["path"]).stem for h in hits["hits"]} == {"red-0", "red-1", "split"}


def test_the_pass_table_names_each_pass_once_with_its_parts():
    """Every row's parts resolve (imported, not run: no extra needed); names and labels are
    distinct."""
    for field in ("name", "label"):
        assert len({getattr(p, field) for p in FACT_PASSES}) == len(FACT_PASSES)
    for p in FACT_PASSES:
        for field in ("catalogued", "side", "stream", "alone", "detail", "ready", "then"):
            assert getattr(p, field) is None or p.part(field) is not None, (p.name, field)
    colour = fact_pass("colour")
    assert colour.extra is None and colour.kinds == ("colour",) and colour.watch
    assert colour.catalogue_name() == "colour 1" and colour.part("side") == 64
    with pytest.raises(ValueError, match="the passes are text, faces, copies, colour"):
        fact_pass("animals")
