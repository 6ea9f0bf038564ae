"""Write pamir/zeroshot/imagenet_texts_minilm.npz: the 1,000 ImageNet class texts (each class's name
and description, pamir.zeroshot.classes.imagenet_texts) embedded by the packaged all-MiniLM-L6-v2,
float16, with the key of the texts and the weights they were made from; and each class text's
hubness (pamir.zeroshot.classes.HUB_WORDS: its mean cosine to its HUB_NEAREST nearest among the
most frequent English words of the `wordfreq` package), which the embedding bridge discounts.

pamir.zeroshot.classes.packaged_class_embeddings reads it when the installed texts and weights match
the key, so a first `pamir fit` or `pamir index` on a machine does not spend the 40 s of CPU
that embedding the long descriptions takes on 2 cores (issue 35); with other texts or weights
the bridge embeds them itself, as before. Run from the repository root after either package
changes:

    python scripts/class_text_embeddings.py
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from pamir.text.bridge import display_text, vocabulary_hash
from pamir.text.embedding import embedder, model_identity
from pamir.zeroshot.classes import EMBEDDINGS, HUB_NEAREST, HUB_WORDS, imagenet_texts

OUT = Path(__file__).resolve().parents[1] / "pamir" / "zeroshot" / EMBEDDINGS


def reference_words() -> list[str]:
    """The HUB_WORDS most frequent English words of wordfreq made of letters alone."""
    from wordfreq import top_n_list

    return [w for w in top_n_list("en", 2 * HUB_WORDS) if w.isalpha() and w.isascii()][:HUB_WORDS]


def main() -> None:
    texts = [display_text(t) for t in imagenet_texts()]
    E = embedder().encode(texts)
    S = embedder().encode(reference_words()) @ E.T  # (words x classes) cosines
    hubness = np.sort(S, axis=0)[-HUB_NEAREST:].mean(axis=0)
    buf = io.BytesIO()
    np.savez_compressed(buf, E=E.astype(np.float16), key=np.str_(vocabulary_hash(texts)),
                        weights=np.str_(model_identity()), hubness=hubness.astype(np.float32))
    OUT.write_bytes(buf.getvalue())
    print(f"{OUT}: {E.shape[0]} texts x {E.shape[1]}, {len(buf.getvalue()):,} bytes")


if __name__ == "__main__":
    main()
