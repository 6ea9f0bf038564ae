"""The error the index's jobs (pamir.jobs.loading, opening, learning, feedback) share: a step
that cannot run until a person changes something, with a message that says what. The CLI
prints it; the server answers it with 400 (NoSuchPicture, a kind of it, with 404)."""


class WorkflowError(ValueError):
    """What a person must change before the step can run (the message says what)."""
