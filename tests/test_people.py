"""People in the index (issue 34): the faces pass of `pamir index` over real face pictures
(tests/data/faces), names from regions, tags and keywords carried to unnamed faces and found
by `pamir search NAME`, the pass killed and resumed, an index of schema 4 upgraded, naming,
merging and "not this person" through the API with both roles, decisions kept when a
picture is read again, `pamir people --forget`, and the page in a headless Chromium."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("dlib")

from pamir.jobs.indexing import read_pass  # noqa: E402
from pamir.index import SCHEMA_VERSION, Index  # noqa: E402
from pamir.index.passes import run_pass  # noqa: E402
from pamir.facts.people.faces import fingerprint  # noqa: E402
from pamir.facts.people.pictures import read_faces  # noqa: E402
from pamir.facts.people.who import PeopleError, forget, identify  # noqa: E402
from fakes import TOKENS, FakeSystem, run  # noqa: E402

DATA = Path(__file__).parent / "data" / "faces"
needs_exiftool = pytest.mark.skipif(shutil.which("exiftool") is None,
                                    reason="exiftool not installed (.ci/run installs it)")
#: obama_and_biden.jpg's Biden, as a digiKam region (MWG: x, y the centre).
BIDEN_REGION = ("-XMP-mwg-rs:RegionInfo={AppliedToDimensions={W=480,H=343,Unit=pixel},"
                "RegionList=[{Area={X=0.42,Y=0.38,W=0.12,H=0.16,Unit=normalized},"
                "Name=Joe Biden,Type=Face}]}")


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def exiftool(*args):
    subprocess.run(["exiftool", "-q", "-q", "-overwrite_original", *map(str, args)],
                   check=True)


def folder_of_faces(root: Path) -> Path:
    """The eight face pictures, named the way people's tools name them: obama.jpg by a
    People/ tag in its sidecar (digiKam), obama_and_biden.jpg's Biden by an embedded MWG
    region; biden.jpg and biden2.jpg have keywords "Joe Biden" and "beach"."""
    pictures = root / "pictures"
    pictures.mkdir(parents=True)
    for p in DATA.glob("*.jpg"):
        shutil.copy(p, pictures / p.name)
    subprocess.run(["exiftool", "-q", "-q", "-XMP-digiKam:TagsList=People/Barack Obama",
                    "-o", str(pictures / "obama.jpg.xmp"), str(pictures / "obama.jpg")],
                   check=True)
    exiftool(BIDEN_REGION, pictures / "obama_and_biden.jpg")
    exiftool("-XMP-dc:Subject=Joe Biden", "-XMP-dc:Subject=beach", pictures / "biden.jpg")
    return pictures


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The folder indexed once with its faces read (copied by `index_of` for each test)."""
    if shutil.which("exiftool") is None:
        pytest.skip("exiftool not installed")
    root = tmp_path_factory.mktemp("people")
    pictures = folder_of_faces(root)
    system = FakeSystem()
    with Index.create(root / "index", system.vocabulary, system.idf) as ix:
        ix.update([pictures], system.transform_paths)
        report = read_pass(ix, "faces")
    return root, report


def index_of(built, tmp_path) -> Path:
    root, _ = built
    shutil.copytree(root / "index", tmp_path / "index")
    return tmp_path / "index"


def names(hits) -> list[str]:
    return sorted(h.path.rsplit("/", 1)[1] for h in hits)


def who(ix) -> dict[str, str | None]:
    """{picture name: the names of its faces, sorted, "-" for an unnamed face}."""
    people = {p.id: p.label for p in ix.people()}
    out: dict[str, list[str]] = {}
    for f in ix.faces():
        name = Path(ix.picture(f.picture).path).name
        p = ix.person(f.person) if f.person is not None else None
        out.setdefault(name, []).append(p.shown if p is not None and p.name else "-")
    assert all(f.person in people for f in ix.faces())
    return {k: " + ".join(sorted(v)) for k, v in out.items()}


