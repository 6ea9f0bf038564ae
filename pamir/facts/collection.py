"""Collections read with their pictures' facts: a folder of pictures whose files carry their
keywords (`load_folder`: sidecars, IPTC, XMP and EXIF, read by pamir.facts.metadata), and
`load_collection`, which takes any collection pamir learns from: Corel 5k, a captions table
(both pamir.data's) or such a folder.

It sits above pamir.data, which reads a collection's lists and knows nothing of a picture's
files' metadata.
"""

from __future__ import annotations

from pathlib import Path

from ..data import Collection, DataError, load_captions_table, load_corel5k
from ..formats import IMAGE_SUFFIXES
from ..text.words import STOP_WORDS, split_keywords
from .metadata import read_metadata


def load_folder(folder: str | Path, *, folder_words: bool = False,
                stop_words=STOP_WORDS) -> Collection:
    """Every picture under `folder`, captioned by what its files say (pamir.facts.metadata:
    sidecars, then IPTC/XMP/EXIF keywords, then free-text descriptions); pictures with none
    are uncaptioned. folder_words: the names of the folders between `folder` and the
    picture are caption words too (off by default: "DCIM", "100CANON", "2019-07" or
    "export" say nothing of what a picture shows, and every picture of a folder would share
    them, so the model would learn folders, not content)."""
    root = Path(folder).resolve()
    if not root.is_dir():
        raise DataError(f"{folder}: not a folder; give a folder of pictures or a captions table")
    coll = Collection(root.name, root, [], [], [], [])
    for path in sorted(p for p in root.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES
                       and not any(part.startswith(".") for part in
                                   p.relative_to(root).parts) and p.is_file()):
        meta = read_metadata(path, stop_words)
        coll.warnings += meta.notes
        caption, source = meta.caption, meta.source
        if folder_words:
            extra = split_keywords(" ".join(path.relative_to(root).parts[:-1]))
            if extra:
                caption = tuple(dict.fromkeys((caption or ()) + tuple(extra)))
                source = f"{source} + folder names" if source else "folder names"
        coll.ids.append(str(path.relative_to(root)))
        coll.paths.append(path)
        coll.captions.append(caption)
        coll.splits.append("")
        coll.sources.append(source if caption else None)
    if not coll.ids:
        raise DataError(f"{folder}: no pictures found (looked for "
                        f"{', '.join(sorted(IMAGE_SUFFIXES))})")
    return coll  # the notes are in coll.warnings: `pamir fit` prints them


def load_collection(spec: str | Path, *, folder_words: bool = False, **kwargs) -> Collection:
    """A data set by name ("corel5k", "corel5k:/path/to/folder"), a captions table path, or
    a folder of pictures whose files carry their keywords (`load_folder`)."""
    spec = str(spec)
    if spec == "corel5k" or spec.startswith("corel5k:"):
        return load_corel5k(spec.partition(":")[2] or None)
    if Path(spec).is_dir():
        return load_folder(spec, folder_words=folder_words, **kwargs)
    return load_captions_table(spec, **kwargs)
