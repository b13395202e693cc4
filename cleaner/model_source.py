"""Which model files a labeller loads, and whether the model repository's own Python may run.

`trust_remote_code` executes whatever Python a hub repository ships, so it is off unless asked for
explicitly, and then only at a pinned commit: a hub id alone could serve different code tomorrow.
Every architecture hostcrawl's published models use (EuroBERT, BERT, Qwen/Hunyuan-style decoders)
ships with transformers and vLLM, so the default needs no remote code.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

TRUST_REMOTE_CODE_ENV = "HOSTCRAWL_TRUST_REMOTE_CODE"
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
TRUE_VALUES = frozenset({"1", "true", "yes", "on"})


class RemoteCodeError(ValueError):
    """trust_remote_code asked for without a pinned commit."""


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A local folder or hub id, the revision to load, and whether its repository's code may run."""

    model: str
    revision: str | None = None
    trust_remote_code: bool = False
    revision_env: str = "the labeller's revision setting"

    def __post_init__(self) -> None:
        if self.trust_remote_code and not (self.revision and COMMIT_RE.match(self.revision)):
            raise RemoteCodeError(
                f"trust_remote_code would run the Python in {self.model!r}'s repository, so it needs a "
                f"pinned commit: set {self.revision_env} to the 40-hex commit you reviewed "
                f"(got {self.revision!r}), or unset {TRUST_REMOTE_CODE_ENV} to load the model with the "
                "code transformers ships"
            )

    @classmethod
    def from_env(cls, model_env: str, revision_env: str, default: str) -> ModelSource:
        """$model_env (else `default`), $revision_env, and $HOSTCRAWL_TRUST_REMOTE_CODE=1 to opt in."""
        trust = os.environ.get(TRUST_REMOTE_CODE_ENV, "").strip().lower() in TRUE_VALUES
        revision = os.environ.get(revision_env) or None
        return cls(os.environ.get(model_env, default), revision, trust, revision_env)

    def load_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for transformers' and vLLM's loaders."""
        return {"revision": self.revision, "trust_remote_code": self.trust_remote_code}
