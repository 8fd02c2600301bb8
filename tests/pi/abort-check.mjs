// Test helper (tests/test_pi_host.py): Pi 1.6.0's loader loads the extension; its
// session_before_compact handler runs against a hook that hangs, and Pi's abort signal
// fires once the hook has started (it writes PID_FILE). Prints {"result": ..., "notices":
// [...]} as JSON.
//   node tests/pi/abort-check.mjs ENTRY PID_FILE
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const [entry, pidFile] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "node_modules", "@earendil-works", "pi-coding-agent", "dist");
const pi = await import(pathToFileURL(join(dist, "index.js")).href);

const agentDir = mkdtempSync(join(tmpdir(), "fm-abort-agent-"));
try {
	const loaded = await pi.discoverAndLoadExtensions([entry], process.cwd(), agentDir);
	if (loaded.errors.length) throw new Error(JSON.stringify(loaded.errors));
	const handler = loaded.extensions[0].handlers.get("session_before_compact")[0];
	const notices = [];
	const ctx = {
		sessionManager: { getSessionId: () => "abort-check", getSessionFile: () => undefined },
		ui: { notify: (message) => notices.push(message) },
	};
	const controller = new AbortController();
	const event = {
		type: "session_before_compact",
		preparation: { firstKeptEntryId: "b", tokensBefore: 1 },
		branchEntries: [],
		reason: "manual",
		willRetry: false,
		signal: controller.signal,
	};
	const poll = setInterval(() => {
		if (existsSync(pidFile)) {
			clearInterval(poll);
			controller.abort();
		}
	}, 20);
	const result = await handler(event, ctx);
	clearInterval(poll);
	process.stdout.write(JSON.stringify({ result: result ?? null, aborted: controller.signal.aborted, notices }));
} finally {
	rmSync(agentDir, { recursive: true, force: true });
}
