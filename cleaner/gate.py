"""The cleaners' quality gate: minimum macro F1 per cleaner on the held-out WCXB dev pages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cleaner.evaluate import EvalReport
from cleaner.wcxb import heldout_ids

GATE_FILE = Path(__file__).resolve().parent / "quality_gate.json"
# Recorded minima sit this far below the measured score, so float noise and library patch releases pass.
RECORD_MARGIN = 0.01


@dataclass(slots=True)
class Gate:
    """Which pages (the held-out ones, never trained on) and the minimum macro F1 each cleaner keeps there."""

    pages: frozenset[str]
    minimum_f1: dict[str, float]
    history: list[dict[str, object]]
    path: Path = GATE_FILE
    pages_file: str = "wcxb_heldout.json"  # beside the gate file

    def subset(self, ids: list[str]) -> list[str]:
        """The gate's pages among `ids`, in their order."""
        return [i for i in ids if i in self.pages]

    def check(self, report: EvalReport) -> str | None:
        """A failure message, or None when the cleaner holds its minimum. A cleaner with no minimum fails:
        it is not gated until one is recorded (encoder_v2 and decoder_v2 passed by default before)."""
        minimum = self.minimum_f1.get(report.cleaner)
        if minimum is None:
            return (
                f"{report.cleaner}: macro F1 {report.macro_f1:.4f}, but no minimum is recorded for it in "
                f"{self.path.name}; record one: hostcrawl clean gate --cleaner {report.cleaner} --record"
            )
        if report.macro_f1 >= minimum:
            return None
        return (
            f"{report.cleaner}: macro F1 {report.macro_f1:.4f} on {len(report.pages)} gate pages is below "
            f"the recorded minimum {minimum:.4f} ({self.path.name})"
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

    def save(self) -> None:
        doc = {
            "pages": self.pages_file,
            "minimum_f1": dict(sorted(self.minimum_f1.items())),
            "history": self.history,
        }
        self.path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def load_gate(path: Path = GATE_FILE) -> Gate:
    """Read the recorded gate; errors name the file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        pages_file = str(doc["pages"])
        minimum = {str(k): float(v) for k, v in doc["minimum_f1"].items()}
        return Gate(
            heldout_ids(path.parent / pages_file), minimum, list(doc.get("history", [])), path, pages_file
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: unreadable quality gate ({exc})") from exc