# ----------------------------------------------------------------------------- the pass
def test_faces_are_found_named_and_searchable(built, tmp_path):
    _, report = built
    assert report["read"] == 8 and report["failed"] == 0
    assert report["people"]["faces"] == 9
    with Index.open(index_of(built, tmp_path)) as ix:
        assert who(ix) == {
            "obama.jpg": "Barack Obama",             # its sidecar's People/ tag
            "obama2.jpg": "Barack Obama",            # carried: it looks like obama.jpg
            "obama3.jpg": "Barack Obama",
            "obama_and_biden.jpg": "Barack Obama + Joe Biden",  # the region, carried
            "biden.jpg": "Joe Biden",                # a keyword that is a known name
            "biden2.jpg": "Joe Biden",               # carried
            "kit_harington.jpg": "-",                # strangers stay unnamed
            "rose_leslie.jpg": "-"}
        obama = ["obama.jpg", "obama2.jpg", "obama3.jpg", "obama_and_biden.jpg"]
        assert names(ix.search("obama", 20)) == obama
        assert names(ix.search("person:obama", 20)) == obama
        assert names(ix.search('"barack obama"', 20)) == obama
        both = ix.search("obama biden", 20)
        assert names(both)[:1] == ["obama_and_biden.jpg"] and both[0].probability > 0.5
        assert names(ix.search("biden beach", 1)) == ["biden.jpg"]
        # a carried name's probability is its calibrated confidence, under a written one's
        p = {Path(h.path).name: h.probability for h in ix.search("person:obama", 20)}
        assert p["obama.jpg"] == pytest.approx(0.95) and 0.5 < p["obama2.jpg"] < 0.95
        # unnamed people: the strangers, each their own
        unnamed = [q for q in ix.people() if q.name is None]
        assert len(unnamed) == 2 and all(q.label.startswith("person ") for q in unnamed)


@needs_exiftool
def test_a_keyword_names_a_lone_face_that_looks_like_the_person_not_a_description(tmp_path):
    """A keyword that is a known name names the one face of its picture; not a word of a
    description (it names a scene's people), nor a face far from the person's named ones."""
    pictures = tmp_path / "pictures"
    pictures.mkdir()
    for name in ("obama", "obama2", "obama3", "kit_harington", "rose_leslie"):
        shutil.copy(DATA / f"{name}.jpg", pictures / f"{name}.jpg")
    exiftool("-XMP-digiKam:TagsList=People/Barack Obama", pictures / "obama.jpg")
    exiftool("-XMP-dc:Subject=Barack Obama", pictures / "obama2.jpg")
    exiftool("-EXIF:ImageDescription=Barack Obama at the beach", pictures / "kit_harington.jpg")
    exiftool("-EXIF:ImageDescription=Barack Obama speaking", pictures / "obama3.jpg")
    exiftool("-XMP-dc:Subject=Barack Obama", pictures / "rose_leslie.jpg")
    system = FakeSystem()
    with Index.create(tmp_path / "index", system.vocabulary, system.idf) as ix:
        ix.update([pictures], system.transform_paths)
        read_pass(ix, "faces")
        assert who(ix) == {"obama.jpg": "Barack Obama", "obama2.jpg": "Barack Obama",
                           "obama3.jpg": "Barack Obama", "kit_harington.jpg": "-",
                           "rose_leslie.jpg": "-"}
        how = {Path(ix.picture(f.picture).path).name: f.how for f in ix.faces()}
        # obama3's description names him, but only his look gives him the name
        assert [how[n] for n in ("obama.jpg", "obama2.jpg", "obama3.jpg")] == [
            "tag", "keyword", "carried"]


@needs_exiftool
def test_pamir_index_then_pamir_search_name(fake, tmp_path, monkeypatch):
    """The commands end to end: `pamir index` finds the faces (one line says what), `pamir
    search NAME` finds the unnamed pictures of a named person, `pamir people` lists them;
    --no-faces, or no [faces] extra (one line says so), leaves faces out."""
    import sys

    model, _ = fake
    pictures = folder_of_faces(tmp_path / "faces")
    r = run("index", model, pictures, "--index", tmp_path / "ix", "--no-text")
    assert "faces: 8 pictures read (8 with faces, 0 unreadable)" in r.output
    assert "9 faces: 3 named, 4 given a name they look like, 2 in 2 unnamed people" \
        in r.output
    r = run("search", "obama", "--index", tmp_path / "ix", "-k", "4", "-f")
    assert sorted(Path(p).name for p in r.stdout.split()) == [
        "obama.jpg", "obama2.jpg", "obama3.jpg", "obama_and_biden.jpg"]
    r = run("search", "person:biden", "--index", tmp_path / "ix", "-f")
    assert sorted(Path(p).name for p in r.stdout.split()) == [
        "biden.jpg", "biden2.jpg", "obama_and_biden.jpg"]
    assert run("people", "--index", tmp_path / "ix").stdout.splitlines()[:2] == [
        "     4  Barack Obama", "     3  Joe Biden"]
    r = run("index", model, pictures, "--index", tmp_path / "ix2", "--no-faces", "--no-text")
    assert "faces" not in r.output
    monkeypatch.setitem(sys.modules, "dlib", None)
    r = run("index", model, pictures, "--index", tmp_path / "ix3", "--no-text")
    assert [line for line in r.output.splitlines() if "faces" in line] == [
        line for line in r.output.splitlines() if line.startswith("faces not found:")]
    assert "pamir[faces]" in r.output


