"""Facts: what a picture holds for certain, read from its file and its pixels: keywords and dates (metadata, XMP), places (GPS), text (OCR), people (faces), and the frames of a video."""
