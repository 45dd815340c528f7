"""The package's exceptions: one type per kind of mistake, each message naming the file or the
command and what is wrong (the runner's own one-line message where the runner said it)."""
from __future__ import annotations


class AttnlabError(Exception):
    """Base of every attnlab error."""


class ResultsError(AttnlabError):
    """A file that is not an attnlab results file, is damaged, cannot be read, or lacks what was
    asked of it (a metric, a sample, a module)."""


class ResultsBusy(ResultsError):
    """A results file that a live run is writing and that could not be read in time."""


class ConfigError(AttnlabError):
    """The runner refused the experiment: an unknown option, a wrong type, a bad file. The message
    is the runner's (`config error: FILE:LINE:COL: ...`)."""


class RunnerNotFound(AttnlabError):
    """No runner executable where attnlab looks (ATTNLAB_RUNNER, the repository's build, PATH)."""


class RunFailed(AttnlabError):
    """The runner exited with an error other than a config error. `.run` holds the results file
    when one was written (status `failed`), `.returncode` the exit status, `.log` its last lines."""

    def __init__(self, message: str, *, run=None, returncode: int | None = None, log: str = ""):
        super().__init__(message)
        self.run = run
        self.returncode = returncode
        self.log = log


class RunInterrupted(KeyboardInterrupt):
    """A KeyboardInterrupt (the notebook's stop button) that stopped the runner cleanly: the results
    file says `interrupted`, and `.run` reads it."""

    def __init__(self, message: str, *, run=None):
        super().__init__(message)
        self.run = run