def test_faces_are_stored_with_box_embedding_and_quality(built, tmp_path):
    with Index.open(index_of(built, tmp_path)) as ix:
        faces = ix.faces(embeddings=True)
    assert all(f.embedding.shape == (128,) and f.embedding.dtype == np.float32 for f in faces)
    assert all(0 <= f.box[0] < f.box[2] <= 1 and 0 <= f.box[1] < f.box[3] <= 1 for f in faces)
    assert all(f.size >= 30 and (f.score is None or f.score > 0) for f in faces)
    # an embedding is 512 bytes in the catalogue, in the index folder
    conn = sqlite3.connect(tmp_path / "index" / "catalog.sqlite")
    assert {len(b) for (b,) in conn.execute("SELECT embedding FROM faces")} == {512}


def test_a_pass_killed_half_way_resumes_and_an_unchanged_folder_reads_nothing(tmp_path):
    pictures = tmp_path / "pictures"
    pictures.mkdir()
    for p in sorted(DATA.glob("*.jpg"))[:5]:
        shutil.copy(p, pictures / p.name)
    system = FakeSystem()
    read = []

    class Killed(Exception):
        pass

    def killed_after_two(paths):
        if len(read) >= 2:
            raise Killed
        read.extend(paths)
        return read_faces(paths)

    name = f"faces {fingerprint()}"
    with Index.create(tmp_path / "index", system.vocabulary, system.idf) as ix:
        ix.update([pictures], system.transform_paths)
        with pytest.raises(Killed):
            run_pass(ix, name, ("person",), killed_after_two, batch_size=2,
                     record=ix.record_faces)
        assert len(ix.pass_todo(name)) == 3 and len({f.picture for f in ix.faces()}) == 2
    with Index.open(tmp_path / "index", writable=True) as ix:
        report = read_pass(ix, "faces")
        assert report["read"] == 3 and len({f.picture for f in ix.faces()}) == 5
        assert read_pass(ix, "faces")["read"] == 0
        # a removed picture takes its faces with it (a trigger, as its facts)
        (pictures / "obama.jpg").unlink()
        ix.update([pictures], system.transform_paths)
        assert len({f.picture for f in ix.faces()}) == 4
        conn = sqlite3.connect(tmp_path / "index" / "catalog.sqlite")
        assert conn.execute("SELECT count(*) FROM faces f LEFT JOIN pictures p "
                            "ON p.id = f.picture WHERE p.id IS NULL").fetchone()[0] == 0


def test_local_processes_read_what_this_process_reads(built, tmp_path):
    """Without Dask, the pass reads its batches in local processes (one per core); they
    find the same faces as reading here."""
    directory = index_of(built, tmp_path)
    with Index.open(directory) as ix:
        here = {(f.picture, f.box) for f in ix.faces()}
    conn = sqlite3.connect(directory / "catalog.sqlite")
    with conn:
        conn.execute("DELETE FROM passes")
        conn.execute("DELETE FROM faces")
    conn.close()
    with Index.open(directory, writable=True) as ix:
        report = run_pass(ix, f"faces {fingerprint()}", ("person",), read_faces, batch_size=2,
                          record=ix.record_faces, processes=2)
        assert report.read == 8 and {(f.picture, f.box) for f in ix.faces()} == here


def test_with_a_dask_client_faces_are_read_as_tasks(built, tmp_path):
    """`pamir index --workers/--scheduler`: the pass's batches are Dask tasks (here on a
    cluster of threads in this process), and find the faces read here."""
    distributed = pytest.importorskip("distributed")
    directory = index_of(built, tmp_path)
    with Index.open(directory) as ix:
        here = who(ix)
    conn = sqlite3.connect(directory / "catalog.sqlite")
    with conn:
        conn.execute("DELETE FROM passes")
        conn.execute("DELETE FROM faces")
    conn.close()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client, \
            Index.open(directory, writable=True) as ix:
        report = read_pass(ix, "faces", client=client)
        assert report["read"] == 8 and who(ix) == here


