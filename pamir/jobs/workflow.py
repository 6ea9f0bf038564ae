"""The text and faces passes run alone (`read_text`, `read_faces`) and their names. What this
module held before is by job: loading a system (pamir.jobs.loading), opening and updating an
index (pamir.jobs.opening), learning (pamir.jobs.learning) and relevance feedback
(pamir.jobs.feedback); these four move to the pass table (issue 53).
"""

from __future__ import annotations

from ..index import Index


def text_pass_name() -> str:
    """The text pass's name: its reader's (another reader, other models or settings, reads
    every picture again)."""
    from ..facts import ocr  # noqa: PLC0415  (rapidocr only when it reads)

    return f"text {ocr.fingerprint(ocr.settled())}"


def faces_pass_name() -> str:
    """The faces pass's name: its detector's and network's."""
    from ..facts.people import faces as people_faces  # noqa: PLC0415

    return f"faces {people_faces.fingerprint()}"


def read_text(index: Index, *, client=None, progress=None):
    """The text pass of `pamir index` (pamir.index.passes): the text written in every picture
    not read yet as it is now (pamir.facts.ocr), its words and phrases stored as facts; with a Dask
    client, batches as tasks, else on one thread per core. Returns the PassReport. The pass
    is named after the reader (`text_pass_name`). Each picture is decoded for this pass
    alone: `pamir index` feeds the pictures it indexes from its own decode
    (pamir.index.stage) and leaves this the rest."""
    from ..facts import ocr  # noqa: PLC0415  (rapidocr: the [ocr] extra)
    from ..features.cnn_engines import streams  # noqa: PLC0415
    from ..index.passes import run_pass  # noqa: PLC0415
    from ..index.videos import FramesReader  # noqa: PLC0415 - a video's text: its frames'

    # without a cluster, one reader per core, each on its own thread (pamir.index.passes)
    return run_pass(index, text_pass_name(), ("text",), FramesReader(ocr.read_texts),
                    client=client, progress=progress, threads=streams())


def read_faces(index: Index, *, client=None, progress=None, processes: int = 1) -> dict:
    """The faces pass of `pamir index` (pamir.index.passes): the faces of every picture not
    read yet as it is now, found, embedded and stored with the names their files give
    (pamir.facts.people.read_faces); with a Dask client, batches as tasks, else in `processes`
    local processes (`pamir index` reads in one per core, pamir.index.passes.local_processes;
    they start Python afresh, which imports the calling script's main module again: a
    script that asks for them runs its work under `if __name__ == "__main__":`).
    Then who every face is
    (pamir.facts.people.who.identify: names from files and keywords, names carried, unnamed
    people) and their pictures' person facts. Returns the pass's report with "people": what
    was identified. MissingExtra without the [faces] extra."""
    from ..extras import optional  # noqa: PLC0415
    from ..index.passes import run_pass  # noqa: PLC0415
    from ..facts.people import faces as people_faces  # noqa: PLC0415
    from ..facts.people.pictures import read_faces as reader  # noqa: PLC0415
    from ..facts.people.who import identify  # noqa: PLC0415

    with optional():  # the [faces] extra, or MissingExtra before any work
        import dlib  # noqa: F401, PLC0415
    people_faces.models_dir()
    from ..index.videos import FramesReader  # noqa: PLC0415 - a video's faces: its frames'

    report = run_pass(index, faces_pass_name(), ("person",), FramesReader(reader),
                      client=client, progress=progress, record=index.record_faces,
                      processes=processes)
    return {**report.as_dict(), "people": identify(index).as_dict()}


__all__ = ["faces_pass_name", "read_faces", "read_text", "text_pass_name"]
