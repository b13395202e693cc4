"""The cleaners' quality gate: minimum macro F1 per cleaner on a fixed subset of the WCXB dev pages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cleaner.evaluate import EvalReport

GATE_FILE = Path(__file__).resolve().parent / "quality_gate.json"
# Recorded minima sit this far below the measured score, so float noise and library patch releases pass.
RECORD_MARGIN = 0.01


@dataclass(slots=True)
class Gate:
    """Which pages (every `step`-th id) and the minimum macro F1 each cleaner must keep there."""

    step: int
    minimum_f1: dict[str, float]
    history: list[dict[str, object]]

    def subset(self, ids: list[str]) -> list[str]:
        """The fixed gate subset of a sorted id list."""
        return ids[:: self.step]

    def check(self, report: EvalReport) -> str | None:
        """A failure message, or None when the cleaner holds its minimum (or has none)."""
        minimum = self.minimum_f1.get(report.cleaner)
        if minimum is None or report.macro_f1 >= minimum:
            return None
        return (
            f"{report.cleaner}: macro F1 {report.macro_f1:.4f} on {len(report.pages)} gate pages is below "
            f"the recorded minimum {minimum:.4f} ({GATE_FILE.name})"
        )

    def record(self, report: EvalReport, allow_lower: bool, reason: str | None) -> float:
        """Raise the minimum to the measured score less the margin; lowering needs a flag and a reason."""
        new = round(report.macro_f1 - RECORD_MARGIN, 4)
        old = self.minimum_f1.get(report.cleaner)
        if old is not None and new < old:
            if not allow_lower or not reason:
                raise ValueError(
                    f"{report.cleaner}: measured {report.macro_f1:.4f} would lower the minimum {old:.4f}; "
                    "pass --allow-lower with --reason, and give the reason in the commit"
                )
            self.history.append({"cleaner": report.cleaner, "from": old, "to": new, "reason": reason})
        self.minimum_f1[report.cleaner] = new
        return new

    def save(self, path: Path = GATE_FILE) -> None:
        doc = {
            "step": self.step,
            "minimum_f1": dict(sorted(self.minimum_f1.items())),
            "history": self.history,
        }
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def load_gate(path: Path = GATE_FILE) -> Gate:
    """Read the recorded gate; errors name the file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return Gate(int(doc["step"]), {str(k): float(v) for k, v in doc["minimum_f1"].items()},
                    list(doc.get("history", [])))  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: unreadable quality gate ({exc})") from exc
