"""The same index after the same folder changes, before and after a refactoring of the folder
sync: two trees of pamir (BEFORE: a `git archive` of a commit; AFTER: this working tree) run
one scripted sequence of changes and `Index.update`s, and their reports, catalogue rows (ids,
paths, states, score columns, captions, reasons) and vectors are compared.

    python scripts/same_sync.py --before babfe51 [--work /tmp/same-sync]

The changes reach every case of the sync: new, changed, renamed (onto another picture's
path too, and a copy whose original went), copied (twice, and into a new folder), swapped and
rotated bytes (a copy whose source row is replaced before it is written), removed, touched, a
sidecar and a captions table read again, an unreadable file, a folder emptied; small batches,
so that they grow.
A few seconds of CPU: no model, a picture's mean colour as its vector. Prints "same" or the
first difference, and exits 1 if any differs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIDECAR = ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/'
           '22-rdf-syntax-ns#"><rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/'
           'elements/1.1/"><dc:subject><rdf:Bag><rdf:li>tiger</rdf:li></rdf:Bag></dc:subject>'
           '</rdf:Description></rdf:RDF></x:xmpmeta>')


def colour_transform(paths):
    """A stand-in system: a picture's mean colour as its text-space vector."""
    import numpy as np  # noqa: PLC0415 - the scenario runs in the tree's own process
    from PIL import Image  # noqa: PLC0415

    Z = np.zeros((len(paths), 4), np.float32)
    ok, reasons = np.zeros(len(paths), bool), [None] * len(paths)
    for i, p in enumerate(paths):
        try:
            with Image.open(p) as im:
                Z[i, :3] = np.asarray(im.convert("RGB"), np.float32).mean(axis=(0, 1)) / 255
            ok[i] = True
        except Exception as e:  # noqa: BLE001 - the transform's reason, as a system gives it
            reasons[i] = f"not a picture ({type(e).__name__})"
    return Z, ok, reasons


def scenario(work: Path) -> list[dict]:
    """The changes and updates, in the tree on sys.path; what each update left."""
    import numpy as np  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

    from pamir.index import Index  # noqa: PLC0415

    root = work / "pics"

    def bmp(name, colour, size=(16, 12)):
        # uncompressed: pictures of one size have one byte count, so they are hashed at once
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", size, colour).save(path)
        os.utime(path, ns=(10**18, 10**18))

    def move_bytes(*names):  # names[0] takes names[1]'s bytes, ..., the last names[0]'s
        data = [(root / n).read_bytes() for n in names]
        for n, d in zip(names, data[1:] + data[:1]):
            (root / n).write_bytes(d)

    rng = np.random.default_rng(0)
    for i in range(40):
        bmp(f"d{i % 3}/p{i:02d}.bmp", tuple(int(v) for v in rng.integers(0, 255, 3)),
            (16, 12) if i % 2 else (8, 8))
    (root / "broken.bmp").write_bytes(b"x" * 100)
    out = []
    with Index.create(work / "ix", ["r", "g", "b", "x"], np.ones(4)) as ix:
        def update(**kw):
            report = ix.update([root], colour_transform, batch_size=8, **kw).as_dict()
            out.append({"report": report, "rows": [
                (p.id, p.path, p.state, p.col, p.caption, p.reason, p.taken is not None)
                for p in ix.pictures()], "vectors": {
                p.path: ix.vector(p.id).round(6).tolist() for p in ix.pictures("ok")}})

        update()
        (root / "d0/p00.bmp").rename(root / "d1/moved.bmp")
        shutil.copy(root / "d1/p01.bmp", root / "copy1.bmp")
        shutil.copy(root / "d1/p01.bmp", root / "copy2.bmp")
        move_bytes("d2/p02.bmp", "d2/p05.bmp")                # swapped
        move_bytes("d0/p03.bmp", "d0/p06.bmp", "d1/p07.bmp")  # rotated
        (root / "d1/p10.bmp").unlink()
        (root / "d1/p13.bmp").unlink()
        shutil.copy(root / "d1/p16.bmp", root / "d1/p13b.bmp")
        os.utime(root / "d2/p08.bmp", ns=(5, 5))
        (root / "d2/p11.bmp.xmp").write_text(SIDECAR)
        for i in range(40, 70):
            bmp(f"new/n{i}.bmp", (i, 2 * i, 3 * i))
        shutil.copy(root / "d1/p19.bmp", root / "new/dup19.bmp")
        (root / "broken.bmp").write_bytes(b"y" * 100)
        update()
        (root / "d2/p14.bmp").rename(root / "d2/p17.bmp")  # onto a picture's path
        shutil.copy(root / "d1/moved.bmp", root / "again.bmp")
        (root / "d1/moved.bmp").unlink()                   # a copy of a vanished picture
        shutil.rmtree(root / "new")
        update(captions={str(root / "d0/p09.bmp"): ["zebra"]})
        update()
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the commit to compare with")
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="pamir-same-sync-"))
    before = work / "before"
    tar = subprocess.run(["git", "archive", args.before, "pamir"], cwd=ROOT, check=True,
                         capture_output=True).stdout
    before.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(before)], input=tar, check=True)
    results = {}
    for name, tree in (("before", before), ("after", ROOT)):
        shutil.rmtree(work / "run", ignore_errors=True)  # one path for both: paths compare
        code = (f"import json, sys; sys.path[:0] = [{str(tree)!r}, {str(ROOT / 'scripts')!r}]; "
                f"import same_sync; print(json.dumps(same_sync.scenario("
                f"same_sync.Path({str(work / 'run')!r})), default=str))")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=False,
                           env={**os.environ, "PYTHONPATH": str(tree), "PAMIR_EMBEDDINGS": "0"})
        if r.returncode:
            raise SystemExit(f"{name}: the scenario failed:\n{r.stderr}")
        results[name] = json.loads(r.stdout)
        (work / f"{name}.json").write_text(json.dumps(results[name], indent=1))
    differs = False
    for k, (a, b) in enumerate(zip(results["before"], results["after"])):
        for part in a:
            if a[part] != b[part]:
                differs = True
                print(f"update {k + 1}, {part}: DIFFERS")
    print("same" if not differs else f"outputs in {work}")
    raise SystemExit(1 if differs else 0)


if __name__ == "__main__":
    main()
