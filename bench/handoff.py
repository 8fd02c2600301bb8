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

``--hosts`` scores the other side of a handoff: real Claude Code transcripts that hold the
host's own compactions (``fixtures/handoff``; origin and licence in its README). At each
compaction, three conditions a continuing agent could see: the host's own LLM summary
alone (``host``); that summary and our SessionStart packet made at the same cut, as the
hook makes it (the transcript as the host leaves it when it runs the hook, default bound:
``host+packet``); and those with the context the prompt-time hook adds when each probe's
question is asked as the next prompt (``host+packet+prompt``, scored when
:func:`prompt_time` gives one). Besides the share of key strings carried, it counts the
probes' key strings the host's summary lacks and how many of those the packet carries
(the goal: at least half). Dev probes: ``bench/handoff_probes_hosts.json``; held-out:
``bench/handoff_probes_hosts_heldout.json`` (``--hosts --held-out``), written once at the
end by reading transcripts never looked at while building. A probe's ``cut`` names the
compaction by the line address of its ``compact_boundary`` line.

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
HOST_PROBES = Path(__file__).with_name("handoff_probes_hosts.json")
HOST_HELD_OUT = Path(__file__).with_name("handoff_probes_hosts_heldout.json")


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


# --- the hosts' side: the host's summary, our packet, the prompt-time context -------------


@dataclass(frozen=True, slots=True)
class HostCut:
    """One compaction of a real host transcript: the host's own summary there, our packet
    made at hook time, and the transcript as the host leaves it after the compaction (its
    boundary and summary written: what a prompt-time hook reads)."""

    file: str
    cut: str
    """The line address of the compaction's ``compact_boundary`` line."""
    session_id: str
    host: str
    packet: str
    after: Path
    """The transcript up to and with the host's summary line (a scratch copy)."""


def prompt_time(cut: HostCut, question: str) -> str | None:
    """The third condition: the context the prompt-time hook (``fabric-memory handoff`` on
    UserPromptSubmit) adds when ``question`` is the next prompt after the compaction at
    ``cut`` (``cut.after``: the transcript then; ``cut.session_id``), indexed beside the
    other real sessions of the fixtures (:func:`bench.prompt_context.context_after`); ""
    when the hook gives none."""
    from .prompt_context import context_after

    return context_after(_path(cut.file), cut.after, cut.session_id, question) or ""


def host_cuts(file: str, wanted: Sequence[str], scratch: Path) -> list[HostCut]:
    """The compactions of the Claude Code transcript ``file`` named by ``wanted`` (line
    addresses of their ``compact_boundary`` lines), each with the host's summary and our
    packet at hook time."""
    from fabric_memory.handoff import handoff

    raw = _path(file).read_bytes().splitlines(keepends=True)
    found: list[HostCut] = []
    for cut in wanted:
        at = int(cut.removeprefix("L")) - 1
        boundary = orjson.loads(raw[at])
        if boundary.get("subtype") != "compact_boundary":
            raise RuntimeError(f"{file}:{cut}: not a compact_boundary line")
        summary_at = next(n for n in range(at + 1, len(raw))
                          if raw[n].strip() and orjson.loads(raw[n]).get("isCompactSummary"))
        content = orjson.loads(raw[summary_at])["message"]["content"]
        host = content if isinstance(content, str) else "\n".join(
            block.get("text", "") for block in content if isinstance(block, dict))
        session = str(boundary.get("sessionId"))
        folder = scratch / f"{Path(file).stem}-{cut}"
        folder.mkdir(parents=True)
        hook_time = folder / "hook" / f"{session}.jsonl"
        hook_time.parent.mkdir()
        hook_time.write_bytes(b"".join(raw[:at]))
        after = folder / f"{session}.jsonl"
        after.write_bytes(b"".join(raw[:summary_at + 1]))
        event = orjson.dumps({"session_id": session, "transcript_path": str(hook_time),
                              "cwd": str(folder), "hook_event_name": "SessionStart",
                              "source": "compact"})
        output = handoff(event)
        if output is None:
            raise RuntimeError(f"{file}:{cut}: the hook made no packet")
        packet = orjson.loads(output)["hookSpecificOutput"]["additionalContext"]
        found.append(HostCut(file, cut, session, host, packet, after))
    return found


def _held(text: str, keys: Sequence[str]) -> list[str]:
    folded = text.casefold()
    return [key for key in keys if key.casefold() in folded]


