"""``python -m bench.rss_probe [--floor] SESSIONS INDEX``: one full reindex, then its peak memory.

With ``--floor`` the same documents are streamed straight into a bare Tantivy index
with the same schema and writer settings, committing as often as reindex does: the
memory Tantivy itself needs for that corpus.

Run in a fresh process per corpus so each peak is that run's alone. ``selfKiB`` is
the writer process's high-water mark (``VmHWM`` where Linux has it: ``ru_maxrss`` of
a freshly executed process also counts what the process that started it had
resident when it forked, since Linux carries the mark across ``exec``), split by a
sampler into its peak anonymous memory (``anonKiB``: heaps, the writer's arena) and
its peak of mapped index files (``fileKiB``: Tantivy reads segments through mmap,
so merging a bigger index touches more of them; those pages are page cache, not
memory the process holds). ``childrenKiB`` is the largest parser worker.
"""

from __future__ import annotations

import resource
import sys
import threading
from pathlib import Path

import orjson

from fabric_memory.memory import index as memory_index
from fabric_memory.memory.normalize import normalize_session
from fabric_memory.memory.reindex import DEFAULT_COMMIT_EVERY, reindex
from fabric_memory.session import iter_session_files, read_session

STATUS = Path("/proc/self/status")
SAMPLE_SECONDS = 0.02


def status_kib(*names: str) -> dict[str, int]:
    """Fields of ``/proc/self/status`` in KiB (empty where there is no such file)."""
    found: dict[str, int] = {}
    if STATUS.is_file():
        for line in STATUS.read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in names:
                found[name] = int(rest.split()[0])
    return found


class Sampler(threading.Thread):
    """Keeps the largest ``RssAnon`` and ``RssFile`` seen until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks = {"RssAnon": 0, "RssFile": 0}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            self.done.wait(SAMPLE_SECONDS)

    def sample(self) -> None:
        for name, value in status_kib(*self.peaks).items():
            self.peaks[name] = max(self.peaks[name], value)


def tantivy_only(sessions: str, directory: str) -> tuple[int, int]:
    """Stream every session's documents into a fresh bare index; (documents, sessions)."""
    import tantivy

    Path(directory).mkdir(parents=True)
    index = tantivy.Index(memory_index.SCHEMA, path=directory, reuse=False)
    index.register_tokenizer(memory_index.TEXT_TOKENIZER, memory_index.ANALYZER)
    heap, threads = memory_index.writer_options()
    writer = index.writer(heap_size=heap, num_threads=threads)
    documents = pending = files = 0
    for path in iter_session_files(sessions):
        session = read_session(path)
        files += 1
        for item in normalize_session(session).items:
            writer.add_json(memory_index.item_json(item, str(path), session.session_id))
            documents += 1
            pending += 1
        if pending >= DEFAULT_COMMIT_EVERY:
            writer.commit()
            pending = 0
    writer.commit()
    writer.wait_merging_threads()
    return documents, files


def main(argv: list[str]) -> int:
    floor = argv[:1] == ["--floor"]
    argv = argv[1:] if floor else argv
    if len(argv) != 2:
        print("usage: python -m bench.rss_probe [--floor] SESSIONS INDEX", file=sys.stderr)
        return 2
    sampler = Sampler()
    sampler.start()
    if floor:
        documents, sessions = tantivy_only(argv[0], argv[1])
    else:
        report = reindex(sessions=argv[0], index=argv[1], full=True)
        documents = report["entries"] + report["operations"]
        sessions = report["sessions"]
    sampler.done.set()
    sampler.join()
    sampler.sample()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {
        "selfKiB": status_kib("VmHWM").get("VmHWM", maxrss),
        "anonKiB": sampler.peaks["RssAnon"] or maxrss,
        "fileKiB": sampler.peaks["RssFile"],
        "childrenKiB": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
        "documents": documents,
        "sessions": sessions,
    }
    sys.stdout.write(orjson.dumps(result).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
