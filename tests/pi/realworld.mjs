// Real-world-style Pi sessions and Pi 1.6.0's own view of each, for fabric-memory's tests.
//
//   node realworld.mjs OUT_DIR      (the Node 22 in node_modules/.bin; run `npm ci` here first)
//
// Writes OUT_DIR/sessions/*.jsonl and OUT_DIR/truth.json. Every byte is deterministic (seeded
// ids and a fake clock), so tests/test_pi_realworld.py can re-run this script and require the
// committed fixtures/pi-1.6.0-realworld/ to be exactly what Pi produces now.
//
// How the files are made: Pi's own SessionManager writes three version-3 sessions (a real
// conversation loop with thinking blocks, tool calls, images in tool results, bash executions
// and custom messages, compacting with Pi's own shouldCompact/prepareCompaction whenever Pi
// would). Older and damaged files are derived from those: a v1 file is the same conversation
// without ids, each compaction pointing at its first kept entry by `firstKeptEntryIndex` (an
// index into the parsed lines, header included), a v2 file has ids but the old `hookMessage`
// role; then repeated header lines, lines without an id, a malformed line, and two JSON objects
// glued on one line are planted. The truth is computed by Pi's own code from each file.

import crypto from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const PI = join(HERE, "node_modules", "@earendil-works", "pi-coding-agent", "dist", "core");

// --- determinism: seeded ids, fake clock -------------------------------------------------

let state = 1;
function seed(text) {
	state = 2166136261;
	for (const ch of text) state = Math.imul(state ^ ch.codePointAt(0), 16777619) >>> 0;
}
function random() {
	state = (state + 0x6d2b79f5) >>> 0;
	let t = state;
	t = Math.imul(t ^ (t >>> 15), t | 1);
	t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
	return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (items) => items[Math.floor(random() * items.length)];
const hex = (n) => Array.from({ length: n }, () => Math.floor(random() * 16).toString(16)).join("");

crypto.randomUUID = () => `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`;
syncBuiltinESMExports();

let now = 0;
const RealDate = Date;
globalThis.Date = class extends RealDate {
	constructor(...args) {
		super(...(args.length ? args : [now]));
	}
	static now() {
		return now;
	}
};

const { SessionManager, loadEntriesFromFile } = await import(join(PI, "session-manager.js"));
const { DEFAULT_COMPACTION_SETTINGS, estimateProjectedContextTokens, prepareCompaction, shouldCompact } =
	await import(join(PI, "compaction", "compaction.js"));

// --- a conversation, written by Pi's SessionManager ---------------------------------------

const CWD = "/home/dev/legacy-app";
const WINDOW = 128000;
const PNG =
	"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const WORDS = ("parser token lexer cache index branch commit module config schema request response " +
	"handler queue worker retry backoff timeout buffer stream socket header payload record field " +
	"migration rollback deploy build test fixture snapshot diff patch merge rebase").split(" ");
const FILES = ["src/parser.ts", "src/lexer.ts", "src/cache/index.ts", "src/server/handler.ts",
	"src/queue/worker.ts", "test/parser.test.ts", "package.json", "README.md"];

const sentence = (n) => Array.from({ length: n }, () => pick(WORDS)).join(" ");
const tick = (ms) => {
	now += ms;
	return now;
};
const usage = (total) => ({ input: total - 400, output: 400, cacheRead: 0, cacheWrite: 0, totalTokens: total,
	cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } });

function contextTokens(sm) {
	return estimateProjectedContextTokens(sm.buildSessionProjection(), sm.getBranch()).tokens;
}

function assistant(sm, content, stopReason) {
	const total = contextTokens(sm) + 400;
	sm.appendMessage({ role: "assistant", content, api: "anthropic-messages", provider: "anthropic",
		model: "claude-sonnet-4-5", usage: usage(total), stopReason, timestamp: tick(9000) });
}