def score_hosts(probes: list[dict[str, Any]] | None = None, *, held_out: bool = False
                ) -> dict[str, Any]:
    """Per probe, per cut and overall: the share of key strings each condition carries,
    and of the keys the host's summary lacks, how many the packet adds."""
    import tempfile

    if probes is None:
        probes = orjson.loads((HOST_HELD_OUT if held_out else HOST_PROBES).read_bytes())["probes"]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        made: dict[tuple[str, str], HostCut] = {}
        for file in sorted({probe["file"] for probe in probes}):
            wanted = sorted({probe["cut"] for probe in probes if probe["file"] == file})
            made.update({(c.file, c.cut): c for c in host_cuts(file, wanted, Path(scratch))})
        for probe in probes:
            cut = made[(probe["file"], probe["cut"])]
            keys = probe["keys"]
            host = _held(cut.host, keys)
            packet = _held(cut.host + "\n" + cut.packet, keys)
            context = prompt_time(cut, probe["question"])
            prompt = None if context is None else _held(
                f"{cut.host}\n{cut.packet}\n{context}", keys)
            rows.append({
                "file": cut.file, "cut": cut.cut, "dimension": probe["dimension"],
                "question": probe["question"], "keys": len(keys),
                "host": len(host) / len(keys), "hostPacket": len(packet) / len(keys),
                "hostPacketPrompt": None if prompt is None else len(prompt) / len(keys),
                "lacking": len(keys) - len(host), "added": len(packet) - len(host),
                "addedWithPrompt": None if prompt is None else len(prompt) - len(host),
            })
        sizes = {f"{c.file}@{c.cut}": (len(c.host.encode()), len(c.packet.encode()))
                 for c in made.values()}

    def summary(chosen: list[dict[str, Any]]) -> dict[str, Any]:
        lacking = sum(row["lacking"] for row in chosen)
        prompted = [row for row in chosen if row["hostPacketPrompt"] is not None]
        value: dict[str, Any] = {
            "probes": len(chosen),
            "host": statistics.mean(row["host"] for row in chosen),
            "hostPacket": statistics.mean(row["hostPacket"] for row in chosen),
            "hostPacketPrompt": statistics.mean(row["hostPacketPrompt"] for row in prompted)
            if prompted else None,
            "lacking": lacking, "added": sum(row["added"] for row in chosen),
            "addedShare": sum(row["added"] for row in chosen) / lacking if lacking else None,
        }
        if prompted:
            value["addedWithPrompt"] = sum(row["addedWithPrompt"] for row in prompted)
        return value

    per_cut = {}
    for key, (host_bytes, packet_bytes) in sorted(sizes.items()):
        chosen = [row for row in rows if f"{row['file']}@{row['cut']}" == key]
        per_cut[key] = {**summary(chosen), "hostBytes": host_bytes, "packetBytes": packet_bytes}
    return {**summary(rows), "cuts": per_cut, "rows": rows}


def _print_hosts(result: dict[str, Any]) -> None:
    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    def line(name: str, part: dict[str, Any]) -> str:
        share = part["addedShare"]
        prompt = (f", host+packet+prompt {cell(part['hostPacketPrompt'])}"
                  if part["hostPacketPrompt"] is not None else "")
        return (f"{name}: {part['probes']} probes: host {cell(part['host'])}, host+packet "
                f"{cell(part['hostPacket'])}{prompt}; keys the host lacks {part['lacking']}, "
                f"the packet adds {part['added']}"
                f"{'' if share is None else f' ({share:.0%})'}")

    print(line("all", result))
    for name, cut in result["cuts"].items():
        print("  " + line(name, cut) + f"  [host {cut['hostBytes']} B, packet "
              f"{cut['packetBytes']} B]")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.handoff", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print every probe's score too")
    parser.add_argument("--held-out", action="store_true",
                        help="score the held-out set (bench/handoff_probes_heldout.json)")
    parser.add_argument("--hosts", action="store_true",
                        help="the hosts' side: the host's own summary, + our packet, + the "
                        "prompt-time context, on real Claude Code compactions")
    args = parser.parse_args(argv)
    if args.hosts:
        hosts = score_hosts(held_out=args.held_out)
        if args.json:
            sys.stdout.write(orjson.dumps(hosts, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            _print_hosts(hosts)
        return 0
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
