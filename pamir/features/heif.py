"""A HEIC decoded by its tiles with FFmpeg's HEVC decoder, at a reduced size.

A phone's HEIC is a grid of HEVC pictures (an iPhone's 12-MP photo: 8 x 6 tiles of 512 x 512
pixels, 4:2:0). libheif (through pillow-heif) decodes it with libde265 and converts the whole
12 MP to RGB: 0.73-0.80 s of one core a photo on this machine; the reading stage then shrinks
that raster to the 1,008 pixels its passes read. FFmpeg's HEVC decoder (in PyAV's wheel, which
pamir has for videos) decodes the same tiles in 0.46 s, and the picture is made at the size
asked from the decoded planes (the luma averaged by the factor, the chroma, already at half
resolution, by half of it) before the one conversion to RGB: no 12-MP RGB raster is made.

    rgb = decode_tiles(data, factor=2)   # (H/2, W/2, 3) uint8, display orientation; or None

Only what this reads with certainty is decoded here: the primary item a grid of `hvc1` tiles
(or one `hvc1` picture) sharing one decoder configuration, 8-bit 4:2:0, BT.601 or BT.709
colours, full or limited range, turned by `irot` and mirrored by `imir`; a factor of at least
2. Anything else (AVIF, 10-bit, alpha, a crop box, an unknown property marked essential, a
file FFmpeg refuses) gives None, and pamir.features.images decodes it with pillow-heif as
before. The box layout is ISO/IEC 14496-12 (ISOBMFF) and 23008-12 (HEIF); the meta box is
read here (a few hundred bytes), FFmpeg gets each tile's bitstream.
"""

from __future__ import annotations

import struct

import cv2
import numpy as np

#: Properties that change nothing this module draws (the decoder's configuration is read
#: apart, the transforms applied): an essential property not in this set gives None.
KNOWN_PROPERTIES = frozenset({b"hvcC", b"ispe", b"colr", b"pixi", b"irot", b"imir", b"rloc",
                              b"lsel", b"auxC", b"clli", b"mdcv"})


class Unsupported(ValueError):
    """A file this module leaves to pillow-heif."""


def _boxes(data: bytes, start: int = 0, end: int | None = None):
    """(type, payload start, payload end) of each box in data[start:end]."""
    end = len(data) if end is None else end
    at = start
    while at + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, at)
        header = 8
        if size == 1:
            size = struct.unpack_from(">Q", data, at + 8)[0]
            header = 16
        elif size == 0:
            size = end - at
        if size < header or at + size > end:
            raise Unsupported("a box runs past its parent")
        yield kind, at + header, at + size
        at += size


def _child(data: bytes, start: int, end: int, kind: bytes) -> tuple[int, int]:
    for k, a, b in _boxes(data, start, end):
        if k == kind:
            return a, b
    raise Unsupported(f"no {kind.decode()} box")


class _Reader:
    """Big-endian fields read in turn."""

    def __init__(self, data: bytes, at: int):
        self.data, self.at = data, at

    def uint(self, size: int) -> int:
        if size == 0:
            return 0
        value = int.from_bytes(self.data[self.at:self.at + size], "big")
        self.at += size
        return value


