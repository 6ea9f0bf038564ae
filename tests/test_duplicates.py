"""Copies and bursts (pamir.duplicates.looks, pamir.duplicates.grouping, pamir.duplicates.groups): each kind found on Corel
pictures made into copies the ways people make them, the other pictures of the same CD (the
same scene) in no group, search folding a group into one hit, `pamir duplicates --move-to`
never overwriting, and the page's view of the groups in headless Chromium."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageEnhance

from fakes import FakeSystem, run
from pamir.duplicates.groups import DuplicateGroup, find_duplicates, move_others, stored_duplicates
from pamir.duplicates.grouping import find_groups
from pamir.index import Index
from pamir.duplicates.looks import Looks, look_of

#: A Corel CD of one scene (cars): its pictures look alike and are no copies of one another.
CD = "1000"
NEGATIVES = 8
EXIF_IFD, SHOT = 0x8769, 36867


def _exif(when: datetime | None) -> Image.Exif:
    exif = Image.Exif()
    if when is not None:
        exif.get_ifd(EXIF_IFD)[SHOT] = when.strftime("%Y:%m:%d %H:%M:%S")
    return exif


def _copies(src: Path, folder: Path, when: datetime) -> dict[str, Path]:
    """An original and its copies: the same bytes, the same pixels in other bytes (a comment
    added; a PNG export) and near-copies (half size, quality 60, 5 % cropped, 10 % brighter)."""
    im = Image.open(src).convert("RGB")
    out = {"original": folder / "car.jpg"}
    im.save(out["original"], quality=92, exif=_exif(when))
    data = out["original"].read_bytes()
    out["copy"] = folder / "car copy.jpg"
    out["copy"].write_bytes(data)
    out["tagged"] = folder / "car tagged.jpg"
    out["tagged"].write_bytes(data[:2] + b"\xff\xfe\x00\x08tagged" + data[2:])
    out["png"] = folder / "car export.png"
    Image.open(out["original"]).convert("RGB").save(out["png"])
    w, h = im.size
    near = {"half": im.resize((w // 2, h // 2), Image.LANCZOS),
            "crop": im.crop((round(w * .025), round(h * .025), w - round(w * .025),
                             h - round(h * .025))),
            "bright": ImageEnhance.Brightness(im).enhance(1.1), "q60": im}
    for name, picture in near.items():
        out[name] = folder / f"car {name}.jpg"
        picture.save(out[name], quality=60 if name == "q60" else 92, exif=_exif(when))
    return out


def _burst(src: Path, folder: Path, when: datetime, frames: int = 3) -> list[Path]:
    """Shots a second apart, each 3 pixels further right."""
    im = Image.open(src).convert("RGB")
    w, h = im.size
    paths = []
    for k in range(frames):
        path = folder / f"burst {k}.jpg"
        im.crop((3 * k, 0, w - 3 * frames + 3 * k, h)).save(path, quality=92,
                                                             exif=_exif(when + timedelta(seconds=k)))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def library(tmp_path_factory, corel_root):
    """A folder of a CD's pictures: one original with its copies, a burst, and NEGATIVES
    other pictures of the CD as they are; indexed, its copies found."""
    root = tmp_path_factory.mktemp("duplicates")
    folder = root / "pictures"
    folder.mkdir()
    cd = sorted((Path(corel_root) / "images" / CD).glob("*.jpeg"))
    when = datetime(2024, 5, 1, 10, 0, 0)
    copies = _copies(cd[0], folder, when)
    burst = _burst(cd[1], folder, when + timedelta(days=1))
    negatives = []
    for src in cd[2:2 + NEGATIVES]:
        negatives.append(folder / src.name)
        shutil.copyfile(src, negatives[-1])
    system = FakeSystem()
    with Index.create(root / "index", system.vocabulary, system.idf) as ix:
        ix.update([folder], system.transform_paths)
        groups = find_duplicates(ix)
    return {"root": root, "index": root / "index", "copies": copies, "burst": burst,
            "negatives": negatives, "groups": groups, "system": system}


def _kinds(groups, kind):
    return [g for g in groups if g.kind == kind]


def test_each_kind_found(library):
    copies = {str(p) for p in library["copies"].values()}
    exact = {str(library["copies"][k]) for k in ("original", "copy", "tagged", "png")}
    [near] = _kinds(library["groups"], "near")
    assert set(near.paths) == copies  # every copy, whichever way it was made
    assert [set(near.paths[near.ids.index(i)] for i in part) for part in near.parts
            if len(part) > 1] == [exact]  # the same bytes and the same pixels, exact
    [burst] = _kinds(library["groups"], "burst")
    assert set(burst.paths) == {str(p) for p in library["burst"]}
    assert not _kinds(library["groups"], "exact")  # no group is all exact copies here
    # the one to keep: the most pixels, with the camera's time, not the PNG export
    assert Path(near.paths[near.ids.index(near.keep)]).name in ("car.jpg", "car copy.jpg",
                                                                 "car tagged.jpg")


def test_hard_negatives_in_no_group(library):
    """The other pictures of the CD show the same scene: not copies, not a burst."""
    grouped = {p for g in library["groups"] for p in g.paths}
    assert not grouped & {str(p) for p in library["negatives"]}


def test_copies_are_of_one_moment():
    """Pure arrays: the same hash is an exact copy whatever the look; two pictures alike but
    shot an hour apart are not copies, even through an undated export alike to both; shot a
    second apart, they are a burst."""
    rng = np.random.default_rng(0)
    base = (rng.random((6, 6, 3)) * 255).astype(np.uint8)
    pixels = np.stack([np.kron(base, np.ones((4, 4, 1), np.uint8))] * 4)
    pixels[3] = 255 - pixels[3]  # another look entirely, but the same file as picture 0
    looks = Looks(pixels, np.array([(192, 128)] * 4))
    hashes = ["a", "b", "c", "a"]
    hour = find_groups(hashes, looks, np.array([0.0, 3600.0, np.nan, 0.0]))
    [group] = hour
    assert group.kind == "near" and 1 not in group.members and {0, 3} <= set(group.members)
    assert [0, 3] in group.parts  # the same file: exact
    second = find_groups(hashes, looks, np.array([0.0, 1.0, np.nan, 0.0]))
    [burst] = [g for g in second if g.kind == "burst"]
    assert burst.members == [0, 1, 2, 3] and len(burst.parts) == 2


def test_the_look_reads_the_camera_time(library):
    look = look_of(str(library["burst"][1]))
    assert look.shot == datetime(2024, 5, 2, 10, 0, 1).replace(
        tzinfo=__import__("datetime").timezone.utc).timestamp()
    assert look_of(str(library["copies"]["png"])).shot is None  # a PNG export has none
    assert look.pixels.shape == (24, 24, 3) and (look.width, look.height) == (183, 128)


def test_search_folds_copies_and_bursts_when_asked(library):
    with Index.open(library["index"]) as ix:
        q = np.ones(ix.T, np.float32)
        every = ix.search(q, len(ix), collapse="none")
        copies = ix.search(q, len(ix))  # the default
        bursts = ix.search(q, len(ix), collapse="bursts")
        with pytest.raises(ValueError, match="collapse"):
            ix.search(q, 3, collapse="all")
    n_copies, n_burst = len(library["copies"]), len(library["burst"])
    assert len(every) == len(ix_paths(library))
    assert len(copies) == len(every) - (n_copies - 1)
    assert len(bursts) == len(copies) - (n_burst - 1)
    [card] = [h for h in copies if h.folded]
    assert len(card.folded) == n_copies - 1
    assert card.id == min((h for h in every if h.path in {str(p) for p in
                                                          library["copies"].values()}),
                          key=lambda h: (-h.score, h.id)).id  # its best picture shows
    # k pictures asked, k shown, however many were folded
    with Index.open(library["index"]) as ix:
        assert len(ix.search(q, 5, collapse="bursts")) == 5


def ix_paths(library):
    with Index.open(library["index"]) as ix:
        return [p.path for p in ix.pictures()]


def test_cli_lists_groups_as_json_and_as_a_list(library, tmp_path):
    out = json.loads(run("duplicates", "--index", library["index"], "--json").stdout)
    assert sorted(g["kind"] for g in out["groups"]) == ["burst", "near"]
    listed = tmp_path / "copies.tsv"
    r = run("duplicates", "--index", library["index"], "--kind", "near", "--list", listed)
    rows = [line.split("\t") for line in listed.read_text().splitlines()[1:]]
    assert len(rows) == len(library["copies"]) and sum(r[2] == "keep" for r in rows) == 1
    assert "near-copies" in r.stdout
    bad = run("duplicates", "--index", library["index"], "--kind", "similar", ok=False)
    assert bad.exit_code == 2 and "exact, near, burst" in bad.output


def test_move_to_never_overwrites(tmp_path):
    """The others go into the folder under their own name, or a numbered one where it is
    taken; what was there stays byte for byte; the one kept and other files stay put."""
    folder, aside = tmp_path / "pictures", tmp_path / "aside"
    folder.mkdir()
    aside.mkdir()
    paths = []
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        paths.append(folder / name)
        paths[-1].write_bytes(name.encode() * 10)
    (folder / "b.jpg.xmp").write_text("<x:xmpmeta/>")
    (aside / "b.jpg").write_bytes(b"already here")
    group = DuplicateGroup("near", [1, 2, 3], [str(p) for p in paths], keep=1)
    moved = move_others([group, group], aside)
    assert (aside / "b.jpg").read_bytes() == b"already here"
    assert (aside / "b (2).jpg").read_bytes() == b"b.jpg" * 10
    assert (aside / "b (2).jpg.xmp").read_text() == "<x:xmpmeta/>"  # its sidecar went along
    assert (aside / "c.jpg").read_bytes() == b"c.jpg" * 10
    assert paths[0].exists() and not paths[1].exists() and not paths[2].exists()
    assert len(moved.moved) == 2 and not moved.skipped  # each picture moved once


def test_cli_moves_the_others_and_says_so(library, tmp_path):
    """`--move-to` on a copy of the library: the editor's choice is kept where it is."""
    root = tmp_path / "lib"
    shutil.copytree(library["root"] / "pictures", root / "pictures")
    index_dir, system = root / "index", library["system"]
    with Index.create(index_dir, system.vocabulary, system.idf) as ix:
        ix.update([root / "pictures"], system.transform_paths)
        [near] = [g for g in find_duplicates(ix) if g.kind == "near"]
        png = near.ids[[Path(p).name for p in near.paths].index("car export.png")]
        ix.keep_picture(png, near.ids)
    r = run("duplicates", "--index", index_dir, "--kind", "exact,near", "--move-to",
            tmp_path / "aside")
    assert "7 pictures moved into" in r.output
    assert (root / "pictures" / "car export.png").exists()
    assert not (root / "pictures" / "car.jpg").exists()
    assert (tmp_path / "aside" / "car.jpg").exists()
    assert (root / "pictures" / "burst 0.jpg").exists()  # bursts only when asked