function turn(sm, n) {
	tick(60000);
	sm.appendMessage({ role: "user", content: `Turn ${n}: ${sentence(12)}. REALWORLD_FACT_${n}_${hex(6)} must hold.`,
		timestamp: tick(1000) });
	const tool = pick(["read", "bash", "edit", "write"]);
	const path = pick(FILES);
	const call = `toolu_${hex(24)}`;
	const args = tool === "bash" ? { command: `rg -n ${pick(WORDS)} src` } : tool === "edit"
		? { path, oldText: sentence(3), newText: sentence(3) } : tool === "write" ? { path, content: sentence(20) } : { path };
	assistant(sm, [
		{ type: "thinking", thinking: `Thinking about turn ${n}: ${sentence(24)}`, thinkingSignature: hex(32) },
		{ type: "text", text: sentence(10) },
		{ type: "toolCall", id: call, name: tool, arguments: args },
	], "toolUse");
	const images = n % 5 === 0 ? 0 : 2 + (n % 3);
	sm.appendMessage({ role: "toolResult", toolCallId: call, toolName: tool, content: [
		{ type: "text", text: `${path}\n${sentence(40)}` },
		...Array.from({ length: images }, () => ({ type: "image", data: PNG, mimeType: "image/png" })),
	], isError: false, timestamp: tick(2000) });
	if (n % 7 === 3) {
		sm.appendMessage({ role: "bashExecution", command: `npm test -- ${pick(WORDS)}`,
			output: `${sentence(60)}\nTests: ${n} passed`, exitCode: 0, cancelled: false, truncated: false,
			timestamp: tick(3000) });
	}
	if (n % 11 === 6) {
		sm.appendMessage({ role: "custom", customType: "lint-report", content: `lint: ${sentence(25)}`,
			display: true, timestamp: tick(1000) });
	}
	assistant(sm, [{ type: "text", text: `Done with turn ${n}. ${sentence(25)}` }], "stop");
}

/** A v3 session by Pi's SessionManager; compacts whenever Pi would at WINDOW, `compactions`
 * times, then stops once the context passes `stopAt` tokens (or right after the last
 * compaction when `endOnCompaction`). Returns the file's JSON lines as objects. */
function conversation(name, { compactions, stopAt, endOnCompaction = false }) {
	seed(name);
	now = Date.UTC(2025, 2, 3, 9, 0, 0);
	const dir = mkdtempSync(join(tmpdir(), "pi-realworld-"));
	const sm = SessionManager.create(CWD, dir, { id: `${hex(8)}-${hex(4)}-7${hex(3)}-b${hex(3)}-${hex(12)}` });
	sm.appendModelChange("anthropic", "claude-sonnet-4-5");
	sm.appendThinkingLevelChange("medium");
	let done = 0;
	for (let n = 1; ; n++) {
		turn(sm, n);
		const tokens = contextTokens(sm);
		if (done < compactions && shouldCompact(tokens, WINDOW, DEFAULT_COMPACTION_SETTINGS)) {
			const prep = prepareCompaction(sm.getBranch(), DEFAULT_COMPACTION_SETTINGS);
			tick(20000);
			sm.appendCompaction(`## Goal\nKeep the legacy app working (compaction ${done + 1}).\n\n## Progress\n${sentence(80)}\n\n` +
				`## Critical Context\n- REALWORLD_COMPACTION_${done + 1}_${hex(6)}`, prep.firstKeptEntryId, prep.tokensBefore,
				{ readFiles: FILES.slice(0, 3), modifiedFiles: FILES.slice(3, 5) }, false);
			done += 1;
			if (done === compactions && endOnCompaction) break;
		} else if (done === compactions && tokens > stopAt) {
			break;
		}
	}
	const file = join(dir, readdirSync(dir)[0]);
	const lines = readFileSync(file, "utf8").trimEnd().split("\n").map((line) => JSON.parse(line));
	rmSync(dir, { recursive: true });
	return lines;
}

// --- older and damaged files, derived ------------------------------------------------------

const line = (value) => ({ value });
const text = (raw) => ({ raw });

/** The lines of a v1 file: no ids; a compaction names its first kept entry by its index among
 * the parsed lines (header = 0), counted after every planted line is in place. */
function toV1(items) {
	const parsed = items.filter((item) => item.value !== undefined);
	const indexOf = new Map(parsed.map((item, index) => [item.value.id, index]));
	return items.map((item) => {
		const value = item.value;
		if (value === undefined) return item;
		if (value.type === "session") {
			const { version, ...rest } = value;
			return line(rest);
		}
		const { id, parentId, ...rest } = value;
		if (rest.type === "compaction") {
			return line({ type: "compaction", timestamp: rest.timestamp, summary: rest.summary,
				firstKeptEntryIndex: indexOf.get(value.firstKeptEntryId), tokensBefore: rest.tokensBefore });
		}
		return line(toHookMessage(rest));
	});
}

