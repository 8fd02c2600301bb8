"""``python -m bench.prompt_context [--held-out] [--json]``: the prompt's context (the
UserPromptSubmit hook, :mod:`fabric_memory.prompt_context`) measured on real sessions.

Each cut is a real session file as it was right after one of its host's compactions (the
file up to the compaction's line: Pi's ``compaction`` entry, Claude Code's summary line),
indexed beside the other real sessions of ``fixtures/pi-mono-real`` and
``fixtures/handoff`` (so the project's other sessions answer too). Two measures:

- **Probes as prompts.** Each probe of ``bench/handoff_probes.json`` (``--held-out``:
  ``bench/handoff_probes_heldout.json``, never read while building; ``--hosts``: the real
  Claude Code compactions of ``bench/handoff_probes_hosts.json`` and, with
  ``--held-out``, ``..._hosts_heldout.json``) is asked as the user's
  next prompt, with no earlier prompt given (a fresh state per probe). The context holds
  the probe's evidence when it carries at least half of the probe's key strings
  (case-insensitive, as ``bench.handoff`` scores a summary); the mean share of keys is
  reported beside it. **Precision**: of the prompts that got a context, the share whose
  context carries at least one key string; of the passages given, the share that does.
  A probe whose cut is not a compaction of its file (Pi's default cut) is left out.
- **False injections.** Prompts with nothing to recall — greetings and "continue"
  (:data:`IDLE`), questions no session touched (:data:`UNRELATED`), and questions about
  what the kept turns already show (the last user messages the host kept, asked again) —
  asked at every cut: each context given is a false injection.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.handoff import FIXTURES, HELD_OUT, HOST_HELD_OUT, HOST_PROBES, PROBES, carried
from fabric_memory.memory.reindex import reindex
from fabric_memory.prompt_context import EVENT, out_of_view, prompt_context
from fabric_memory.sources import read_source

SESSIONS = (*sorted((FIXTURES / "pi-mono-real").glob("*.jsonl")),
            *sorted((FIXTURES / "handoff").glob("*.jsonl")))
"""The real sessions indexed beside each cut."""
IDLE = ("hi", "hello!", "continue", "thanks", "thank you", "ok, go ahead", "yes please",
        "looks good, keep going", "great, carry on", "/compact")
UNRELATED = (
    "What is the capital of Australia?", "How do I make sourdough bread rise more?",
    "Recommend a good book about the history of Rome",
    "Explain how photosynthesis works in simple terms",
    "What is the weather like in Lisbon in May?", "Translate good morning into Japanese",
    "How many calories are in a banana?", "Who won the 1998 football world cup?",
    "How do I change a bicycle tire?", "Write a haiku about autumn leaves",
    "What is the difference between a violin and a viola?",
    "How long should I boil an egg for a soft yolk?", "What year did the Berlin Wall fall?",
    "How do I get red wine out of a carpet?", "Suggest a name for a golden retriever puppy",
    "What are good exercises for lower back pain?", "How does compound interest work?",
    "Plan a three day trip to Kyoto",
)
KEPT_QUESTIONS = 2
"""Kept user messages asked again per cut (the latest ones)."""


@dataclass(frozen=True, slots=True)
class Cut:
    file: str
    cut: str
    path: Path
    """The original file."""
    line: int
    """The compaction's line: the file is read up to it."""
    session_id: str
    kept_prompts: tuple[str, ...]


def _path(file: str) -> Path:
    return FIXTURES / file if "/" in file else FIXTURES / "pi-mono-real" / file


def find_cut(file: str, cut: str) -> Cut | None:
    """The compaction of ``file`` at ``cut`` (its first kept entry, the compaction's own
    id when the host keeps none, or the line address of Claude Code's ``compact_boundary``
    line before it), or None when the file never compacted there."""
    path = _path(file)
    session = read_source(path)
    boundary = next((e.line for e in session.entries if f"L{e.line}" == cut
                     and e.view.raw.get("customType") == "system:compact_boundary"), None)
    for entry in session.entries:
        view = entry.view
        if view.type == "compaction" and (cut in (view.raw.get("firstKeptEntryId"), view.id)
                                          or (boundary is not None and entry.line > boundary)):
            branch = [e.view for e in session.active_branch() if e.line <= entry.line]
            seen = out_of_view(session.agent, session.session_id, session.project, branch)
            kept = [v.text for v in branch if v.id in seen.visible and v.role == "user"
                    and v.text.strip() and not v.text.lstrip().startswith("<")]
            return Cut(file, cut, path, entry.line, session.session_id,
                       tuple(text[:400] for text in kept[-KEPT_QUESTIONS:]))
    return None