def test_an_unreadable_picture_is_a_note(tmp_path):
    (tmp_path / "bad.jpg").write_text("not a picture")
    ((found, note),) = read_faces([tmp_path / "bad.jpg"])
    assert found is None and "bad.jpg" in note


def test_an_index_of_schema_4_gets_the_faces_tables(built, tmp_path):
    directory = index_of(built, tmp_path)
    conn = sqlite3.connect(directory / "catalog.sqlite")
    with conn:  # what schema 4 wrote
        conn.execute("DROP TRIGGER faces_of_removed")
        for table in ("faces", "people", "face_decisions"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.close()
    with Index.open(directory) as old:  # read-only: no people, no error
        assert old.people() == [] and old.faces() == []
    with Index.open(directory, writable=True) as ix:
        assert ix.faces() == [] and read_pass(ix, "faces")["read"] == 0  # pass kept
    conn = sqlite3.connect(directory / "catalog.sqlite")
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
        == (str(SCHEMA_VERSION),)


# ----------------------------------------------------------------------------- the API
@pytest.fixture
def clients(built, tmp_path):
    from fastapi.testclient import TestClient

    from pamir.server import create_app
    from pamir.server.sharing import Sharing

    app = create_app(index_of(built, tmp_path), system=FakeSystem(), warm_mapping=False,
                     sharing=Sharing(tokens=TOKENS, uploads_per_minute=0))
    client = TestClient(app)
    return {role: (lambda method, url, role=role, **kw: client.request(
        method, url, headers={"authorization": f"Bearer {TOKENS[role]}"}, **kw))
        for role in TOKENS}, tmp_path / "index"


def person_called(people: list[dict], label: str) -> dict:
    return next(p for p in people if p["label"] == label)


def picture_ids(call, q: str) -> list[str]:
    return sorted(Path(h["path"]).name for h in call("GET", f"/api/search?q={q}&k=20"
                                                      ).json()["hits"])


def test_viewers_see_people_and_editors_name_merge_and_correct(clients):
    role, directory = clients
    viewer, editor = role["viewer"], role["editor"]
    people = viewer("GET", "/api/people").json()["people"]
    assert person_called(people, "Barack Obama")["pictures"] == 4
    kit = next(p for p in people if p["name"] is None
               and viewer("GET", f"/api/people/{p['id']}").json()["face_list"][0]["picture"]
               == _picture_id(directory, "kit_harington.jpg"))
    crop = viewer("GET", f"/api/faces/{kit['face']}/crop?size=64")
    assert crop.status_code == 200 and crop.headers["content-type"] == "image/jpeg"
    assert len(list((directory / "thumbnails").glob("face-*.jpg"))) == 1

    # a viewer cannot change anything
    for method, url, body in [("POST", f"/api/people/{kit['id']}/name", {"name": "Kit"}),
                              ("POST", f"/api/people/{kit['id']}/merge", {"into": 1}),
                              ("POST", f"/api/faces/{kit['face']}/not", {})]:
        r = viewer(method, url, json=body)
        assert r.status_code == 403 and "editor" in r.json()["detail"]
    assert viewer("GET", "/api/people").json()["people"] == people

    # an editor names him: his picture is found by his name
    r = editor("POST", f"/api/people/{kit['id']}/name", json={"name": "Kit Harington"})
    assert r.status_code == 200, r.text
    assert picture_ids(viewer, "harington") == ["kit_harington.jpg"]
    assert picture_ids(viewer, 'person:"kit harington"') == ["kit_harington.jpg"]

    # merges Rose Leslie's unnamed person into him (a mistake, then corrected on the face)
    rose = next(p for p in viewer("GET", "/api/people").json()["people"]
                if p["name"] is None and viewer("GET", f"/api/people/{p['id']}").json()
                ["face_list"][0]["picture"] == _picture_id(directory, "rose_leslie.jpg"))
    r = editor("POST", f"/api/people/{rose['id']}/merge", json={"into": kit["id"]})
    assert r.status_code == 200, r.text
    assert picture_ids(viewer, "harington") == ["kit_harington.jpg", "rose_leslie.jpg"]
    assert viewer("GET", f"/api/people/{rose['id']}").status_code == 404
    r = editor("POST", f"/api/faces/{rose['face']}/not", json={})
    assert r.status_code == 200, r.text
    assert picture_ids(viewer, "harington") == ["kit_harington.jpg"]
    faces = viewer("GET", f"/api/pictures/{_picture_id(directory, 'rose_leslie.jpg')}/faces"
                   ).json()["faces"]
    assert faces[0]["label"].startswith("person ")  # nobody's name, an unnamed person again

    # naming a person with a name someone has merges them; errors are said
    r = editor("POST", f"/api/people/{kit['id']}/name", json={"name": "Barack Obama"})
    assert r.status_code == 200 and r.json()["person"] != kit["id"]
    assert len(picture_ids(viewer, "person:obama")) == 5
    assert editor("POST", "/api/people/999/name", json={"name": "X"}).status_code == 404
    assert editor("POST", f"/api/people/{r.json()['person']}/name",
                  json={"name": "  "}).status_code == 400


def _picture_id(directory: Path, name: str) -> int:
    conn = sqlite3.connect(directory / "catalog.sqlite")
    (pid,) = conn.execute("SELECT id FROM pictures WHERE path LIKE ?", (f"%/{name}",)
                          ).fetchone()
    return int(pid)


def test_a_read_only_server_changes_nothing(built, tmp_path):
    from fastapi.testclient import TestClient

    from pamir.server import create_app
    from pamir.server.sharing import Sharing

    app = create_app(index_of(built, tmp_path), system=FakeSystem(), warm_mapping=False,
                     sharing=Sharing(read_only=True, uploads_per_minute=0))
    r = TestClient(app).post("/api/people/1/name", json={"name": "Someone"})
    assert r.status_code == 403 and "read-only" in r.json()["detail"]


# ----------------------------------------------------------------------------- decisions
def faces_read(tmp_path):
    """A new index of folder_of_faces' pictures, their faces read: (the index's folder, the
    pictures' folder, the stand-in system that indexed them)."""
    directory, copy, system = tmp_path / "index", folder_of_faces(tmp_path), FakeSystem()
    with Index.create(directory, system.vocabulary, system.idf) as ix:
        ix.update([copy], system.transform_paths)
        read_pass(ix, "faces")
    return directory, copy, system


def test_names_given_survive_reindexing_and_a_picture_read_again(tmp_path):
    from pamir.facts.people.who import name_person, not_person

    directory, copy, system = faces_read(tmp_path)
    with Index.open(directory, writable=True) as ix:
        kit = next(f for f in ix.faces()
                   if Path(ix.picture(f.picture).path).name == "kit_harington.jpg")
        name_person(ix, kit.person, "Kit")
        obama3 = next(f for f in ix.faces()
                      if Path(ix.picture(f.picture).path).name == "obama3.jpg")
        not_person(ix, obama3.id)
        assert names(ix.search("kit", 5)) == ["kit_harington.jpg"]
        assert "obama3.jpg" not in names(ix.search("obama", 9))
    # the pictures' bytes change (their hash, so they are read again), the faces do not
    with open(copy / "kit_harington.jpg", "ab") as f:
        f.write(b"\0")
    with open(copy / "obama3.jpg", "ab") as f:
        f.write(b"\0")
    with Index.open(directory, writable=True) as ix:
        ix.update([copy], system.transform_paths)
        assert read_pass(ix, "faces")["read"] == 2
        assert names(ix.search("kit", 5)) == ["kit_harington.jpg"]
        assert "obama3.jpg" not in names(ix.search("obama", 9))
        identify(ix)  # and again: nothing changes
        assert names(ix.search("kit", 5)) == ["kit_harington.jpg"]
    # a sidecar written afterwards (digiKam tags a picture): its picture is read again
    subprocess.run(["exiftool", "-q", "-q", "-XMP-digiKam:TagsList=People/Rose Leslie", "-o",
                    str(copy / "rose_leslie.xmp"), str(copy / "rose_leslie.jpg")], check=True)
    with Index.open(directory, writable=True) as ix:
        assert ix.update([copy], system.transform_paths).recaptioned == 1
        assert read_pass(ix, "faces")["read"] == 1
        assert names(ix.search("person:rose", 5)) == ["rose_leslie.jpg"]


def test_a_decision_follows_its_face_found_at_a_slightly_other_box(built, tmp_path):
    """A face read again with another detection size (pamir.facts.people.faces.MAX_ENLARGE) moves
    a little: the editor's decisions about it still apply, to it and not to its neighbour."""
    from pamir.facts.people.who import name_person, not_person

    directory = index_of(built, tmp_path)
    with Index.open(directory, writable=True) as ix:
        face = {Path(ix.picture(f.picture).path).name: f for f in ix.faces()}
        kit = face["kit_harington.jpg"]
        name_person(ix, kit.person, "Kit")
        group = [f for f in ix.faces() if ix.picture(f.picture).path.endswith("biden.jpg")
                 and "obama" in ix.picture(f.picture).path]
        obama = next(f for f in group if f.person == ix.person_named("barack obama").id)
        not_person(ix, obama.id)
    conn = sqlite3.connect(directory / "catalog.sqlite")
    for f in (kit, obama):  # as if found again at another size: 3 % wider, 2 % lower
        x0, y0, x1, y1 = f.box
        moved = [x0 - 0.015 * (x1 - x0), y0 + 0.02 * (y1 - y0), x1 + 0.015 * (x1 - x0),
                 y1 + 0.02 * (y1 - y0)]
        conn.execute("UPDATE faces SET box = ? WHERE id = ?", (json.dumps(moved), f.id))
    conn.commit()
    conn.close()
    with Index.open(directory, writable=True) as ix:
        decided = ix.face_decisions()
        assert decided[kit.id] == [("is", kit.person)] and len(decided) == 2
        identify(ix, everything=True)
        assert who(ix)["kit_harington.jpg"] == "Kit"
        assert who(ix)["obama_and_biden.jpg"] == "- + Joe Biden"
        # a new decision about the moved face replaces the one at its old box
        name_person(ix, ix.face(kit.id).person, "Kit Harington")
        assert ix.face_decisions()[kit.id] == [("is", kit.person)]
        assert who(ix)["kit_harington.jpg"] == "Kit Harington"


def test_names_merges_and_refusals_survive_a_rebuild(tmp_path):
    """`pamir index --rebuild` makes the catalogue anew: what editors decided is carried
    into it, and the faces pass of the new index finds the faces it was decided about."""
    from pamir.facts.people.who import merge_people, name_person, not_person

    directory, copy, system = faces_read(tmp_path)
    with Index.open(directory, writable=True) as ix:
        face = {Path(ix.picture(f.picture).path).name: f for f in ix.faces()
                if ix.picture(f.picture).path.endswith(("kit_harington.jpg", "rose_leslie.jpg",
                                                        "obama3.jpg"))}
        kit = name_person(ix, face["kit_harington.jpg"].person, "Kit")["person"]
        merge_people(ix, face["rose_leslie.jpg"].person, kit)  # an editor's mistake, kept
        not_person(ix, face["obama3.jpg"].id)
        before = who(ix)
        assert before["kit_harington.jpg"] == before["rose_leslie.jpg"] == "Kit"
        assert before["obama3.jpg"] == "-"
    with Index.rebuild(directory, system.vocabulary, system.idf) as ix:
        assert len(ix) == 0 and ix.person_named("kit").id == kit  # before any picture
        ix.update([copy], system.transform_paths)
        read_pass(ix, "faces")
        assert who(ix) == before
        assert names(ix.search("kit", 5)) == ["kit_harington.jpg", "rose_leslie.jpg"]
        assert "obama3.jpg" not in names(ix.search("obama", 9))
    # nothing decided, nothing carried; an index of schema 4 or a damaged one has none
    from pamir.index.people import Decisions, read_decisions  # noqa: PLC0415

    assert read_decisions(tmp_path / "nowhere") == Decisions()
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "catalog.sqlite").write_bytes(b"not a database")
    assert read_decisions(tmp_path / "damaged") == Decisions()