def test_stored_groups_and_an_editors_choice(library, tmp_path):
    root = tmp_path / "lib"
    shutil.copytree(library["index"], root)
    with Index.open(root, writable=True) as ix:
        [near] = _kinds(stored_duplicates(ix), "near")
        other = next(i for i in near.ids if i != near.keep)
        ix.keep_picture(other, near.ids)
        [again] = _kinds(stored_duplicates(ix), "near")
    assert again.keep == other and again.chosen and not near.chosen


# ------------------------------------------------------------------------ the page
def test_page_shows_groups_and_keeps_one(library, tmp_path, browser):
    from conftest import serve_in_thread, wait
    from selenium.webdriver.common.by import By

    from pamir.commands.index import LOOPBACK_NAMES
    from pamir.server import create_app

    root = tmp_path / "lib"
    shutil.copytree(library["index"], root)
    served = serve_in_thread(create_app(root, system=library["system"],
                                        allowed_hosts=LOOPBACK_NAMES))
    base = next(served)
    try:
        browser.get(base + "/")
        wait(browser).until(lambda d: d.find_element(By.ID, "duplicates").is_displayed())
        box = browser.find_element(By.ID, "duplicates")
        assert "Copies and bursts (2 groups)" in box.text
        box.find_element(By.TAG_NAME, "summary").click()
        near = box.find_element(By.CSS_SELECTOR, '.group[data-kind="near"]')
        assert "near-copies (8)" in near.text
        figures = near.find_elements(By.TAG_NAME, "figure")
        assert len(figures) == 8
        assert len(near.find_elements(By.CSS_SELECTOR, "figure.kept")) == 1
        target = next(f for f in figures if "kept" not in f.get_attribute("class"))
        chosen = int(target.get_attribute("data-id"))
        target.find_element(By.CSS_SELECTOR, "button.keep-one").click()
        wait(browser).until(lambda d: d.find_element(
            By.CSS_SELECTOR, f'#duplicates figure[data-id="{chosen}"]').get_attribute(
            "class") == "kept")
        wait(browser).until(lambda d: "Kept in the index" in d.find_element(
            By.ID, "message").text)
        with Index.open(root) as ix:
            [group] = _kinds(stored_duplicates(ix), "near")
        assert group.keep == chosen and group.chosen
        # a search shows the copies as one card, "+7" on it
        browser.get(base + "/?q=red&k=60")
        wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results .hit"))
        folded = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#results .folded")]
        assert folded == ["+7"]
    finally:
        served.close()


def test_corrupt_picture_is_skipped_with_a_note(tmp_path):
    from pamir.duplicates.looks import read_looks

    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    good = tmp_path / "good.png"
    Image.new("RGB", (40, 30), (200, 30, 30)).save(good)
    [(none, note), (look, ok)] = read_looks([str(bad), str(good)])
    assert none is None and "bad.jpg" in note
    assert look is not None and ok is None
