"""ReScraper's answer: a strict grammar and the deterministic executor that applies it (paper §3.1, Table 1,
Appendix D.3's output format).

    <op>               the decision: <keep>, <edit>, <delete> or <rewrite>
    <extract>
    rm N | rm A-B      input lines the extractor drops, one op per line (none: it drops nothing)
    <op>               the same decision again, on its own line
    payload            <keep>, <delete>: nothing; <edit>: rm N | rm A-B | sub N: "x" (x JSON-quoted);
                       <rewrite>: the new text, which replaces the page

Line ids are the input's `<lid:N>`, 1-based. Every operation but <rewrite> only removes lines or substrings
addressed by id, so kept text is copied from the page, never generated. An answer that breaks the grammar is
never half-applied: `ProgramError.reason` names what broke, and `.extract` holds the extraction when the
answer was well formed up to its second tag, so the caller may keep the extracted lines and nothing more.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

OPERATIONS = ("keep", "edit", "delete", "rewrite")
EXTRACT = "<extract>"
RM = re.compile(r"rm (\d+)(?:-(\d+))?")
SUB = re.compile(r'sub (\d+): (".*")')
# A rewrite that still carries the answer's syntax was cut or garbled (the paper's post-filter drops these).
LEAKED = re.compile(r"<(?:keep|edit|delete|rewrite|extract)>|<lid:\d+>|^rm \d+(?:-\d+)?$|^sub \d+: \"", re.M)


class ProgramError(ValueError):
    """A malformed answer: `reason` is a counter name; `extract` the extracted line ids when the answer was
    well formed through its second tag (extract-only is then safe), else None."""

    def __init__(self, reason: str, detail: str, extract: frozenset[int] | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.extract = extract


@dataclass(frozen=True, slots=True)
class Program:
    operation: str  # keep, edit, delete or rewrite
    extract: frozenset[int]  # line ids <extract> drops
    remove: frozenset[int] = frozenset()  # <edit>: further line ids
    subs: tuple[tuple[int, str], ...] = ()  # <edit>: (line id, substring to delete), in answer order
    rewrite: str | None = None  # <rewrite>: the text that replaces the page


def _tag(line: str) -> str | None:
    inner = line[1:-1] if line.startswith("<") and line.endswith(">") else ""
    return inner if inner in OPERATIONS else None


def _rm(line: str, n_lines: int, extract: frozenset[int] | None) -> range:
    match = RM.fullmatch(line)
    if match is None:
        raise ProgramError("bad_op", f"not an op: {line[:60]!r}", extract)
    first = int(match[1])
    last = int(match[2]) if match[2] else first
    if not 1 <= first <= last <= n_lines:
        raise ProgramError("out_of_range", f"{line!r} on a page of {n_lines} lines", extract)
    return range(first, last + 1)


def parse_program(answer: str, n_lines: int) -> Program:
    """The answer to a page of `n_lines` lines, checked against the grammar; raises ProgramError."""
    lines = answer.strip().split("\n")
    first = _tag(lines[0].strip())
    if first is None:
        raise ProgramError("bad_tag", f"the answer starts with {lines[0][:40]!r}, not a decision tag")
    if len(lines) < 2 or lines[1].strip() != EXTRACT:
        raise ProgramError("no_extract", "the second line is not <extract>")
    extract: set[int] = set()
    second: str | None = None
    at = 2
    while at < len(lines):
        line = lines[at].strip()
        at += 1
        if not line:
            continue
        if line.startswith("<"):
            second = _tag(line)
            if second is None:
                raise ProgramError("bad_tag", f"{line[:40]!r} where the second decision tag belongs")
            break
        extract.update(_rm(line, n_lines, None))
    else:  # the answer ended inside the extraction ops: cut by the token limit
        raise ProgramError("truncated", "no second decision tag")
    done = frozenset(extract)
    if second != first:
        raise ProgramError("tag_mismatch", f"<{first}> then <{second}>", done)
    rest = lines[at:]
    if first in ("keep", "delete"):
        if any(line.strip() for line in rest):
            raise ProgramError("payload_after_" + first, f"text after the second <{first}>", done)
        return Program(first, done)
    if first == "rewrite":
        text = "\n".join(rest).strip()
        if not text:
            raise ProgramError("empty_rewrite", "no text after the second <rewrite>", done)
        if LEAKED.search(text):
            raise ProgramError("leaked_syntax", "the rewrite carries answer syntax", done)
        return Program(first, done, rewrite=text)
    remove: set[int] = set()
    subs: list[tuple[int, str]] = []
    for raw in rest:
        line = raw.strip()
        if not line:
            continue
        match = SUB.fullmatch(line)
        if match is None:
            remove.update(_rm(line, n_lines, done))
            continue
        target = int(match[1])
        try:
            text = json.loads(match[2])
        except ValueError:
            raise ProgramError("bad_op", f"sub string is not JSON: {line[:60]!r}", done) from None
        if not 1 <= target <= n_lines:
            raise ProgramError("out_of_range", f"{line[:60]!r} on a page of {n_lines} lines", done)
        if not isinstance(text, str) or not text:
            raise ProgramError("bad_op", f"sub of an empty or non-string value: {line[:60]!r}", done)
        subs.append((target, text))
    return Program("edit", done, frozenset(remove), tuple(subs))


def execute(program: Program, lines: list[str]) -> str | None:
    """The page's text after the program (None for <delete>); raises ProgramError for a `sub` whose string
    is not in its line, before anything is applied."""
    if program.operation == "delete":
        return None
    if program.operation == "rewrite":
        return program.rewrite
    gone = program.extract | program.remove
    kept = {i: line for i, line in enumerate(lines, 1) if i not in gone}
    for target, text in program.subs:
        if target not in kept:
            raise ProgramError(
                "sub_on_removed_line", f"sub {target} on a line already removed", program.extract
            )
        if text not in kept[target]:
            raise ProgramError("sub_not_in_line", f"{text[:40]!r} is not in line {target}", program.extract)
        kept[target] = kept[target].replace(text, "", 1)
    return "\n".join(line.strip() for line in kept.values() if line.strip()) or None


def extract_only(extract: frozenset[int], lines: list[str]) -> str | None:
    """The lines <extract> keeps, when the rest of the answer could not be applied."""
    return execute(Program("keep", extract), lines)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a page becomes: its text (None: none), the operation that made it, and the grammar's reason
    when the answer was set aside (`operation` is then extract_only, or skipped when not even the
    extraction held)."""

    text: str | None
    operation: str  # keep, edit, delete, rewrite, extract_only or skipped
    reason: str | None = None


def outcome(answer: str, finished: bool, lines: list[str]) -> Outcome:
    """Parse and apply one answer to its page's lines; a malformed answer is never half-applied."""
    try:
        if not finished:
            raise ProgramError("truncated", "the answer reached the token limit")
        program = parse_program(answer, len(lines))
        return Outcome(execute(program, lines), program.operation)
    except ProgramError as exc:
        if exc.extract is None:
            return Outcome(None, "skipped", exc.reason)
        return Outcome(extract_only(exc.extract, lines), "extract_only", exc.reason)