class Memory:
    """A sessions folder — a transcript as it was right after a compaction (``text``, a
    copy of the real file ``original``), beside the other real sessions — and its index, in
    the folder ``root``."""

    def __init__(self, original: Path, text: bytes, session_id: str, root: Path) -> None:
        self.session_id = session_id
        self.sessions = root / "sessions"
        self.home = root / "home"
        self.sessions.mkdir(parents=True)
        for other in SESSIONS:
            if other != original:
                (self.sessions / other.name).write_bytes(other.read_bytes())
        self.transcript = self.sessions / original.name
        self.transcript.write_bytes(text)
        reindex(sessions=self.sessions, index=self.home / "index")
        self.asked = 0

    @staticmethod
    def at(cut: Cut, root: Path) -> Memory:
        """The memory at a compaction of one of the dev or held-out files."""
        lines = cut.path.read_bytes().splitlines(keepends=True)
        return Memory(cut.path, b"".join(lines[:cut.line]), cut.session_id, root)

    def context(self, prompt: str) -> str | None:
        """The context the prompt gets, as the first prompt after the compaction."""
        self.asked += 1
        data = orjson.dumps({"session_id": self.session_id,
                             "transcript_path": str(self.transcript), "cwd": None,
                             "hook_event_name": EVENT, "prompt": prompt})
        output = prompt_context(data, self.home / f"state-{self.asked}",
                                index=str(self.home / "index"), sessions=str(self.sessions))
        if output is None:
            return None
        return str(orjson.loads(output)["hookSpecificOutput"]["additionalContext"])


_AFTER: dict[Path, Memory] = {}


def context_after(original: Path, transcript: Path, session_id: str,
                  question: str) -> str | None:
    """The context ``question`` gets as the next prompt in ``transcript`` (the real file
    ``original`` as it was right after a compaction), indexed beside the other real sessions
    (one index per transcript, kept for the run); nothing given before."""
    if transcript not in _AFTER:
        root = Path(tempfile.mkdtemp(prefix="fm-prompt-bench-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        _AFTER[transcript] = Memory(original, transcript.read_bytes(), session_id, root)
    return _AFTER[transcript].context(question)


def _passages(context: str) -> list[str]:
    """The context's passages, each with the turns given beside it (its indented lines)."""
    passages: list[str] = []
    for line in context.splitlines():
        if line.startswith("- ["):
            passages.append(line)
        elif line.startswith("  ") and passages:
            passages[-1] += "\n" + line
    return passages


def measure(probes: list[dict[str, Any]]) -> dict[str, Any]:
    """Per probe and overall: the probes' evidence in the context, its precision, and the
    false injections over the prompts with nothing to recall."""
    rows: list[dict[str, Any]] = []
    false: list[dict[str, Any]] = []
    left_out = 0
    quiet = 0
    for file, cut_id in sorted({(p["file"], p["cut"]) for p in probes}):
        cut = find_cut(file, cut_id)
        chosen = [p for p in probes if (p["file"], p["cut"]) == (file, cut_id)]
        if cut is None:
            left_out += len(chosen)
            continue
        with tempfile.TemporaryDirectory(prefix="fm-prompt-bench-") as folder:
            memory = Memory.at(cut, Path(folder))
            for probe in chosen:
                context = memory.context(probe["question"]) or ""
                passages = _passages(context)
                rows.append({
                    "file": file, "cut": cut_id, "question": probe["question"],
                    "share": carried(context, probe["keys"]) if context else 0.0,
                    "given": bool(context), "bytes": len(context.encode()),
                    "passages": len(passages),
                    "relevantPassages": sum(carried(p, probe["keys"]) > 0 for p in passages),
                })
            for kind, prompts in (("idle", IDLE), ("unrelated", UNRELATED),
                                  ("kept", cut.kept_prompts)):
                for prompt in prompts:
                    given = memory.context(prompt)
                    quiet += given is None
                    if given is not None:
                        false.append({"cut": f"{file}@{cut_id}", "kind": kind,
                                      "prompt": prompt, "context": given})
    answered = [row for row in rows if row["given"]]
    passages = sum(row["passages"] for row in answered)
    return {
        "probes": len(rows), "leftOut": left_out,
        "evidence": sum(row["share"] >= 0.5 for row in rows) / len(rows) if rows else None,
        "meanShare": statistics.mean(row["share"] for row in rows) if rows else None,
        "given": len(answered),
        "precision": (sum(row["share"] > 0 for row in answered) / len(answered)
                      if answered else None),
        "passagePrecision": (sum(row["relevantPassages"] for row in answered) / passages
                             if passages else None),
        "meanBytes": statistics.mean(row["bytes"] for row in answered) if answered else None,
        "nothingToRecall": quiet + len(false), "falseInjections": false, "rows": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.prompt_context",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--held-out", action="store_true",
                        help="the held-out probes (bench/handoff_probes_heldout.json)")
    parser.add_argument("--hosts", action="store_true",
                        help="the probes of real Claude Code compactions "
                        "(bench/handoff_probes_hosts*.json)")
    parser.add_argument("--json", action="store_true", help="every prompt's result too")
    args = parser.parse_args(argv)
    sets = {(False, False): PROBES, (False, True): HELD_OUT, (True, False): HOST_PROBES,
            (True, True): HOST_HELD_OUT}
    probes = orjson.loads(sets[(args.hosts, args.held_out)].read_bytes())["probes"]
    result = measure(probes)
    if args.json:
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    print(f"{result['probes']} probes asked as prompts ({result['leftOut']} left out: no "
          f"compaction at their cut): evidence (half the keys or more) "
          f"{cell(result['evidence'])}, mean share of keys {cell(result['meanShare'])}")
    print(f"  context given for {result['given']} (mean {cell(result['meanBytes'])} bytes); "
          f"precision {cell(result['precision'])} (prompts), "
          f"{cell(result['passagePrecision'])} (passages)")
    print(f"  prompts with nothing to recall: {result['nothingToRecall']}, false injections: "
          f"{len(result['falseInjections'])}")
    for row in result["falseInjections"]:
        print(f"    {row['kind']} @ {row['cut']}: {row['prompt'][:80]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
