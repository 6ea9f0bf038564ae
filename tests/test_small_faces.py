"""Faces of every size (pamir.facts.people.zoom): real faces (tests/data/faces) composed into a
group photo of several megapixels, too small for the detector's scaled picture, are found
by the second look and named from portraits; a small face's name is less sure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

pytest.importorskip("dlib")
from pamir.facts.people import NAME_DISTANCE, FaceFinder, assign, find_faces, iou  # noqa: E402
from pamir.facts.people import zoom  # noqa: E402
from pamir.facts.people.naming import SURE_FACE, name_confidence  # noqa: E402

DATA = Path(__file__).parent / "data" / "faces"
PHOTO = (3000, 2000)


@pytest.fixture(scope="module")
def finder():
    return FaceFinder()


def head(finder, name: str, height: int):
    """The head of tests/data/faces/NAME.jpg, scaled so that its face box is `height` px
    high, with a soft elliptical mask, and the face box in the head's pixels."""
    rgb = np.asarray(Image.open(DATA / f"{name}.jpg").convert("RGB"))
    (face,) = FaceFinder(small_faces=False).find(rgb)
    h, w = rgb.shape[:2]
    x0, y0, x1, y1 = face.box[0] * w, face.box[1] * h, face.box[2] * w, face.box[3] * h
    cut = (max(0, x0 - 0.5 * (x1 - x0)), max(0, y0 - 0.6 * (y1 - y0)),
           min(w, x1 + 0.5 * (x1 - x0)), min(h, y1 + 0.5 * (y1 - y0)))
    z = height / (y1 - y0)
    crop = Image.fromarray(rgb).crop(tuple(round(v) for v in cut))
    crop = crop.resize((round(crop.width * z), round(crop.height * z)), Image.Resampling.LANCZOS)
    mask = Image.new("L", crop.size, 0)
    ImageDraw.Draw(mask).ellipse((0, 0, crop.width - 1, crop.height - 1), fill=255)
    mask = mask.filter(ImageFilter.GaussianBlur(crop.width / 20))
    return crop, mask, ((x0 - cut[0]) * z, (y0 - cut[1]) * z, (x1 - cut[0]) * z,
                        (y1 - cut[1]) * z)


def group_photo(finder, path: Path, people: list[tuple[str, int]]) -> list[tuple]:
    """A PHOTO-sized JPEG of the heads side by side on a blue-grey wall; the face boxes as
    fractions of the photo."""
    rng = np.random.default_rng(0)
    wall = np.clip(rng.normal((90, 105, 125), 6, (PHOTO[1], PHOTO[0], 3)), 0, 255)
    photo = Image.fromarray(wall.astype(np.uint8))
    boxes = []
    for k, (name, height) in enumerate(people):
        crop, mask, box = head(finder, name, height)
        x, y = 200 + k * PHOTO[0] // (len(people) + 1), 700 + 150 * (k % 2)
        photo.paste(crop, (x, y), mask)
        boxes.append(((x + box[0]) / PHOTO[0], (y + box[1]) / PHOTO[1],
                      (x + box[2]) / PHOTO[0], (y + box[3]) / PHOTO[1]))
    photo.save(path, quality=92)
    return boxes


def test_small_faces_of_a_group_photo_are_found_and_named(finder, tmp_path):
    people = [("obama2", 90), ("biden2", 90), ("kit_harington", 90), ("obama3", 30)]
    boxes = group_photo(finder, tmp_path / "group.jpg", people)
    ((faces, note),) = find_faces([tmp_path / "group.jpg"])
    assert note == ""
    # none of them is found on the scaled picture alone (1024 px: 31- and 10-px faces)
    today = FaceFinder(small_faces=False)
    assert today.find(np.asarray(Image.open(tmp_path / "group.jpg"))) == []
    found = [max(faces, key=lambda f: iou(f.box, b)) for b in boxes]
    assert all(iou(f.box, b) >= 0.3 for f, b in zip(found, boxes))
    assert len(faces) == len(boxes)
    assert 75 <= found[0].size <= 110 and 20 <= found[3].size <= 40
    # named from two portraits, as pamir.facts.people.who carries names; the stranger takes none
    portraits = {n: finder.find(np.asarray(Image.open(DATA / f"{n}.jpg")))[0]
                 for n in ("obama", "biden")}
    named = assign(np.stack([f.embedding for f in found[:3]]),
                   np.stack([f.embedding for f in portraits.values()]), list(portraits),
                   NAME_DISTANCE)
    assert [n for n, _ in named] == ["obama", "biden", None]


def test_a_small_face_is_named_with_less_certainty():
    d = 0.4
    assert name_confidence(d, None) == name_confidence(d, SURE_FACE) == name_confidence(d, 400)
    assert name_confidence(d, 25) == pytest.approx(name_confidence(d) * 25 / SURE_FACE)
    assert name_confidence(d, 25) < name_confidence(d, 50) < name_confidence(d, SURE_FACE)


