"""The whole tokenmill exception tree, in one file.

    TokenmillError
    ├── UsageError           a command line that cannot run (missing INPUT/--out, bad flag values): exit 2
    ├── ConfigError          bad flags or pipeline file (lists every problem at once)
    ├── InputError           a path that does not exist, an unreadable or unknown format
    ├── RoutingError         data sent to the wrong track (SFT data to `pretrain`, ...)
    ├── MissingExtraError    an optional dependency is not installed
    ├── TokenizerError       a tokenizer that cannot be loaded, or fast/reference mismatch
    ├── TemplateError        a chat template that does not render
    ├── ParityError          written ids differ from the reference chat-template ids
    ├── ShardError           a shard directory that is corrupt or does not match its reader
    ├── StorageError         object storage (an ``s3://`` --out) that cannot be reached, read or written
    ├── StageError           a stage's unit output that is not what the stages after it read (a code defect)
    └── ServerError          an inference server that cannot be reached, or does not serve the model

The ``tokenmill`` command exits 2 for a ``UsageError`` (and argparse's own usage errors), 1 for every
other error here, 0 on success.

Bad *records* never raise: they become rejects (see ``tokenmill.report``).
Messages say what went wrong, where, and how to fix it.
"""

from __future__ import annotations


class TokenmillError(Exception):
    """Base class of every error tokenmill raises on purpose."""


class UsageError(TokenmillError):
    """The command line itself is wrong; the command exits 2, like argparse's usage errors."""


class ConfigError(TokenmillError):
    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid configuration ({len(self.problems)} problem(s)):\n{lines}")

    def __reduce__(self):  # raised in a worker process, it must arrive in the driver as it was
        return type(self), (self.problems,)


class InputError(TokenmillError):
    pass


class StorageError(TokenmillError):
    pass


class RoutingError(TokenmillError):
    pass


class MissingExtraError(TokenmillError):
    def __init__(self, module: str, extra: str, purpose: str = ""):
        self.module, self.extra, self.purpose = module, extra, purpose
        why = f" to {purpose}" if purpose else ""
        super().__init__(
            f"the optional dependency {module!r} is needed{why}; install it with: pip install 'tokenmill[{extra}]'"
        )

    def __reduce__(self):
        return type(self), (self.module, self.extra, self.purpose)


class TokenizerError(TokenmillError):
    pass


class TemplateError(TokenmillError):
    """A template that does not render, or one record it cannot render; ``reason`` is the stable reject key."""

    def __init__(self, message: str = "", *, reason: str = "template_error"):
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):
        return (_template_error, (str(self), self.reason))


class ParityError(TokenmillError):
    pass


class ShardError(TokenmillError):
    pass


class ServerError(TokenmillError):
    pass


class ClusterError(TokenmillError):
    """The Ray cluster lost the workers a run needs (a unit's worker died too often, or no worker can start):
    the committed units stay, and the same command run again resumes from them (engine/ray.py)."""


class StageError(TokenmillError):
    """A unit's output lacks a field the next stage reads, or holds the wrong type (engine/outputs.py)."""


def _template_error(message: str, reason: str) -> TemplateError:
    return TemplateError(message, reason=reason)
