"""The error the index's jobs (pamir.jobs.loading, opening, learning, feedback) share: a step
that cannot run until a person changes something, with a message that says what. The CLI
prints it and fails; the server answers it with 400 (a feedback round's marks) or 409 (a
model that is not the index's), and NoSuchPicture, a kind of it, with 404."""


class WorkflowError(ValueError):
    """What a person must change before the step can run (the message says what)."""