def _meta(data: bytes) -> dict:
    """The primary item, items' types, locations, references and properties."""
    a, b = _child(data, 0, len(data), b"meta")
    a += 4  # a full box: version and flags
    meta = {"types": {}, "locations": {}, "refs": {}, "properties": [], "assoc": {},
            "idat": None}
    for kind, s, e in _boxes(data, a, b):
        r = _Reader(data, s)
        version = r.uint(1)
        flags = r.uint(3)
        if kind == b"pitm":
            meta["primary"] = r.uint(2 if version == 0 else 4)
        elif kind == b"iinf":
            r.uint(2 if version == 0 else 4)
            for k, s2, e2 in _boxes(data, r.at, e):
                if k != b"infe":
                    continue
                r2 = _Reader(data, s2)
                v = r2.uint(1)
                r2.uint(3)
                if v < 2:
                    raise Unsupported("an item info entry of version 0 or 1")
                item = r2.uint(2 if v == 2 else 4)
                r2.uint(2)
                meta["types"][item] = data[r2.at:r2.at + 4]
        elif kind == b"iloc":
            meta["locations"] = _locations(data, r, version, e)
        elif kind == b"iref":
            for k, s2, _ in _boxes(data, r.at, e):
                r2 = _Reader(data, s2)
                width = 2 if version == 0 else 4
                source = r2.uint(width)
                meta["refs"].setdefault((k, source), []).extend(
                    r2.uint(width) for _ in range(r2.uint(2)))
        elif kind == b"iprp":
            _properties(data, s, e, meta)
        elif kind == b"idat":
            meta["idat"] = (s, e)
        del flags
    if "primary" not in meta:
        raise Unsupported("no primary item")
    return meta


def _locations(data: bytes, r: _Reader, version: int, end: int) -> dict:
    sizes = r.uint(1)
    offset_size, length_size = sizes >> 4, sizes & 15
    sizes = r.uint(1)
    base_size, index_size = sizes >> 4, (sizes & 15) if version in (1, 2) else 0
    out = {}
    for _ in range(r.uint(2 if version < 2 else 4)):
        item = r.uint(2 if version < 2 else 4)
        method = r.uint(2) & 15 if version in (1, 2) else 0
        r.uint(2)  # data reference: this file
        base = r.uint(base_size)
        extents = []
        for _ in range(r.uint(2)):
            r.uint(index_size)
            extents.append((base + r.uint(offset_size), r.uint(length_size)))
        out[item] = (method, extents)
    if r.at > end:
        raise Unsupported("iloc runs past its box")
    return out


def _properties(data: bytes, start: int, end: int, meta: dict) -> None:
    for kind, s, e in _boxes(data, start, end):
        if kind == b"ipco":
            meta["properties"] = [(k, a, b) for k, a, b in _boxes(data, s, e)]
        elif kind == b"ipma":
            r = _Reader(data, s)
            version = r.uint(1)
            flags = r.uint(3)
            for _ in range(r.uint(4)):
                item = r.uint(2 if version < 1 else 4)
                links = []
                for _ in range(r.uint(1)):
                    value = r.uint(2 if flags & 1 else 1)
                    bits = 15 if flags & 1 else 7
                    links.append((bool(value >> bits), value & ((1 << bits) - 1)))
                meta["assoc"][item] = links


def _item_data(data: bytes, meta: dict, item: int) -> bytes:
    method, extents = meta["locations"].get(item, (None, []))
    if method == 0:
        return b"".join(data[o:o + n] for o, n in extents)
    if method == 1 and meta["idat"] is not None:
        base = meta["idat"][0]
        return b"".join(data[base + o:base + o + n] for o, n in extents)
    raise Unsupported(f"item {item} stored by construction method {method}")


def _item_properties(data: bytes, meta: dict, item: int) -> list[tuple[bytes, bytes]]:
    """(type, payload) of the item's properties, in their order; Unsupported for an
    essential one this module does not know."""
    out = []
    for essential, index in meta["assoc"].get(item, []):
        if index == 0 or index > len(meta["properties"]):
            continue
        kind, a, b = meta["properties"][index - 1]
        if essential and kind not in KNOWN_PROPERTIES:
            raise Unsupported(f"essential property {kind!r}")
        out.append((kind, data[a:b]))
    return out


def _colours(properties) -> tuple[int, bool]:
    """(matrix coefficients, full range) of the primary item's nclx colour (BT.601 full
    range where it says none, as libheif reads an HEVC without one)."""
    for kind, payload in properties:
        if kind == b"colr" and payload[:4] == b"nclx":
            matrix = struct.unpack_from(">H", payload, 8)[0]
            return matrix, bool(payload[10] >> 7)
    return 6, True


