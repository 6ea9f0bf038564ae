"""Text: captions and queries as words, the query language, and words outside a vocabulary mapped onto it (inflections, a lexicon, a sentence embedding)."""