def test_cues_are_face_like_skin_blobs_alone():
    """A skin-coloured oval with darker eyes on a grey wall is a cue; the same oval without
    eyes is not, nor is a patch of a large skin-coloured surface (sand)."""
    wall = Image.new("RGB", (400, 200), (110, 115, 120))
    draw = ImageDraw.Draw(wall)
    for x0, eyes in ((40, True), (160, False)):
        draw.ellipse((x0, 60, x0 + 24, 92), fill=(205, 160, 130))
        if eyes:
            draw.rectangle((x0 + 5, 70, x0 + 9, 73), fill=(60, 45, 40))
            draw.rectangle((x0 + 15, 70, x0 + 19, 73), fill=(60, 45, 40))
    draw.rectangle((260, 0, 400, 200), fill=(215, 175, 140))           # sand
    draw.ellipse((300, 80, 324, 112), fill=(205, 160, 130))             # a face on it
    cues = zoom.cues(np.asarray(wall), smallest=10)
    assert [c.box[0] for c in cues] == [40]


def test_looks_are_bounded_on_a_picture_without_faces(finder, monkeypatch):
    """Many face-like blobs and no face: the looks stop at the budget's pixels."""
    wall = Image.new("RGB", (2048, 1536), (110, 115, 120))
    draw = ImageDraw.Draw(wall)
    for i in range(200):
        x, y = 60 + (i % 20) * 98, 60 + (i // 20) * 140
        draw.ellipse((x, y, x + 40, y + 52), fill=(205, 160, 130))
        draw.rectangle((x + 8, y + 14, x + 14, y + 18), fill=(60, 45, 40))
        draw.rectangle((x + 26, y + 14, x + 32, y + 18), fill=(60, 45, 40))
    looked = []
    real = zoom.look
    monkeypatch.setattr(zoom, "look", lambda *a: looked.append(1) or real(*a))
    assert finder.find(np.asarray(wall)) == []
    scaled = finder.scaled(np.asarray(wall))
    assert 0 < len(looked) <= zoom.budget(scaled.shape[0] * scaled.shape[1]) \
        // (zoom.look_pixels() // 2)


def test_the_pass_reader_takes_pictures_decoded_once(tmp_path):
    """read_faces over paths, and over the same pictures decoded beforehand (as a reader
    that decodes each picture once for every pass gives them), find the same faces."""
    from pamir.facts.people.faces import RASTER_SIDE, load_for_detection  # noqa: PLC0415
    from pamir.facts.people.pictures import read_faces  # noqa: PLC0415

    paths = [DATA / "obama.jpg", DATA / "obama_and_biden.jpg", tmp_path / "missing.jpg"]
    decoded = [load_for_detection(p, RASTER_SIDE) for p in paths[:2]] + [None]
    by_path, given = read_faces(paths), read_faces(paths, decoded)
    assert [len(f) for f, _ in by_path[:2]] == [len(f) for f, _ in given[:2]] == [1, 2]
    for (a, _), (b, _) in zip(by_path[:2], given[:2]):
        assert all(np.allclose(x.face.embedding, y.face.embedding) for x, y in zip(a, b))
    assert by_path[2][0] is None and given[2][0] is None and "not found" in given[2][1]


def test_the_closer_look_is_made_only_where_a_cue_may_be_a_face(finder, tmp_path):
    """As the reading stage gives them (the photo read at the detector's 1,024 pixels, its
    closer look on demand): a group photo of small faces asks for the closer look and finds
    them in it; a wall with nothing face-like on it never asks."""
    from pamir.features.rasters import SLACK, Need, read_item  # noqa: PLC0415

    people = [("obama2", 90), ("biden2", 90), ("kit_harington", 90)]
    boxes = group_photo(finder, tmp_path / "group.jpg", people)
    Image.fromarray(np.clip(np.random.default_rng(1).normal((90, 105, 125), 6, (2000, 3000, 3)),
                            0, 255).astype(np.uint8)).save(tmp_path / "wall.jpg", quality=92)
    asked = []
    for name in ("group.jpg", "wall.jpg"):
        item = read_item(tmp_path / name, [Need("faces", long=1024, slack=SLACK)],
                         detail=zoom.ZOOM_SIDE)
        assert max(item.rgb.shape[:2]) == 1500  # 1/2 of 3,000; the closer look 2,048
        faces = finder.find(item.rgb, item.size,
                            lambda side, item=item, name=name: asked.append(name)
                            or item.detail(side))
        if name == "group.jpg":
            assert all(max(iou(f.box, b) for f in faces) >= 0.3 for b in boxes)
        else:
            assert faces == []
    assert asked == ["group.jpg"]