def _grid(data: bytes, meta: dict) -> tuple[list[int], int, int, int, int]:
    """(tile items, rows, columns, output width, output height) of the primary picture (one
    tile for a picture that is not a grid)."""
    primary = meta["primary"]
    kind = meta["types"].get(primary)
    if kind == b"hvc1":
        width, height = _extent(_item_properties(data, meta, primary))
        return [primary], 1, 1, width, height
    if kind != b"grid":
        raise Unsupported(f"primary item of type {kind!r}")
    g = _item_data(data, meta, primary)
    flags = g[1]
    rows, cols = g[2] + 1, g[3] + 1
    size = 4 if flags & 1 else 2
    width = int.from_bytes(g[4:4 + size], "big")
    height = int.from_bytes(g[4 + size:4 + 2 * size], "big")
    tiles = meta["refs"].get((b"dimg", primary), [])
    if len(tiles) != rows * cols or any(meta["types"].get(t) != b"hvc1" for t in tiles):
        raise Unsupported("a grid whose tiles are not its rows x columns of hvc1 pictures")
    return tiles, rows, cols, width, height


def _extent(properties) -> tuple[int, int]:
    for kind, payload in properties:
        if kind == b"ispe":
            return struct.unpack_from(">II", payload, 4)
    raise Unsupported("no ispe")


def _decoded_tiles(data: bytes, meta: dict, tiles: list[int]) -> list:
    """Each tile's frame, FFmpeg's HEVC decoder configured once (the tiles share it)."""
    import av  # noqa: PLC0415 - PyAV, a dependency of pamir (videos)

    configs = {bytes(p) for t in tiles for k, p in _item_properties(data, meta, t)
               if k == b"hvcC"}
    if len(configs) != 1:
        raise Unsupported("tiles without one shared decoder configuration")
    codec = av.CodecContext.create("hevc", "r")
    codec.extradata = configs.pop()
    codec.thread_count = 1  # one picture a core: the reading stage decodes several at once
    frames = []
    for t in tiles:
        frames += codec.decode(av.Packet(_item_data(data, meta, t)))
    frames += codec.decode(None)
    if len(frames) != len(tiles):
        raise Unsupported("the decoder gave another number of pictures than tiles")
    return frames