/** The lines of a v2 file: ids and parents as in v3, the old `hookMessage` role. */
function toV2(items) {
	return items.map((item) => {
		const value = item.value;
		if (value === undefined) return item;
		if (value.type === "session") return line({ ...value, version: 2 });
		return line(toHookMessage(value));
	});
}

function toHookMessage(value) {
	return value.type === "message" && value.message.role === "custom"
		? { ...value, message: { ...value.message, role: "hookMessage" } } : value;
}

const header = (items) => items[0].value;
const compactionAt = (items, k) => items.findIndex((item, i) => i > 0 && item.value?.type === "compaction" && --k === 0);
const render = (items) => items.map((item) => (item.value !== undefined ? JSON.stringify(item.value) : item.raw)).join("\n") + "\n";

function withoutId(item) {
	const { id, ...rest } = item.value;
	return line(rest);
}

function buildFiles() {
	const one = conversation("one-compaction", { compactions: 1, stopAt: 105000 }).map(line);
	const two = conversation("two-compactions", { compactions: 2, stopAt: 105000 }).map(line);
	const ends = conversation("ends-on-compaction", { compactions: 2, stopAt: 0, endOnCompaction: true }).map(line);
	const files = {};
	files["v1-one-compaction.jsonl"] = toV1(one);
	files["v1-two-compactions.jsonl"] = toV1(two);
	files["v1-ends-on-compaction.jsonl"] = toV1(ends);
	// The v1 file cut just before its second compaction: where Pi decided to compact.
	files["v1-prefix.jsonl"] = files["v1-two-compactions.jsonl"].slice(0, compactionAt(two, 2));
	// firstKeptEntryIndex naming a later entry (Pi reads that entry's id before giving it
	// one) or the header (Pi leaves firstKeptEntryId unset).
	const first = compactionAt(one, 1);
	for (const [name, index] of [["forward", first + 5], ["header", 0]]) {
		const items = toV1(one.slice(0, first + 12));
		items[first] = line({ ...items[first].value, firstKeptEntryIndex: index });
		files[`v1-index-${name}.jsonl`] = items;
	}
	// A repeated header (middle), a blank and a malformed line: none counts as a parsed entry
	// except the header, which firstKeptEntryIndex counts.
	const odd = [...two];
	const middle = compactionAt(two, 2) - 25;
	odd.splice(middle, 0, line(header(two)), text(""), text('{"type":"message","timestamp":'));
	files["v1-repeated-header-malformed.jsonl"] = toV1(odd);
	files["v2-one-compaction.jsonl"] = toV2(one);
	// A v2 line without an id in the middle (Pi keeps it, but nothing can reach it).
	const keyless = [...two];
	keyless[compactionAt(two, 1) + 12] = withoutId(keyless[compactionAt(two, 1) + 12]);
	files["v2-two-compactions-line-without-id.jsonl"] = toV2(keyless);
	// A v3 file whose header line repeats in the middle and as the last line.
	const repeated = [...two];
	repeated.splice(compactionAt(two, 1) + 8, 0, line(header(two)));
	repeated.push(line(header(two)));
	files["v3-repeated-header.jsonl"] = repeated;
	// A v3 file whose last line lost its id (Pi's leaf is then undefined).
	const last = [...one];
	last[last.length - 1] = withoutId(last[last.length - 1]);
	files["v3-last-line-without-id.jsonl"] = last;
	// JSON that JSON.parse reads but stricter parsers refuse: a tool output cut inside a
	// surrogate pair (JSON.stringify writes the lone half as an escape), and a tool call
	// argument past the double range.
	const strict = [...one];
	const result = strict.findIndex((item, i) => i > 20 && item.value?.message?.role === "toolResult");
	const cut = structuredClone(strict[result].value);
	cut.message.content[0].text = `${cut.message.content[0].text.slice(0, 40)} 😀`.slice(0, -1);
	strict[result] = line(cut);
	const call = strict.findIndex((item, i) => i > result && item.value?.message?.content?.some?.((c) => c.type === "toolCall"));
	const big = structuredClone(strict[call].value);
	big.message.content.find((c) => c.type === "toolCall").arguments.limit = "BIG";
	strict[call] = text(JSON.stringify(big).replace('"BIG"', `1${"0".repeat(400)}`));
	files["v3-odd-json.jsonl"] = strict;
	// Crashes glued two lines into one, twice: the second compaction with the next user
	// message, and later an assistant turn with thinking with its tool result. Pi drops both.
	const glued = [...two];
	const at = compactionAt(two, 2);
	const thinking = glued.findIndex((item, i) => i > at + 1 && item.value?.message?.content?.[0]?.type === "thinking");
	const glue = (i) => text(JSON.stringify(glued[i].value) + JSON.stringify(glued[i + 1].value));
	glued.splice(thinking, 2, glue(thinking));
	glued.splice(at, 2, glue(at));
	files["v3-glued-lines.jsonl"] = glued;
	return Object.fromEntries(Object.entries(files).map(([name, items]) => [name, render(items)]));
}