# ----------------------------------------------------------------------------- forget
def test_forget_removes_a_persons_faces_embeddings_name_and_facts(built, tmp_path):
    directory = index_of(built, tmp_path)
    runner = CliRunner()
    from pamir.cli import app

    with Index.open(directory) as ix:
        obama = ix.person_named("barack obama")
        embeddings = [f.embedding.tobytes() for f in ix.faces(person=obama.id,
                                                               embeddings=True)]
    listed = runner.invoke(app, ["people", "--index", str(directory)])
    assert listed.exit_code == 0 and "     4  Barack Obama" in listed.stdout
    r = runner.invoke(app, ["people", "--index", str(directory), "--forget", "barack obama"])
    assert r.exit_code == 0, r.output
    assert "Barack Obama: forgotten (4 faces in 4 pictures" in r.output
    with Index.open(directory) as ix:
        assert ix.person_named("barack obama") is None
        assert "Barack Obama" not in runner.invoke(
            app, ["people", "--index", str(directory)]).stdout
        # no person fact says obama; obama.jpg's own keywords (its tag) still do
        assert names(ix.search("person:obama", 9)) == []
        assert names(ix.search("obama", 9)) == ["obama.jpg"]
        # Biden is still found
        assert "biden2.jpg" in names(ix.search("biden", 9))
    # the embeddings are not left in the catalogue's free pages nor its journal
    stored = b"".join(f.read_bytes() for f in directory.glob("catalog.sqlite*"))
    assert len(embeddings) == 4 and not any(e in stored for e in embeddings)
    conn = sqlite3.connect(directory / "catalog.sqlite")
    assert conn.execute("SELECT count(*) FROM faces").fetchone()[0] == 5
    assert conn.execute("SELECT count(*) FROM facts WHERE kind = 'person' AND word LIKE "
                        "'%obama%'").fetchone()[0] == 0
    with Index.open(directory, writable=True) as ix:
        crops = directory / "thumbnails"
        crops.mkdir()
        kept = [crops / f"face-x-{f.id}-64.jpg" for f in ix.faces()]
        for crop in kept:
            crop.write_bytes(b"a crop")
        forget(ix, "Joe Biden")  # their faces' crops go with them
        assert sorted(crops.iterdir()) == sorted(
            crops / f"face-x-{f.id}-64.jpg" for f in ix.faces())
        assert len(kept) - len(list(crops.iterdir())) == 3
        with pytest.raises(PeopleError, match="no person called"):
            forget(ix, "Nobody")
        assert read_pass(ix, "faces")["read"] == 0  # forgotten faces are not found again
        unnamed = next(p for p in ix.people() if p.name is None)
        assert forget(ix, unnamed.label)["faces"] == 1


