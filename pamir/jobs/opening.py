"""Opening an index for a model and bringing it up to date with folders, the steps `pamir index`
runs as one job (pamir.jobs.indexing.run_index) and a script may call alone: the index created,
reopened, rebuilt after a first model or a refit, rescored when its model folder has learnt,
refused for another model's (`open_index`); the folders checked (`picture_folders`); the
pictures under them read into it (`update_index`).

Errors are exceptions with a message for a person (IndexDirError, WorkflowError, OSError);
notes along the way go to `say` (default: this module's logger).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ..index import BATCH_SIZE, Index
from ..index.place_pass import name_places
from ..zeroshot.classes import is_zero_caption, zero_caption_base
from .errors import WorkflowError
from .loading import rescore, text_side, word_scales

logger = logging.getLogger(__name__)


def open_index(index_dir, model_dir, system, fingerprint: str, rebuild: bool = False, *,
               say=logger.info) -> Index:
    """The index at index_dir for this model (model_dir None: the zero-caption system),
    writable: created, reopened, or rebuilt. An index built with no captions is rebuilt for
    a first model; one whose model folder has learnt since (same vocabulary up front) is
    rescored; one built with another model is a WorkflowError (rebuild=True recomputes it).
    """
    # start-up: pamir.system loads numba and scipy (about 0.5 s), and `pamir index` imports
    # this module at its top (for --help too)
    from ..system import class_names_of  # noqa: PLC0415

    index_dir = Path(index_dir)
    model = None if model_dir is None else Path(model_dir)
    vocabulary, idf = text_side(system)
    new = {"model_dir": model, "fingerprint": fingerprint, "classes": class_names_of(system),
           "scales": word_scales(system)}
    if rebuild:
        return Index.rebuild(index_dir, vocabulary, idf, **new)
    if not Index.exists(index_dir):
        return Index.create(index_dir, vocabulary, idf, **new)
    index = Index.open(index_dir, writable=True)
    built = zero_caption_base(index.model_fingerprint)  # its folder's look is the system's
    if built != fingerprint and is_zero_caption(index.model_fingerprint):
        # a first model after searching with none: nothing of a person's is lost, and
        # the classifier's pooled vectors are in the feature cache
        index.close()
        say(f"{index_dir} answered with no captions so far: rebuilding it for "
            f"{model or 'the new zero-caption system'}")
        return Index.rebuild(index_dir, vocabulary, idf, **new)
    if built != fingerprint:
        if (model is not None and index.model_dir == str(model.resolve())
                and list(vocabulary[: index.T]) == index.vocabulary):
            # the same model folder has learnt since (`pamir learn`, feedback kept): bring
            # every picture's scores up to date, features from the cache
            say(f"{model} has changed since {index_dir} was built (pamir learn, feedback "
                "kept): rescoring its pictures")
            rescore(index, system, model, fingerprint)
            return index
        index.close()
        if model is not None and index.model_dir == str(model.resolve()):
            # the same model folder fitted again (`pamir fit -o` it, a refit): its words
            # changed, so its scores are new; the features come from the cache, and what
            # editors decided about people is carried over (Index.rebuild)
            say(f"{model} was fitted again since {index_dir} was built (its words changed): "
                "rebuilding the index for it")
            return Index.rebuild(index_dir, vocabulary, idf, **new)
        raise WorkflowError(f"{index_dir} was built with another model ({index.model_dir}"
                            + _representations_differ(index.model_dir, system)
                            + "); add --rebuild to recompute it for this one, or choose "
                            "another --index")
    if model is not None and index.model_dir != str(model.resolve()):
        index.set_model(model, fingerprint)  # same model, moved
    if model is None:  # the folder's own look, where it has one (pamir.jobs.folder_look)
        # start-up: the folder look imports scipy and the zero-caption models (0.5 s), which
        # `pamir search` reaches through this module and does not need
        from .folder_look import attach as attach_folder_look  # noqa: PLC0415

        attach_folder_look(system, index, say=say)
    return index


def _representations_differ(built_with: str, system) -> str:
    """", which reads pictures as X; this model reads them as Y" when the index's model folder
    still records another picture representation than `system` (the usual reason an index
    cannot take a model's scores), else ""."""
    try:
        head = json.loads((Path(built_with) / "model.json").read_text(encoding="utf-8"))
        old = head["info"]["representation"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""  # moved, deleted or not a system: the folder is all there is to name
    new = getattr(system, "info", {}).get("representation")
    if not new or old == new:
        return ""
    return f", which reads pictures as {old}; this model reads them as {new}"


def picture_folders(folders) -> list[Path]:
    """The folders to index, each checked: a WorkflowError names one that is not a folder."""
    folders = [Path(f).expanduser() for f in folders]
    for f in folders:
        if not f.is_dir():
            raise WorkflowError(f"{f}: not a folder; give folders of pictures to index")
    return folders


def update_index(index: Index, system, folders, transform=None, *, captions=None,
                 batch_size: int | None = None, progress=None):
    """Bring `index` up to date with the pictures under `folders` (Index.update): each
    picture through `transform` (default: in this process, what the index takes from the
    system, pamir.system.index_transform), batch_size at a time (default: BATCH_SIZE)."""
    if transform is None:
        from ..system import index_transform  # noqa: PLC0415  start-up, as in open_index

        transform = index_transform(system, bool(index.classes))
    if getattr(transform, "map_batches", None) is not None and len(system.vocabulary) != index.T:
        # the workers' zero-caption system has no folder look (pamir.jobs.folder_look)
        raise WorkflowError(f"{index.directory} answers with its folder's own words, which "
                            "the Dask workers do not have: index it without --workers")
    report = index.update(folders, transform, captions=captions,
                          batch_size=batch_size or BATCH_SIZE, progress=progress)
    name_places(index)  # places named by an older rule: named again from their positions
    return report
