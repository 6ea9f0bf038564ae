"""The HTTP API and web page over an index: search, annotate, thumbnails, explanations.

Pictures are served by their id in the index only: no route takes a path from the client, so
nothing outside the index can be read. The model (needed only to annotate an uploaded picture
and to explain a score block by block) is loaded on first use.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import warnings
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import numpy as np
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel, Field
from starlette.middleware.trustedhost import TrustedHostMiddleware

from .. import config
from ..jobs.annotation import keywords_of_rows
from ..jobs.folder_look import attach as attach_folder_look
from ..calibration import LIKELY
from ..features.images import ImageError, open_image
from ..features.thumbnails import size_for, write_from_file
from ..index import Index, QueryError, embeddings_enabled
from ..index.progress_record import read_progress
from ..facts.ocr import lines_of
from ..text.query import SORTS
from ..storage import shown_path
from ..system import index_transform
from ..facts.video import is_video
from ..jobs.errors import WorkflowError
from ..jobs.feedback import NoSuchPicture, NotKept, indexed_picture, rerank_feedback
from ..jobs.loading import load_system
from ..zeroshot.classes import ZeroCaptionSystem, is_zero_caption
from .explain import explanation
from .duplicates import router as duplicates_router
from .people import router as people_router
from .places import router as places_router
from .sharing import COOKIE, EDITOR_ROUTES, UPLOAD_ROUTES, WRITE_ROUTES, Sharing, bearer
from .video import router as video_router
from .video import video_thumbnail

STATIC = Path(__file__).resolve().parent / "static"
#: Uploads bigger than this are refused (413).
MAX_UPLOAD_BYTES = 32 * 1024 * 1024
MAX_K = 1000
#: Longer queries are refused (400): a household's queries are a few words and folders.
MAX_QUERY_CHARS = 2000
#: Pictures declaring more pixels are refused as decompression bombs (400): Pillow's own
#: default, set explicitly so that no library changes it under us (`--max-pixels`).
MAX_PIXELS = 89_478_485
#: The `sort` parameter takes the names of the query grammar's sort:X (pamir.text.query.SORTS).
SORT_PATTERN = "^(" + "|".join(SORTS) + ")$"


class ApiError(BaseModel):
    """What every refused request gets: why, and for a query the words not understood."""

    detail: str = Field(..., description="why the request was refused, in words")
    unknown: list[str] = Field([], description="a query's words outside the vocabulary")


_ERROR = {"model": ApiError}
#: The error answers of every route, so that the OpenAPI schema says what a client may get.
ERROR_RESPONSES = {400: {**_ERROR, "description": "a bad query, picture or request"},
                   401: {**_ERROR, "description": "no token, or a wrong one (off loopback)"},
                   403: {**_ERROR, "description": "a cross-origin request, a viewer's token "
                                                  "on an editor's route, a read-only server"},
                   404: {**_ERROR, "description": "no such picture"},
                   409: {**_ERROR, "description": "the model cannot do this"},
                   410: {**_ERROR, "description": "the picture's file is gone"},
                   413: {**_ERROR, "description": "an upload over the size limit"},
                   507: {**_ERROR, "description": "Keep: the disk is full or failing; what "
                                                  "was not saved is said"},
                   429: {**_ERROR, "description": "too many wrong tokens or uploads from this "
                                                  "client this minute"},
                   503: {**_ERROR, "description": "no model to annotate or explain with"}}


class Feedback(BaseModel):
    """Pictures marked right or wrong for a query (every mark of the round, each time)."""

    q: str = Field(..., description="the query the pictures were judged for")
    right: list[int] = Field([], description="ids of pictures that answer the query")
    wrong: list[int] = Field([], description="ids of pictures that do not")
    k: int = Field(60, ge=1, le=MAX_K, description="how many re-ranked pictures")


def create_app(index_dir, model_dir=None, *, system=None,
               allowed_hosts: list[str] | None = None, warm_mapping: bool | None = None,
               sharing: Sharing | None = None, max_upload_bytes: int | None = None,
               max_pixels: int | None = None) -> FastAPI:
    """The server of the index in `index_dir`.

    model_dir: the trained system for uploads and explanations (default: the model the index
    was built with). system: an already loaded system (tests, embedding). allowed_hosts: the
    Host headers answered (None: any); a server on 127.0.0.1 answers only its own names, so
    a web page elsewhere cannot reach it through a DNS name that points at 127.0.0.1.
    warm_mapping: load the word-embedding model and the vocabulary's embeddings in the
    background at start (default: unless $PAMIR_EMBEDDINGS is 0), so that no query waits for
    them. sharing: the tokens, roles and per-client limits (pamir.server.sharing; default: no
    token, no per-client limit). max_upload_bytes, max_pixels: the upload limits
    (default MAX_UPLOAD_BYTES, MAX_PIXELS).

    Longer than a function should be, for a reason: each route is a few lines declared here,
    as FastAPI declares them, over this server's state; what a route does lives in the
    library (pamir.jobs.loading, feedback, annotation, Index), and the people's routes in
    pamir.server.people.
    """
    # Pillow's decompression-bomb limit, explicit: a header over it is refused before decoding
    Image.MAX_IMAGE_PIXELS = max_pixels or MAX_PIXELS
    index = Index.open(index_dir)
    state = _State(index, model_dir or index.model_dir or None, system)
    state.max_upload_bytes = max_upload_bytes
    sharing = sharing or Sharing(uploads_per_minute=0)  # loopback, as before: no limits
    if embeddings_enabled() if warm_mapping is None else warm_mapping:
        state.warm_mapping()
    app = FastAPI(
        title="pamir",
        summary="Search pictures by text, annotate them, and see which blocks drive a score.",
        version="1",
        responses=ERROR_RESPONSES,
    )
    app.state.pamir = state
    app.state.sharing = sharing  # the people routes' roles (pamir.server.people)
    app.include_router(people_router)
    app.include_router(places_router)
    app.include_router(duplicates_router)
    app.include_router(video_router)  # a video's file, with ranges (pamir.server.video)
    if allowed_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)

    @app.middleware("http")
    async def same_origin_only(request: Request, call_next):
        # A web page elsewhere must not drive this server: browsers send Origin on
        # cross-origin requests (and on same-origin POSTs, with our own host), so any
        # request whose Origin is not this server's own host is refused. No CORS headers
        # are ever sent, so a cross-origin page cannot read an answer either.
        origin = request.headers.get("origin")
        if origin is not None and not _same_origin(origin, request.headers.get("host", "")):
            return JSONResponse({"detail": f"cross-origin request from {origin[:200]!r} "
                                           "refused"}, status_code=403)
        return await call_next(request)

    @app.middleware("http")
    async def refresh_index(request: Request, call_next):
        # A concurrent `pamir index` may have committed pictures since the last request.
        index.refresh()
        return await call_next(request)

    @app.middleware("http")
    async def access(request: Request, call_next):
        # Outermost: no route runs (the page and /docs included) before this says who asks.
        refused = _refusal(sharing, request)
        if refused is not None:
            return refused
        if sharing.tokens and request.url.path == "/" and request.query_params.get("token"):
            # the page's first visit (a right token): keep it in a cookie, out of the URL
            return _keep_token_in_cookie(request)
        return await call_next(request)

    @app.get("/api/status", summary="What the index holds")
    def status():
        s = index.status()
        s["model_loaded"] = state.system is not None
        s["model_available"] = state.model_available()
        # feedback and its Keep need a fitted model: a bare folder's index answers 409
        s["feedback"] = s["model_available"] and not is_zero_caption(index.model_fingerprint)
        s["mapping"] = state.mapping_status()
        return s

    @app.get("/api/progress", summary="How far a running `pamir index` is, pass by pass")
    def progress():
        return read_progress(index.directory)

    @app.get("/api/vocabulary", summary="The words queries can use")
    def vocabulary():
        return {"words": index.vocabulary}

    @app.get("/api/places", summary="The collection's places, with how many pictures each")
    def places(limit: int = Query(100, ge=1, le=MAX_K, description="how many places")):
        """The places the pictures were taken (pamir.facts.places, from their GPS), the most
        pictures first: each with the form shown, its level (place, city, region, country),
        its pictures and the `query` that finds them (`place:kyoto`)."""
        return {"places": index.places(limit)}

    @app.get("/api/search", summary="Pictures ranked for a text query")
    def search(q: str = Query(..., description="a query: words, -word, word^2, \"a phrase\", "
                                                "p:0.5, floor:X, sort:date, in:FOLDER, "
                                                "date:2019-07"),
               k: int = Query(24, ge=1, le=MAX_K, description="how many pictures"),
               floor: float | None = Query(None, description="leave out scores under this"),
               p: float | None = Query(None, ge=0, le=1, description="leave out pictures less "
                                       "likely than this to be relevant (as p:X)"),
               sort: str | None = Query(None, pattern=SORT_PATTERN),
               folder: list[str] = Query([], alias="in", description="only under a folder"),
               collapse: str = Query("copies", pattern="^(none|copies|bursts)$",
                                     description="a group of copies (bursts: and a burst) "
                                                 "as one hit, the others in its `folded`")):
        """Each hit carries `probability`, the calibrated probability that it is relevant
        (absent where the query has none: `probability_note` says why), and `likely` (at least
        LIKELY); `likely` at the top counts the likely relevant pictures. Those come first:
        by score, or with sort:date, the likely ones by date, then the others by score."""
        query = _parse(index, q)
        folders = (query.folders + folder) if folder else None
        sort_by = _sort(sort) or query.sort
        likely = index.count_likely(query, LIKELY, folders)
        hits = index.search(query, k, floor=floor, sort=sort_by, folders=folders, p_floor=p,
                            collapse=collapse)
        return {"query": q, "words": query.words, "unknown": query.unknown,
                "mapping": query.mapping_json(),
                "mapped": [m.describe() for m in query.mapped],
                "options": {**query.options_json(),
                            **({"floor": floor} if floor is not None else {}),
                            **({"p_floor": p} if p is not None else {}),
                            **({"sort": _sort(sort)} if sort else {}),
                            "folders": query.folders + folder},
                "pictures": len(index), "likely": likely, "likely_probability": LIKELY,
                "probability_note": index.probability_note(query) or None,
                "hits": [_hit_json(h) for h in hits]}

    @app.get("/api/pictures/{picture_id}/similar",
             summary="More like this: the pictures nearest to an indexed picture")
    def similar(picture_id: int, k: int = Query(24, ge=1, le=MAX_K),
                folder: list[str] = Query([], alias="in")):
        p = _picture(index, picture_id)
        hits = index.similar(index.vector(p.id), k, exclude=[p.id], folders=folder)
        return {"like": _hit_json(p), "space": "text",
                "pictures": len(index),
                "hits": [_hit_json(h) for h in hits]}

    @app.post("/api/similar", summary="More like this for an uploaded picture (the raw file "
                                      "as body), through the model",
              openapi_extra={"requestBody": {"required": True, "content": {
                  "image/*": {"schema": {"type": "string", "format": "binary"}}}}})
    async def similar_upload(request: Request, k: int = Query(24, ge=1, le=MAX_K)):
        data = await _read_upload(request, state.max_upload_bytes)
        z = state.annotate_bytes(data)
        hits = index.similar(z, k)
        return {"space": "text", "pictures": len(index),
                "hits": [_hit_json(h) for h in hits]}

    @app.get("/api/pictures/{picture_id}", summary="A picture of the index and its keywords")
    def picture(picture_id: int, k: int = Query(config.ANNOTATION_WORDS, ge=1, le=MAX_K)):
        p = _picture(index, picture_id)
        return {**_hit_json(p),
                "caption_source": p.source,
                "keywords": _keywords(index.vector(p.id, classes=True), index, k,
                                      index.facts_of(p.id)),
                # its place beside its date, and the lines of text read on it with their
                # boxes (fractions of the picture's width and height) for the page to outline
                "facts": index.shown_facts(p.id),
                "text": [{"text": t.text, "confidence": t.confidence, "box": list(t.box)}
                         for t in lines_of(index.facts_of(p.id))]}

    @app.get("/api/pictures/{picture_id}/thumbnail", summary="A JPEG thumbnail",
             response_class=Response,
             responses={200: {"content": {"image/jpeg": {}}}})
    def thumbnail(picture_id: int, size: int = Query(256, ge=16, le=1024),
                  t: float | None = Query(None, ge=0, description="a video's time (s)")):
        p = _picture(index, picture_id)
        out = (video_thumbnail(state.thumbnails, p, size, t) if is_video(p.path)
               else state.thumbnail(p, size))
        return FileResponse(out, media_type="image/jpeg",
                            headers={"Cache-Control": "max-age=3600"})

    @app.get("/api/pictures/{picture_id}/explain",
             summary="Where the picture's score for a query comes from: each CNN cell's and "
                     "visterm block's share, merged into a heat map; they add up to the score")
    def explain(picture_id: int, q: str = Query(...)):
        p = _picture(index, picture_id)
        if is_video(p.path):  # its blocks are a frame's: the page shows the frame's time
            raise HTTPException(422, f"picture {p.id} is a video: its score is its best "
                                     "frame's, whose blocks are not drawn")
        query = _parse(index, q)
        system = _fitted(state.require_system())
        try:
            out = explanation(system, p.path, query.vector)
        except FileNotFoundError:
            raise HTTPException(410, f"picture {p.id}'s file is gone; run `pamir index` again")
        except ImageError as e:  # changed since it was indexed
            raise HTTPException(422, f"picture {p.id} cannot be decoded ({e}); run `pamir "
                                     "index` again") from None
        except NotImplementedError as e:
            raise HTTPException(409, str(e))
        out["indexed_score"] = float(index.vector(p.id) @ query.vector)
        for v in out["voters"]:  # the voters the index holds get their page id (thumbnails)
            v["picture"] = index.id_of_path(v["path"])
        out.update(query=q, words=query.words, unknown=query.unknown, id=p.id)
        return out

    @app.post("/api/feedback", summary="Re-rank a query's results with PA updates on the "
                                       "pictures marked right and wrong (nothing is saved)")
    def feedback(body: Feedback):
        query = _parse(index, body.q)
        return state.feedback(query, body, keep=False)

    @app.post("/api/feedback/keep", summary="Fold a feedback round into the saved model (the "
                                            "previous one kept) and rescore the index")
    def feedback_keep(body: Feedback):
        query = _parse(index, body.q)
        return state.feedback(query, body, keep=True)

    @app.post("/api/annotate", summary="Keywords of an uploaded picture (the raw file as body)",
              openapi_extra={"requestBody": {"required": True, "content": {
                  "image/*": {"schema": {"type": "string", "format": "binary"}}}}})
    async def annotate(request: Request,
                       k: int = Query(config.ANNOTATION_WORDS, ge=1, le=MAX_K)):
        data = await _read_upload(request, state.max_upload_bytes)
        z = state.annotate_bytes(data)
        return {"keywords": _keywords(z, index, k)}

    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(QueryError)
    async def query_error(request, e: QueryError):
        return JSONResponse({"detail": str(e), "unknown": e.unknown}, status_code=400)

    return app


def _fitted(system):
    """The system, if a model was fitted (not the zero-caption system's); else 409."""
    if isinstance(system, ZeroCaptionSystem):
        raise HTTPException(409, "no model has been fitted to this index: feedback and "
                                 "explanations need one (`pamir fit` on captioned pictures, "
                                 "then `pamir index MODEL FOLDER`)")
    return system


def _parse(index: Index, q: str):
    if len(q) > MAX_QUERY_CHARS:
        raise HTTPException(400, f"query of {len(q):,} characters refused: the limit is "
                                 f"{MAX_QUERY_CHARS:,}")
    return index.parse_query(q)  # QueryError -> 400 {"detail": why, "unknown": [words]}


NO_TOKEN_PAGE = """<!doctype html><meta charset="utf-8"><title>pamir: a token is needed</title>
<h1>This pamir server needs a token</h1>
<p>Open the link that <code>pamir serve</code> printed when it started (it ends in
<code>?token=...</code>), or ask the person who runs it for one. The page remembers it.</p>
"""


def _refusal(sharing: Sharing, request: Request) -> Response | None:
    """The answer that refuses this request (401, 403, 429), or None to let it through."""
    path = request.url.path
    client = request.client.host if request.client else "?"
    if sharing.tokens:
        if sharing.failures.over(client):
            return _refuse(429, "too many wrong tokens from this client: wait a minute",
                           {"retry-after": str(sharing.failures.retry_after(client))})
        token = (bearer(request.headers.get("authorization"))
                 or (request.query_params.get("token") if path == "/" else None)
                 or request.cookies.get(COOKIE))
        role = sharing.role_of(token)
        if role is None:
            if token:  # a wrong token, never repeated in the answer nor logged
                sharing.failures.add(client)
            why = "a wrong token" if token else "no token"
            if path == "/":
                return Response(NO_TOKEN_PAGE, 401, media_type="text/html",
                                headers={"www-authenticate": "Bearer"})
            return _refuse(401, f"{why}: send `Authorization: Bearer TOKEN` (the token "
                                "`pamir serve` printed)", {"www-authenticate": "Bearer"})
        if path in EDITOR_ROUTES and role != "editor":
            return _refuse(403, "a viewer's token: marking pictures and keeping what they "
                                "teach need an editor's token")
    if path in WRITE_ROUTES and sharing.read_only:
        return _refuse(403, "this server is read-only (`pamir serve --read-only`): nothing "
                            "is kept")
    if path in UPLOAD_ROUTES and not sharing.uploads.add(client):
        return _refuse(429, f"over {sharing.uploads_per_minute} uploads a minute from this "
                            "client: wait a minute",
                       {"retry-after": str(sharing.uploads.retry_after(client))})
    return None


def _refuse(status: int, detail: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _keep_token_in_cookie(request: Request) -> Response:
    """303 to the same page without the token in its URL (not in the history, nor sent on
    as a Referer), the token in an HttpOnly, SameSite=Strict cookie (no script, no other
    site's request carries it)."""
    rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    response = Response(status_code=303,
                        headers={"location": "/" + (f"?{urlencode(rest)}" if rest else "")})
    response.set_cookie(COOKIE, request.query_params["token"], max_age=400 * 24 * 3600,
                        httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
    return response


def _same_origin(origin: str, host: str) -> bool:
    """Whether an Origin header names the host the request was sent to."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(host) and parts.netloc == host


def _check_picture_size(data: bytes) -> None:
    """400 for a decompression bomb: a small file that declares more pixels than PIL's
    limit (Image.MAX_IMAGE_PIXELS), found from its header without decoding it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with open_image(data) as im:  # HEIC, AVIF, RAW too
                w, h = im.size
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise HTTPException(400, f"picture refused: {e}") from None
    except Exception:  # noqa: BLE001 - not a picture PIL knows: the model says why (422)
        return
    limit = Image.MAX_IMAGE_PIXELS
    if limit and w * h > limit:
        raise HTTPException(400, f"picture of {w}x{h} pixels refused: over the limit of "
                                 f"{limit} pixels (a decompression bomb?)")


def _sort(sort: str | None) -> str | None:
    """The order a `sort` parameter names, as the query grammar's sort:X ("date": newest)."""
    return SORTS[sort] if sort else None


def _picture(index: Index, picture_id: int):
    try:
        return indexed_picture(index, picture_id)
    except NoSuchPicture as e:
        raise HTTPException(404, str(e)) from None


def _keywords(z: np.ndarray, index: Index, k: int, facts=None) -> list[dict]:
    """A picture's keywords as the API gives them (pamir.jobs.annotation), from its stored column
    or an upload's: its text-space vector, then its class probabilities where the index has
    classes, then an indexed picture's place and text facts."""
    P = z[None, index.T:] if index.classes and len(z) == index.rows else None
    [words] = keywords_of_rows(z[None, : index.T], index.vocabulary, index.calibration, P, k,
                               None if facts is None else [facts],
                               folder=is_zero_caption(index.model_fingerprint))
    return words


def _hit_json(hit) -> dict:
    """A hit (pamir.index.Hit, or a picture's record with no score) as the API gives it."""
    path = shown_path(hit.path)
    d = {"id": hit.id, "name": os.path.basename(path), "path": path,
         "thumbnail": f"/api/pictures/{hit.id}/thumbnail"}
    if getattr(hit, "score", None) is not None:
        d["score"] = hit.score
    probability = getattr(hit, "probability", None)
    if probability is not None:  # a calibrated probability of relevance (pamir.calibration)
        d["probability"] = round(probability, 4)
        d["likely"] = probability >= LIKELY
    # the date taken (pamir.facts.metadata) and the caption from a table or the picture's files
    d["taken"] = getattr(hit, "taken", None)
    d["caption"] = list(getattr(hit, "caption", None) or ())
    # its place, people, camera (pamir.facts.fact), and the query's terms it holds as facts
    d["facts"] = dict(getattr(hit, "facts", None) or {})
    d["matched"] = list(getattr(hit, "matched", None) or ())
    d["held"] = [{"kind": k, "shown": v, "confidence": round(c, 4)}
                 for k, v, c in getattr(hit, "held", None) or ()]
    d["folded"] = list(getattr(hit, "folded", None) or ())  # its copies (pamir duplicates)
    if is_video(hit.path):  # the page plays it from its best frame (pamir.server.video)
        d["video"] = f"/api/pictures/{hit.id}/video"
        d["time"] = getattr(hit, "time", None)
    return d


async def _read_upload(request: Request, limit: int | None = None) -> bytes:
    limit = limit or MAX_UPLOAD_BYTES
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"picture of {declared} bytes; the limit is {limit:,} bytes "
                                 "(`pamir serve --max-upload-mb`)")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise HTTPException(413, f"picture over the limit of {limit:,} bytes "
                                     "(`pamir serve --max-upload-mb`)")
    if not data:
        raise HTTPException(400, "empty body: send the picture file as the request body")
    _check_picture_size(bytes(data))
    return bytes(data)


class _State:
    """The index, the lazily loaded system, and the thumbnail cache."""

    def __init__(self, index: Index, model_dir, system):
        self.index = index
        self.model_dir = model_dir
        self.system = system
        self._lock = threading.Lock()
        self.thumbnails = _thumbnail_dir(index)
        self._mapping: dict = {"state": "not loaded"}
        self.max_upload_bytes: int | None = None

    def warm_mapping(self) -> None:
        """Load the word-embedding model and the vocabulary's embeddings in a background
        thread: the first query with a word outside the vocabulary does not wait for them."""

        def load():
            self._mapping = {"state": "loading"}
            t0 = time.perf_counter()
            why = self.index.bridge.warm()
            if not why and self.index.classes:  # a CNN index: its class names' embeddings
                why = self.index.class_words.warm()
            self._mapping = ({"state": "unavailable", "reason": why} if why else
                             {"state": "loaded", "seconds": round(time.perf_counter() - t0, 2)})

        threading.Thread(target=load, name="pamir-mapping", daemon=True).start()

    def mapping_status(self) -> dict:
        return dict(self._mapping)

    def model_available(self) -> bool:
        return self.system is not None or bool(
            self.model_dir and Path(self.model_dir).is_dir())

    def require_system(self):
        with self._lock:
            if is_zero_caption(self.index.model_fingerprint) and (
                    self.system is None or isinstance(self.system, ZeroCaptionSystem)
                    and self.system.vocabulary != self.index.vocabulary):
                # the folder's own words, as the index has them now (a watcher refits them)
                self.system = self.system or ZeroCaptionSystem(config.default_cache_dir())
                attach_folder_look(self.system, self.index, writable=False)
            if self.system is None:
                if not self.model_available():
                    raise HTTPException(
                        503, "no model: start the server with --model MODEL to annotate "
                             "uploads and explain scores")
                # Heavy (the models and torch): loaded on the first upload or explanation.
                try:
                    self.system = load_system(self.model_dir, vocabulary=self.index.vocabulary)
                except WorkflowError as e:
                    raise HTTPException(409, f"{e}; serve with the model the index was built "
                                             "with") from None
            return self.system

    def feedback(self, query, body: Feedback, keep: bool) -> dict:
        """A feedback round (pamir.jobs.feedback.rerank_feedback) as the API answers it: the
        re-ranked hits and the words PA changed; with keep, the round kept in the model
        folder (the previous model kept as MODEL.previous) and the index rescored."""
        system = _fitted(self.require_system())
        if keep and not self.model_dir:
            raise HTTPException(503, "no model folder to save to: start the server with "
                                     "--model MODEL")
        try:
            out = rerank_feedback(self.index, system, query, body.right, body.wrong, k=body.k,
                                  keep_in=self.model_dir if keep else None, lock=self._lock)
        except NoSuchPicture as e:
            raise HTTPException(404, str(e)) from None
        except WorkflowError as e:
            raise HTTPException(400, str(e)) from None
        except NotImplementedError as e:
            raise HTTPException(409, str(e)) from None
        except NotKept as e:
            raise HTTPException(e.status, str(e)) from None
        if keep:
            self.index.refresh()  # the rescored index, at once
        return {"query": body.q, "words": query.words, "right": out["right"],
                "wrong": out["wrong"], "changed_words": out["rows"],
                "candidates": out["candidates"], **({"kept": out["kept"]} if keep else {}),
                "hits": [_hit_json(h) for h in out["hits"]]}

    def annotate_bytes(self, data: bytes) -> np.ndarray:
        system = self.require_system()
        with tempfile.NamedTemporaryFile(suffix=".upload") as f:
            f.write(data)
            f.flush()
            # what the index stores for a picture: its text-space vector, then its class
            # probabilities where the index has classes
            Z, ok, reasons = index_transform(system, bool(self.index.classes))([f.name])
        if not np.asarray(ok)[0]:
            why = f" ({reasons[0]})" if reasons[0] else ""
            raise HTTPException(422, f"the upload could not be decoded as a picture{why}")
        return np.asarray(Z, dtype=np.float32)[0]

    def thumbnail(self, p, size: int) -> Path:
        """The picture's thumbnail: the one `pamir index` made, else made now."""
        try:
            return write_from_file(self.thumbnails, p.hash, p.path, size_for(size))
        except FileNotFoundError:
            raise HTTPException(410, f"picture {p.id}'s file is gone; run `pamir index` "
                                     "again") from None
        except (UnidentifiedImageError, OSError, ImageError, Image.DecompressionBombError) as e:
            raise HTTPException(422, f"picture {p.id} cannot be decoded ({e})") from None


def _thumbnail_dir(index: Index) -> Path:
    """The index's thumbnail folder, or a private temporary one when the index is read-only."""
    d = index.thumbnails_dir
    try:
        d.mkdir(exist_ok=True)
        if os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="pamir-thumbnails-"))
