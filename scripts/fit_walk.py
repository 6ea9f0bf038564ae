"""The walk of `fit_system`'s collection through the code: every call of a pamir function
that is handed the collection (as an argument, or as an argument's `collection`, such as
the record every phase reads), traced during one small fit, in the order they run. The
walk stands in a file (a room) from the call that enters it until a call takes it into
another or a return climbs back to the caller's; it prints the rooms in order and counts

    stays    the runs of the walk in one file
    rooms    the files it enters
    climbs   returns to a caller in another file
    returns  entries into a file the walk had left (stays - rooms)

    flock /tmp/pamir-heavy.lock python scripts/fit_walk.py [--pictures 300] [--work DIR]

An approximation of the structure tool's count (the tool may follow more than the
collection object itself); compare two trees with the same settings, not absolute counts
(PYTHONPATH names the tree traced). Following everything derived from the collection
instead (what its calls return) was tried: about 2,000 returns either way, nearly all of
them inside the models' fits, so it says nothing of the phases.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from same_behaviour import slice_of_corel  # noqa: E402


def holds(value, collection) -> bool:
    """Whether a call's argument is the collection, or a record holding it."""
    if value is collection:
        return True
    try:
        return object.__getattribute__(value, "collection") is collection
    except Exception:  # noqa: BLE001 - any object: most have no such attribute
        return False


def walk(collection, run) -> list[str]:
    """The files of the followed frames, as the walk stands in them, while `run()` runs."""
    import pamir  # noqa: PLC0415

    root = str(Path(pamir.__file__).resolve().parent.parent) + os.sep
    stack, places = [], []

    def profile(frame, event, arg):
        if event not in ("call", "return"):
            return
        code = frame.f_code
        if not code.co_filename.startswith(root):
            return
        if event == "call":
            n = code.co_argcount + code.co_kwonlyargcount
            args = [frame.f_locals.get(name) for name in code.co_varnames[:n]]
            if any(holds(a, collection) for a in args):
                stack.append((frame, code.co_filename[len(root):]))
                places.append(stack[-1][1])
        elif stack and stack[-1][0] is frame:
            stack.pop()
            if stack:
                places.append(stack[-1][1] + " ^")  # climbed back to the caller

    threading = sys.modules["threading"]
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return places


def summary(places: list[str]) -> dict:
    stays, seen, climbs, returns = [], set(), 0, 0
    for place in places:
        room, up = place.removesuffix(" ^"), place.endswith(" ^")
        if stays and stays[-1] == room:
            continue
        if room in seen:
            returns += 1
            climbs += up
        stays.append(room)
        seen.add(room)
    return {"stays": len(stays), "rooms": len(seen), "climbs": climbs, "returns": returns,
            "walk": stays}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pictures", type=int, default=300)
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="pamir-fit-walk-"))
    os.environ.setdefault("PAMIR_CACHE", str(work / "cache"))
    os.environ.setdefault("PAMIR_EMBEDDINGS", "0")
    _, table = slice_of_corel(args.pictures, work)
    from pamir.facts.collection import load_collection  # noqa: PLC0415
    from pamir.features import FeatureSettings  # noqa: PLC0415
    from pamir.training import fit_system  # noqa: PLC0415

    collection = load_collection(table)
    # (same_fit.py's "race" setting: every phase runs)
    places = walk(collection, lambda: fit_system(
        collection, "pamir", FeatureSettings(n_visterms=200, kmeans_iterations=10),
        {"n_updates": 20_000, "eval_every": 2_000}, representation=["visterms", "cnn"],
        ensemble=2, retrain=True, log=None))
    s = summary(places)
    for room in s["walk"]:
        print(room)
    print(f"{s['stays']} stays, {s['rooms']} rooms, {s['climbs']} climbs back up, "
          f"{s['returns']} returns")


if __name__ == "__main__":
    main()