def _planes(frames, rows: int, cols: int, width: int, height: int):
    """The grid's Y, Cb and Cr planes, cut to the output size."""
    fmt = frames[0].format.name
    if fmt not in ("yuv420p", "yuvj420p"):
        raise Unsupported(f"pixel format {fmt}")
    th, tw = frames[0].height, frames[0].width
    if any((f.width, f.height, f.format.name) != (tw, th, fmt) for f in frames):
        raise Unsupported("tiles of different sizes")
    half = ((th + 1) // 2, (tw + 1) // 2)
    out = []
    for plane, (h, w) in enumerate([(th, tw), half, half]):
        whole = np.empty((rows * h, cols * w), np.uint8)
        for i, frame in enumerate(frames):
            p = frame.planes[plane]
            a = np.frombuffer(p, np.uint8).reshape(-1, p.line_size)[:h, :w]
            r, c = divmod(i, cols)
            whole[r * h:(r + 1) * h, c * w:(c + 1) * w] = a
        out.append(whole)
    y, cb, cr = out
    return (y[:height, :width], cb[:(height + 1) // 2, :(width + 1) // 2],
            cr[:(height + 1) // 2, :(width + 1) // 2])


def _shrunk(plane: np.ndarray, factor: int, shape: tuple[int, int]) -> np.ndarray:
    """The plane averaged over factor x factor blocks (OpenCV's area resampling), then
    brought to `shape` (rows, columns) where an odd edge leaves a pixel more or less."""
    if factor > 1:
        plane = cv2.resize(plane, (max(1, plane.shape[1] // factor),
                                   max(1, plane.shape[0] // factor)),
                           interpolation=cv2.INTER_AREA)
    if plane.shape != shape:
        plane = cv2.resize(plane, (shape[1], shape[0]), interpolation=cv2.INTER_AREA)
    return plane


def _rgb(y: np.ndarray, cb: np.ndarray, cr: np.ndarray, matrix: int, full: bool
         ) -> np.ndarray:
    """RGB of same-sized Y, Cb, Cr planes by the colour's matrix (BT.601: 5, 6; BT.709: 1):
    OpenCV's conversion for full-range BT.601 (a phone's; JPEG's own formula, 5 ms for 3 MP
    against 170 in float32 numpy), else computed here."""
    if matrix in (5, 6) and full:
        return cv2.cvtColor(cv2.merge([y, cr, cb]), cv2.COLOR_YCrCb2RGB)
    kr, kb = {1: (0.2126, 0.0722), 5: (0.299, 0.114), 6: (0.299, 0.114)}.get(matrix, (0, 0))
    if not kr:
        raise Unsupported(f"matrix coefficients {matrix}")
    y = y.astype(np.float32)
    cb = cb.astype(np.float32) - 128.0
    cr = cr.astype(np.float32) - 128.0
    if not full:
        y = (y - 16.0) * (255.0 / 219.0)
        cb *= 255.0 / 224.0
        cr *= 255.0 / 224.0
    kg = 1.0 - kr - kb
    r = y + 2 * (1 - kr) * cr
    b = y + 2 * (1 - kb) * cb
    g = y - (2 * kb * (1 - kb) / kg) * cb - (2 * kr * (1 - kr) / kg) * cr
    out = np.stack([r, g, b], axis=-1)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def _oriented(rgb: np.ndarray, properties) -> np.ndarray:
    """The transforms of the primary item in their order: irot (anticlockwise quarter
    turns) and imir (axis 0: top and bottom swapped, 1: left and right, as libheif 1.23
    reads it: tests/test_heif.py checks each EXIF orientation against pillow-heif)."""
    for kind, payload in properties:
        if kind == b"irot":
            rgb = np.rot90(rgb, payload[0] & 3)
        elif kind == b"imir":
            rgb = rgb[::-1] if payload[0] & 1 == 0 else rgb[:, ::-1]
    return np.ascontiguousarray(rgb)


def decode_tiles(data: bytes, factor: int) -> np.ndarray | None:
    """The HEIC's primary picture with its sides divided by `factor` (at least 2), in
    display orientation, as (H, W, 3) uint8 RGB; None where this module leaves the file to
    pillow-heif (see the module's doc)."""
    if factor < 2 or data[4:8] != b"ftyp":
        return None
    try:
        meta = _meta(data)
        properties = _item_properties(data, meta, meta["primary"])
        if any(k == b"pixi" and any(bits != 8 for bits in p[5:5 + p[4]])
               for k, p in properties):
            raise Unsupported("not 8 bits a channel")
        tiles, rows, cols, width, height = _grid(data, meta)
        frames = _decoded_tiles(data, meta, tiles)
        y, cb, cr = _planes(frames, rows, cols, width, height)
        shape = (max(1, height // factor), max(1, width // factor))
        matrix, full = _colours(properties)
        rgb = _rgb(_shrunk(y, factor, shape), _shrunk(cb, factor // 2, shape),
                   _shrunk(cr, factor // 2, shape), matrix, full)
        return _oriented(rgb, properties)
    except (Unsupported, struct.error, IndexError, KeyError, ValueError, OSError):
        return None
    except Exception as e:  # noqa: BLE001 - PyAV's errors (av.error.*): pillow-heif reads it
        if type(e).__module__.startswith("av"):
            return None
        raise


__all__ = ["Unsupported", "decode_tiles"]
