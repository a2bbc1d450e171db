"""Errors that carry a one-line message meant for the user.

The CLI turns a :class:`UserInputError` into ``rlperf: error: <message>`` and exit code 2,
never a traceback; anything else is a bug and keeps its traceback.
"""

import errno
import os
import signal


class UserInputError(ValueError):
    """Bad input from the user (config, CLI, file, checkpoint); the message names the problem
    and what is valid."""


class ConfigError(UserInputError):
    """An invalid configuration key or value."""


class CheckpointError(UserInputError):
    """A checkpoint that is missing, truncated or corrupted."""


class StorageError(UserInputError):
    """An output that cannot be written: a read-only or full disk, no permission."""


STORAGE_ERRNOS = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM})
"""OSError numbers that mean "this place cannot be written", not a bug."""


def is_storage_failure(exc: BaseException) -> bool:
    """Whether ``exc`` says an output cannot be written (see :data:`STORAGE_ERRNOS`)."""
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS


class WorkerError(RuntimeError):
    """A worker process (env worker, actor) raised, died or hung.

    The training session stops cleanly on it: a checkpoint when the learner's state is
    consistent, and one line naming the worker and the cause instead of a traceback.
    """


class ActorError(WorkerError):
    """A process that acts for the learner (a decoupled actor, the play process, a Ray
    actor) raised or died; its own traceback, when it sent one, is a note on the error."""

    def __init__(self, message: str, *, worker_index: int, worker_traceback: str | None = None):
        super().__init__(message)
        self.worker_index = worker_index
        if worker_traceback:
            self.add_note("actor-side traceback:\n" + worker_traceback.rstrip())


class EnvError(WorkerError):
    """An env stepped in the training process raised. Unlike a worker process it cannot be
    restarted: the run stops cleanly (the subprocess and decoupled runners restart theirs)."""


def describe_exit(exitcode: int | None) -> str:
    """A dead process's exit status in words ("signal SIGKILL (exit code -9)")."""
    if exitcode is None:
        return "exit status unknown"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"signal {name} (exit code {exitcode})"
    return f"exit code {exitcode}"


def make_output_dir(path: os.PathLike[str] | str, what: str) -> None:
    """Create ``path`` (and its parents) for an output, or raise a one-line StorageError
    naming ``what`` it is for and why it cannot be (e.g. a runs root under ``/proc``)."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"cannot create the {what} {path}: {exc.strerror or exc}; choose a directory "
            "this user can write"
        ) from None