// --- Pi's view of each file -----------------------------------------------------------------

const SETTINGS = {
	default: DEFAULT_COMPACTION_SETTINGS,
	small: { enabled: true, reserveTokens: 63, keepRecentTokens: 1 },
	keep75000: { ...DEFAULT_COMPACTION_SETTINGS, keepRecentTokens: 75000 },
};

/** The physical line of every value Pi's loader keeps, in order (its own rule: split on "\n",
 * skip blank lines, malformed JSON and falsy values). */
function parsedLines(content) {
	const lines = [];
	content.split("\n").forEach((raw, index) => {
		if (!raw.trim()) return;
		try {
			if (JSON.parse(raw)) lines.push(index + 1);
		} catch {}
	});
	return lines;
}

function truthOf(name, content, scratch) {
	const path = join(scratch, name);
	writeFileSync(path, content);
	const entries = loadEntriesFromFile(path);
	const lines = parsedLines(content);
	if (lines.length !== entries.length) throw new Error(`${name}: line map disagrees with Pi's loader`);
	const lineOf = new Map(entries.map((entry, index) => [entry, lines[index]]));
	const version = entries[0].version ?? 1; // read before Pi migrates the entries in place
	const sm = new SessionManager(CWD, scratch, path, false, undefined, entries);
	const idOf = (entry) => (version >= 2 ? entry.id ?? null : null); // v1 ids are random
	const branch = sm.getBranch();
	const projection = sm.buildSessionProjection();
	const tokens = estimateProjectedContextTokens(projection, branch).tokens;
	const leaf = sm.getLeafId() ? sm.getEntry(sm.getLeafId()) : undefined;
	const prepare = {};
	for (const [key, settings] of Object.entries(SETTINGS)) {
		const prep = prepareCompaction(branch, settings);
		const first = prep ? branch.find((entry) => entry.id === prep.firstKeptEntryId) : undefined;
		prepare[key] = prep ? {
			firstKeptLine: lineOf.get(first),
			firstKeptEntryId: idOf(first),
			tokensBefore: prep.tokensBefore,
			isSplitTurn: prep.isSplitTurn,
			messagesToSummarize: prep.messagesToSummarize.length,
			turnPrefixMessages: prep.turnPrefixMessages.length,
		} : null;
	}
	return {
		version,
		entryCount: sm.getEntries().length,
		leafLine: leaf ? lineOf.get(leaf) : null,
		branchLines: branch.map((entry) => lineOf.get(entry)),
		branchIds: branch.map(idOf),
		context: {
			messageCount: projection.messages.length,
			roles: projection.messages.map((message) => message.role),
			entryLines: projection.entries.filter((entry) => entry.messages.length).map((entry) => lineOf.get(entry.sourceEntry)),
		},
		contextTokens: tokens,
		shouldCompact: Object.fromEntries([128000, 200000].map((window) =>
			[window, shouldCompact(tokens, window, DEFAULT_COMPACTION_SETTINGS)])),
		prepare,
	};
}

const out = process.argv[2];
if (!out) {
	console.error("usage: node realworld.mjs OUT_DIR");
	process.exit(2);
}
const files = buildFiles();
const scratch = mkdtempSync(join(tmpdir(), "pi-realworld-truth-"));
const truth = { pi: "1.6.0", settings: SETTINGS, files: {} };
mkdirSync(join(out, "sessions"), { recursive: true });
for (const [name, content] of Object.entries(files)) {
	writeFileSync(join(out, "sessions", name), content);
	truth.files[name] = truthOf(name, content, scratch);
}
rmSync(scratch, { recursive: true });
writeFileSync(join(out, "truth.json"), `${JSON.stringify(truth, null, 1)}\n`);

