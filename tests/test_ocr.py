"""Text in pictures (pamir.facts.ocr): words painted on generated pictures are read back as text
facts; a picture without text gives none; a bad file gives a note, never an exception; the
models are the ones bundled in rapidocr, nothing is downloaded."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

pytest.importorskip("rapidocr")

from pamir.facts.fact import Fact, fold  # noqa: E402
from pamir.features import images  # noqa: E402
from pamir.facts.ocr import (OcrSettings, TextLine, TextReader, bundled_models,  # noqa: E402
                             fingerprint, phrase, read_texts, text_facts)
from pictures import backdrop, font, paint  # noqa: E402

@pytest.fixture(scope="module")
def reader():
    return TextReader()


# ------------------------------------------------------------------------------ reading

@pytest.mark.parametrize("text, face, size, colour, plate, tilt", [
    ("FRESH BREAD", "DejaVuSans-Bold.ttf", 48, (20, 20, 20), (240, 232, 205), 0),
    ("Museum", "DejaVuSerif.ttf", 40, (255, 255, 255), (20, 100, 50), 4),
    ("pharmacy open", "DejaVuSans.ttf", 32, (250, 210, 40), (25, 25, 25), -6),
    ("STATION", "DejaVuSansMono-Bold.ttf", 36, (255, 255, 255), None, 3),
    ("Garden Café", "DejaVuSerif-Bold.ttf", 44, (20, 40, 110), (250, 250, 250), -3),
])
def test_painted_words_are_read_back_as_text_facts(reader, text, face, size, colour, plate,
                                                   tilt):
    lines = reader.read(paint(text, face, size, colour, plate, tilt))
    words = {f.word for f in text_facts(lines)}
    expected = phrase(text).split()  # folded: "Café" -> "cafe"
    assert set(expected) <= words, (text, lines)
    if len(expected) > 1:
        assert " ".join(expected) in words  # the phrase: `"fresh bread"` matches


def test_the_box_is_where_the_words_were_painted(reader):
    rgb = paint("BAKERY", "DejaVuSans-Bold.ttf", 48, (20, 20, 20), (240, 232, 205), 0,
                where=(320, 40))
    (line,) = reader.read(rgb)
    x0, y0, x1, y1 = line.box
    assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1
    assert 0.45 < x0 < 0.6 and y1 < 0.35  # right half, top third, as painted
    assert line.text == "BAKERY" and 0.5 <= line.confidence <= 1


def test_path_bytes_and_array_read_alike(reader, tmp_path):
    rgb = paint("ticket", "DejaVuSans.ttf", 40, (20, 20, 20), (240, 232, 205), 2)
    path = tmp_path / "ticket.png"
    Image.fromarray(rgb).save(path)
    texts = {tuple(line.text for line in reader.read(x))
             for x in (rgb, path, str(path), path.read_bytes(), Image.open(path))}
    assert texts == {("ticket",)}


def test_a_picture_without_text_gives_no_facts(tmp_path):
    path = tmp_path / "plain.jpg"
    backdrop(seed=3).save(path, quality=90)
    assert read_texts([path]) == [([], "")]


# ------------------------------------------------------------------------------ facts

def test_text_facts_fold_words_keep_stop_words_out_and_make_phrases():
    lines = [TextLine("THE Old Bakery", 0.9, (0.1, 0.2, 0.5, 0.3)),
             TextLine("Café Crème", 0.8, (0.1, 0.5, 0.4, 0.6)),
             TextLine("bakery", 0.95, (0.6, 0.7, 0.9, 0.8)),
             TextLine("Coca-Cola", 0.7, (0.1, 0.8, 0.3, 0.9))]
    facts = {f.word: f for f in text_facts(lines)}
    assert set(facts) == {"old", "bakery", "old bakery", "cafe", "creme", "cafe creme",
                          "coca-cola", "coca", "cola"}  # no "the", no "the old bakery"
    assert all(isinstance(f, Fact) and f.kind == "text" for f in facts.values())
    # a word read twice is one fact, with its best line's confidence and box
    assert facts["bakery"].confidence == 0.95
    assert json.loads(facts["bakery"].detail) == {"box": [0.6, 0.7, 0.9, 0.8],
                                                  "shown": "bakery"}
    assert json.loads(facts["cafe"].detail)["shown"] == "Café Crème"
    assert text_facts([]) == []


def test_phrases_inside_a_longer_line_are_written_as_the_query_writes_them():
    words = {f.word for f in text_facts([TextLine("Fresh bread of the day, every day! Vitamin C",
                                                  0.9, (0, 0, 1, 1))])}
    assert {"fresh bread", "bread day", "fresh bread day", "day", "vitamin c"} <= words
    assert not {"bread of", "of the", "every day", "c"} & words  # stop words, one letter
    assert "fresh bread day day" in words and "fresh bread day day vitamin" not in words
    assert phrase("  Museum   of ART! ") == "museum art"
    # a quoted query phrase meets the phrase facts: pamir.text.query writes it the same way
    from pamir.text.query import parse

    (term,) = parse('"Museum of Art"').terms
    assert fold(term.text) == phrase("Museum of Art")


# ------------------------------------------------------------------------------ bad input

def test_bad_files_give_a_note_not_an_exception(tmp_path, monkeypatch):
    good = tmp_path / "good.png"
    Image.fromarray(paint("harbour", "DejaVuSans-Bold.ttf", 44, (255, 255, 255),
                          (20, 100, 50), 0)).save(good)
    truncated = tmp_path / "truncated.jpg"
    backdrop().save(truncated, quality=90)
    truncated.write_bytes(truncated.read_bytes()[:300])
    junk = tmp_path / "junk.jpg"
    junk.write_bytes(b"not a picture at all" * 10)
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    bomb = tmp_path / "bomb.png"
    backdrop().save(bomb)
    monkeypatch.setattr(images, "MAX_PIXELS", 10_000)  # the bomb is over the limit
    paths = [truncated, junk, empty, tmp_path / "missing.jpg", bomb, tmp_path, good]
    out = read_texts(paths)
    assert len(out) == len(paths)
    for path, (facts, note) in zip(paths[:-1], out[:-1]):
        assert facts is None and str(path) in note
    assert "decompression bomb" in out[4][1]
    monkeypatch.undo()
    assert read_texts([good])[0][0][0].word == "harbour"


def test_a_batch_reads_as_each_picture_alone_and_a_failing_picture_is_named(tmp_path,
                                                                            monkeypatch):
    """read_texts detects alike-sized pictures together: the same words as one at a time;
    a picture whose reading fails is named, the others of its batch are read."""
    from pamir.facts.ocr import shared_reader

    paths = []
    for i, (text, tilt) in enumerate([("BAKERY", 0), ("Museum", 3), ("TICKET", -4)]):
        paths.append(tmp_path / f"sign-{i}.jpg")
        Image.fromarray(paint(text, "DejaVuSans-Bold.ttf", 44, (20, 20, 20), (240, 232, 205),
                              tilt, seed=i)).save(paths[-1], quality=92)
    paths.append(tmp_path / "plain.jpg")
    backdrop(seed=4).save(paths[-1], quality=92)
    odd = tmp_path / "odd.png"  # another size: detected on its own
    Image.fromarray(paint("harbour", "DejaVuSerif.ttf", 40, (255, 255, 255), (20, 100, 50),
                          0)).resize((500, 333)).save(odd)
    paths.insert(2, odd)
    alone = [{f.word for f in text_facts(TextReader().read(p))} for p in paths]
    together = read_texts(paths)
    assert [{f.word for f in facts} for facts, _ in together] == alone
    assert alone[0] >= {"bakery"} and alone[2] >= {"harbour"} and alone[-1] == set()

    reader = shared_reader()
    read_many = reader.read_many

    def failing(pictures):
        if any(p is not None and p.shape[:2] == (333, 500) for p in pictures):
            raise RuntimeError("the network refused it")
        return read_many(pictures)

    monkeypatch.setattr(reader, "read_many", failing)
    out = read_texts(paths)
    assert out[2][0] is None and str(odd) in out[2][1] and "refused" in out[2][1]
    assert [{f.word for f in facts} for facts, _ in out[:2] + out[3:]] == alone[:2] + alone[3:]


def test_extreme_shapes_do_not_break_the_reader(reader):
    for shape in ((4, 3000, 3), (3000, 6, 3), (1, 1, 3), (10, 1600, 3), (40, 5000, 3)):
        assert reader.read(np.full(shape, 200, np.uint8)) == []
    with pytest.raises(images.ImageError):
        reader.read(np.zeros((10, 10), np.uint8))


# ------------------------------------------------------------------------------ models

def test_the_bundled_models_are_used_and_nothing_is_downloaded(monkeypatch):
    models = bundled_models()
    assert all(p.is_file() and "rapidocr" in p.parts for p in models.values())

    def refuse(*args, **kwargs):
        raise AssertionError("pamir.facts.ocr tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    fresh = TextReader(OcrSettings(angle_classifier=True, coarse_side=320))
    rgb = paint("exit", "DejaVuSans-Bold.ttf", 56, (255, 255, 255), (180, 30, 30), 0)
    assert [line.text.lower() for line in fresh.read(rgb)] == ["exit"]


# ------------------------------------------------------------------------------ cost

def test_a_coarse_detection_that_finds_nothing_ends_the_reading():
    coarse = TextReader(OcrSettings(coarse_side=320, detect_side=640))
    sides = []
    boxes = coarse._boxes
    coarse._boxes = lambda bgr, side, engine: sides.append(side) or boxes(bgr, side, engine)
    assert coarse.read(np.asarray(backdrop(seed=5))) == []
    assert sides == [320]  # the full-size detection never ran
    words = {f.word for f in text_facts(coarse.read(
        paint("LIBRARY", "DejaVuSans-Bold.ttf", 48, (20, 20, 20), (240, 232, 205), 0)))}
    assert "library" in words and sides == [320, 320, 640]


def test_only_the_largest_lines_are_read():
    im = backdrop(seed=6)
    draw = ImageDraw.Draw(im)
    draw.rectangle((20, 20, 620, 400), fill=(245, 245, 235))
    for i, (word, size) in enumerate([("small", 22), ("HUGE", 64), ("tiny", 20),
                                      ("BIG", 56)]):
        draw.text((40, 30 + 95 * i), word, font=font("DejaVuSans-Bold.ttf", size),
                  fill=(10, 10, 10))
    lines = TextReader(OcrSettings(max_lines=2)).read(np.asarray(im))
    assert [line.text for line in lines] == ["HUGE", "BIG"]  # in reading order


def test_the_fingerprint_names_the_models_and_the_settings():
    assert "PP-OCRv6_rec_small" in fingerprint()
    assert fingerprint() == fingerprint(OcrSettings())
    assert fingerprint(OcrSettings(detect_side=480)) != fingerprint()


# ------------------------------------------------------------------------------ in an index

def test_read_texts_as_the_index_pass_reader_makes_painted_words_searchable(tmp_path,
                                                                            monkeypatch):
    """pamir.index.passes.run_pass with read_texts as its reader: the painted words are
    found by a word, a quoted phrase (stop words and all) and the text: filter."""
    from pamir.index import Index
    from pamir.index.passes import run_pass
    from fakes import FakeSystem
    from pictures import make_pictures

    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")
    folder = tmp_path / "pictures"
    make_pictures(folder)
    Image.fromarray(paint("Fresh Bread", "DejaVuSans-Bold.ttf", 44, (20, 20, 20),
                          (240, 232, 205), 3)).save(folder / "bakery.png")
    Image.fromarray(paint("MUSEUM OF ART", "DejaVuSerif-Bold.ttf", 36, (255, 255, 255),
                          (20, 100, 50), -4)).save(folder / "museum.jpg")
    (folder / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a JPEG")
    system = FakeSystem()
    with Index.create(tmp_path / "index", system.vocabulary, system.idf) as ix:
        ix.update([folder], system.transform_paths)
        report = run_pass(ix, "text", ("text",), read_texts, batch_size=4, threads=2)
        # the nine plain pictures read too, with no text (the corrupt file is not indexed)
        assert (report.read, report.with_facts, report.failed) == (11, 2, 0)

        def top(query):
            return [h.path.rsplit("/", 1)[1] for h in ix.search(query, 1)]

        assert top("bread") == ["bakery.png"]
        assert top('"fresh bread"') == ["bakery.png"]
        assert top('"museum of art"') == ["museum.jpg"]
        assert top("text:museum") == ["museum.jpg"]


def test_pamir_index_reads_the_text_after_the_pictures_and_no_text_turns_it_off(tmp_path, monkeypatch):
    """The text pass of `pamir index` (a model's index here): painted words are found by
    `pamir search` after it; `--no-text` reads nothing; a second run reads nothing again."""
    import json

    import pamir.commands.index as product
    from fakes import run
    from fakes import FakeSystem
    from pictures import make_pictures

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.json").write_text('{"fake": 1}')
    monkeypatch.setattr(product, "load_system", lambda path: FakeSystem())
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")
    pictures = tmp_path / "pictures"
    make_pictures(pictures)
    Image.fromarray(paint("FRESH BREAD", "DejaVuSans-Bold.ttf", 48, (20, 20, 20),
                          (240, 232, 205), 0)).save(pictures / "sign.png")
    ix = tmp_path / "ix"
    r = json.loads(run("index", model, pictures, "--index", ix, "--json", "--no-text").stdout)
    assert r["text"] is None
    r = json.loads(run("index", model, pictures, "--index", ix, "--json").stdout)
    assert r["text"]["read"] == 10 and r["text"]["with_facts"] >= 1
    hits = json.loads(run("search", "bread", "--index", ix, "--json").stdout)["hits"]
    assert Path(hits[0]["path"]).name == "sign.png" and hits[0]["matched"] == ["bread"]
    again = json.loads(run("index", model, pictures, "--index", ix, "--json").stdout)
    assert again["text"]["read"] == 0
    from pamir.jobs import indexing
    from pamir.extras import MissingExtra

    def no_ocr(extra):
        if extra == "ocr":
            raise MissingExtra("ocr", "rapidocr")

    monkeypatch.setattr(indexing, "require", no_ocr)  # no [ocr] extra: one line names it
    r = run("index", model, pictures, "--index", tmp_path / "ix2")
    assert "text in pictures not read" in r.output and "pamir[ocr]" in r.output


def test_lines_found_at_the_detector_s_size_are_read_on_the_closer_look(tmp_path):
    """As the reading stage gives a camera-size photo (its raster at the detector's 320
    pixels, its closer look on demand): a small sign's word is read from the closer look,
    asked for once; a photo with no lines never asks for it."""
    from pamir.facts.ocr import read_text_rasters
    from pamir.features.rasters import SLACK, Need, read_item

    sign = Image.fromarray(paint("BAKERY", "DejaVuSans-Bold.ttf", 40, (20, 20, 20),
                                 (240, 232, 205), 0)).resize((4032, 2688))
    sign.save(tmp_path / "sign.jpg", quality=90)
    backdrop(seed=3).resize((4032, 2688)).save(tmp_path / "plain.jpg", quality=90)
    asked, pictures = [], []
    for name in ("sign.jpg", "plain.jpg"):
        item = read_item(tmp_path / name, [Need("text", long=320, slack=SLACK)], detail=1600)
        kept, rgb = item.for_pass(320, 1600)
        assert max(rgb.shape[:2]) <= 320 and kept.frames == []
        pictures.append((str(tmp_path / name), rgb, item.size,
                         lambda side, kept=kept, name=name: asked.append(name)
                         or kept.detail(side)))
    (sign_facts, _), (plain_facts, _) = read_text_rasters(pictures)
    assert "bakery" in {f.word for f in sign_facts} and plain_facts == []
    assert asked == ["sign.jpg"]
