"""``python -m bench.handoff [--json]``: what a compaction summary hands over, scored on
real Pi sessions beside Pi's own LLM summary at the same cut.

The dev set is ``fixtures/pi-mono-real`` (real sessions from badlogic/pi-mono) and
``fixtures/handoff/entire-two-compactions.jsonl`` (a real Claude Code session);
``fixtures/handoff/entire-commit-and-failed-check.jsonl`` is kept aside, scored with
``--held-out`` (its probes in ``bench/handoff_probes_heldout.json``) and never looked at
while building. For each cut, ``bench/handoff_probes.json`` holds probes written by reading
the part the compaction drops, in the method of Factory's compression study: a question a
continuing agent must answer (the task, the user's corrections, facts, exact identifiers,
commands and what they printed, file changes, commits, check outcomes) and the key strings
a good answer must contain. A summary scores, per probe, the share of its key strings it
carries (case-insensitive); the figure is the mean over probes. A probe's ``file`` is a
path under ``fixtures/`` (a bare name: ``fixtures/pi-mono-real``).

Cuts are where Pi compacted (its summary is in the file), else the probe's own ``cut``
(an entry id: what is before it is summarized) or, when that is ``"default"``, where Pi's
defaults cut when asked to compact at the end. Our summaries are made as if fabric-memory
had been the compactor all along: each earlier Pi compaction on the branch is replaced by
ours at the same cut, so a later cut folds the earlier state.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from fabric_memory.compaction import Compaction, compact_branch
from fabric_memory.compaction.prepare import CompactionSettings, prepare_compaction
from fabric_memory.sources.registry import read_source
from fabric_memory.view import EntryView, view_entry

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
DEV_SET = FIXTURES / "pi-mono-real"
PROBES = Path(__file__).with_name("handoff_probes.json")
HELD_OUT = Path(__file__).with_name("handoff_probes_heldout.json")


@dataclass(frozen=True, slots=True)
class Cut:
    """One compaction point of a dev session (``kept``: its first kept entry, or the
    compaction's own id when the host kept nothing, as Claude Code does): our summary and
    the host's LLM summary (None when the host never compacted there)."""

    file: str
    kept: str
    ours: str
    pi: str | None


def _ours(views: list[EntryView], kept: str, session_id: str | None) -> Compaction:
    outcome = compact_branch(views, kept, 0, session_id=session_id)
    if not isinstance(outcome, Compaction):
        raise RuntimeError(f"no compaction at {kept}: {outcome.reason}")
    return outcome


def _path(file: str) -> Path:
    return FIXTURES / file if "/" in file else DEV_SET / file


def cuts(file: str, wanted: Sequence[str] = ()) -> list[Cut]:
    """Every cut of ``file`` (Pi's compactions, in order; else each of ``wanted`` that is
    an entry id, or Pi's default cut at the end), with our summary made over our own
    earlier compactions."""
    session = read_source(_path(file))
    branch = session.active_branch()
    views = [entry.view for entry in branch]
    found: list[Cut] = []
    for at, view in enumerate(views):
        if view.type != "compaction":
            continue
        kept = view.raw.get("firstKeptEntryId", "")  # Claude Code keeps nothing: ""
        if not isinstance(kept, str):
            continue
        outcome = _ours(views[:at], kept, session.session_id)
        pi = view.raw.get("summary")
        # A cut is named by its first kept entry, or by the compaction when it keeps none.
        found.append(Cut(file, kept or view.id, outcome.summary,
                         pi if isinstance(pi, str) else None))
        raw = {"type": "compaction", "id": view.id, "parentId": view.parent_id,
               "summary": outcome.summary, "firstKeptEntryId": kept, "details": outcome.details}
        views[at] = view_entry(view.id, "compaction", view.parent_id, view.timestamp, raw)
    if found:
        return found
    for kept in [cut for cut in wanted if cut != "default"] or ["default"]:
        if kept == "default":
            prepared = prepare_compaction(branch, CompactionSettings())
            if prepared is None:
                raise RuntimeError(f"{file}: Pi's defaults find nothing to compact")
            kept = prepared.first_kept_entry_id
        found.append(Cut(file, kept, _ours(views, kept, session.session_id).summary, None))
    return found


def carried(summary: str, keys: Sequence[str]) -> float:
    """The share of ``keys`` ``summary`` carries (case-insensitive)."""
    text = summary.casefold()
    return sum(key.casefold() in text for key in keys) / len(keys)


def score(probes: list[dict[str, Any]] | None = None, *, held_out: bool = False
          ) -> dict[str, Any]:
    """Per cut, per dimension and overall: the mean share of key strings carried, ours and
    Pi's (Pi's over the cuts where the file holds its summary), and the summary sizes
    (``held_out``: the held-out set's probes)."""
    if probes is None:
        probes = orjson.loads((HELD_OUT if held_out else PROBES).read_bytes())["probes"]
    made: dict[tuple[str, str], Cut] = {}
    for file in sorted({probe["file"] for probe in probes}):
        wanted = sorted({probe["cut"] for probe in probes if probe["file"] == file})
        made.update({(cut.file, cut.kept): cut for cut in cuts(file, wanted)})
    rows: list[dict[str, Any]] = []
    for probe in probes:
        cut = made[(probe["file"], probe["cut"])]
        rows.append({
            "file": cut.file, "cut": cut.kept, "dimension": probe["dimension"],
            "question": probe["question"], "ours": carried(cut.ours, probe["keys"]),
            "pi": None if cut.pi is None else carried(cut.pi, probe["keys"]),
        })

    def mean(chosen: list[dict[str, Any]], side: str) -> float | None:
        values = [row[side] for row in chosen if row[side] is not None]
        return statistics.mean(values) if values else None

    with_pi = [row for row in rows if row["pi"] is not None]
    groups: dict[str, Any] = {}
    for dimension in sorted({row["dimension"] for row in rows}):
        chosen = [row for row in rows if row["dimension"] == dimension]
        both = [row for row in chosen if row["pi"] is not None]
        groups[dimension] = {"probes": len(chosen), "ours": mean(chosen, "ours"),
                             "oursWherePi": mean(both, "ours"), "pi": mean(both, "pi")}
    per_cut = {
        f"{cut.file}@{cut.kept}": {
            "probes": sum(1 for row in rows if (row["file"], row["cut"]) == key),
            "ours": mean([row for row in rows if (row["file"], row["cut"]) == key], "ours"),
            "pi": mean([row for row in rows if (row["file"], row["cut"]) == key], "pi"),
            "oursBytes": len(cut.ours.encode()),
            "piBytes": None if cut.pi is None else len(cut.pi.encode()),
        }
        for key, cut in sorted(made.items())
    }
    return {
        "probes": len(rows), "ours": mean(rows, "ours"), "oursWherePi": mean(with_pi, "ours"),
        "pi": mean(with_pi, "pi"), "dimensions": groups, "cuts": per_cut, "rows": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.handoff", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print every probe's score too")
    parser.add_argument("--held-out", action="store_true",
                        help="score the held-out set (bench/handoff_probes_heldout.json)")
    args = parser.parse_args(argv)
    result = score(held_out=args.held_out)
    if args.json:
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    print(f"{result['probes']} probes: ours {cell(result['ours'])}; where Pi summarized: ours "
          f"{cell(result['oursWherePi'])}, Pi {cell(result['pi'])}")
    for name, group in result["dimensions"].items():
        print(f"  {name:<12} {group['probes']:>3} probes  ours {cell(group['ours'])}  "
              f"(where Pi: ours {cell(group['oursWherePi'])}, Pi {cell(group['pi'])})")
    for name, cut in result["cuts"].items():
        print(f"  {name:<30} ours {cell(cut['ours'])} ({cut['oursBytes']} B)  Pi "
              f"{cell(cut['pi'])} ({cut['piBytes'] or '-'} B)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
