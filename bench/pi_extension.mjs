// Times the shipped Pi extension's session_before_compact handler inside Pi 1.6.0's own
// runtime: Pi's loader loads the extension, Pi's SessionManager opens the session and Pi's
// prepareCompaction prepares the cut, exactly as Pi does before it emits the event.
// Run by bench/pi_extension.py with tests/pi's Node:
//   node bench/pi_extension.mjs PI_DIR ENTRY SESSION_FILE EVENT_OUT RUNS KEEP_RECENT_TOKENS
// prints {"ms": [...], ...} and writes the event the hook receives to EVENT_OUT.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [piDir, entry, sessionFile, eventOut, runs, keepRecentTokens] = process.argv.slice(2);
const dist = join(piDir, "node_modules", "@earendil-works", "pi-coding-agent", "dist");
const pi = await import(pathToFileURL(join(dist, "index.js")).href);
// Not re-exported by the package root; the same function Pi calls before the event.
const { prepareCompaction } = await import(pathToFileURL(join(dist, "core", "compaction", "compaction.js")).href);

const agentDir = mkdtempSync(join(tmpdir(), "fm-bench-agent-"));
try {
	const loaded = await pi.discoverAndLoadExtensions([entry], process.cwd(), agentDir);
	if (loaded.errors.length) throw new Error(JSON.stringify(loaded.errors));
	const handler = loaded.extensions[0].handlers.get("session_before_compact")[0];
	const sessionManager = pi.SessionManager.open(sessionFile);
	const branchEntries = sessionManager.getBranch();
	const settings = { ...pi.DEFAULT_COMPACTION_SETTINGS, keepRecentTokens: Number(keepRecentTokens) };
	const preparation = prepareCompaction(branchEntries, settings);
	if (!preparation) throw new Error("Pi finds nothing to compact in this session");
	const notices = [];
	const ctx = { sessionManager, ui: { notify: (message) => notices.push(message) } };
	// What the extension writes to the hook's stdin (fabric_memory/pi/extension/index.ts).
	writeFileSync(eventOut, JSON.stringify({
		type: "session_before_compact",
		preparation: { firstKeptEntryId: preparation.firstKeptEntryId, tokensBefore: preparation.tokensBefore },
		branchEntries,
		sessionId: sessionManager.getSessionId(),
		sessionFile: sessionManager.getSessionFile() ?? null,
		signal: { aborted: false },
	}));
	const ms = [];
	for (let run = 0; run < Number(runs); run++) {
		const event = {
			type: "session_before_compact", preparation, branchEntries, reason: "manual",
			willRetry: false, signal: new AbortController().signal,
		};
		const started = performance.now();
		const result = await handler(event, ctx);
		ms.push(performance.now() - started);
		if (result?.compaction?.details?.compactor !== "fabric-memory") {
			throw new Error(`no fabric-memory compaction: ${JSON.stringify(result)} ${notices.join("; ")}`);
		}
	}
	process.stdout.write(JSON.stringify({ ms, entries: branchEntries.length, tokensBefore: preparation.tokensBefore }));
} finally {
	rmSync(agentDir, { recursive: true, force: true });
}