# ----------------------------------------------------------------------------- the page
@pytest.fixture(scope="module")
def people_server(built):
    """The page over the folder's index, served as `pamir serve` serves it."""
    from conftest import free_port, serve_in_thread

    from pamir.commands.index import LOOPBACK_NAMES
    from pamir.server import create_app

    root, _ = built
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAMIR_EMBEDDINGS", "0")
        index = root / "page-index"
        shutil.copytree(root / "index", index)
        app = create_app(index, system=FakeSystem(), allowed_hosts=LOOPBACK_NAMES,
                         warm_mapping=False)
        yield from serve_in_thread(app, port=free_port())


def labels(browser) -> list[str]:
    """The people strip's cards, read in one go (the strip is redrawn after a change)."""
    return browser.execute_script(
        "return [...document.querySelectorAll('#people .person button.face')]"
        ".map((b) => b.textContent.trim())")


def click_card(browser, label: str) -> None:
    browser.execute_script(
        "[...document.querySelectorAll('#people .person button.face')]"
        ".find((b) => b.textContent.trim() === arguments[0]).click()", label)


def test_the_page_shows_people_as_faces_searches_and_names(people_server, browser):
    """People on the page, in a real headless Chromium: the people as faces with their
    counts; a named one's face searches person:"name"; an unnamed one is named in their
    panel (skipped where Chromium or selenium is absent)."""
    from conftest import wait
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    browser.get(people_server)
    wait(browser).until(lambda d: "Barack Obama (4)" in labels(d))
    faces = browser.find_elements(By.CSS_SELECTOR, "#people .person img")
    wait(browser).until(lambda d: all(d.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth > 0", img) for img in faces))
    click_card(browser, "Barack Obama (4)")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) == 4)
    assert browser.find_element(By.ID, "q").get_attribute("value") == 'person:"barack obama"'

    unnamed = next(label for label in labels(browser) if label.startswith("person "))
    click_card(browser, unnamed)  # no name yet: their panel
    panel = wait(browser).until(EC.visibility_of_element_located((By.ID, "person-panel")))
    field = panel.find_element(By.CSS_SELECTOR, "input[type=text]")
    field.send_keys("Someone Else")
    field.submit()
    wait(browser).until(lambda d: "Someone Else (1)" in labels(d))
    assert unnamed not in labels(browser)
