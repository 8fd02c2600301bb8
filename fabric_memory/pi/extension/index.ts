/**
 * fabric-memory inside Pi: the compaction hook and the memory tools.
 *
 * - `session_before_compact` runs `fabric-memory hook` and hands Pi its compaction. When the
 *   hook cannot answer (missing program, error, time limit, a declined compaction) the handler
 *   returns nothing, so Pi's own compaction runs, and tells the user once.
 * - `memory_recall` and `memory_expand` run `fabric-memory pi tool NAME` with the model's
 *   arguments; the user's configured sessions and index are always the ones read.
 * - After a compaction and when the session ends, the session file is re-indexed in the
 *   background (`fabric-memory reindex --session FILE`).
 * - Before each run a prompt starts in a session that has compacted, `fabric-memory handoff`
 *   answers the prompt as a UserPromptSubmit hook: memory the model no longer sees, when it
 *   clears the relevance bar, goes with the prompt as a hidden custom message
 *   (`fabric-memory-context`); anything else (no answer, an error, past its time) adds
 *   nothing.
 *
 * The program is `$FABRIC_MEMORY_BIN`, else `fabric-memory` on PATH, looked for at the first
 * call (never while Pi loads the extension). Its children see Pi's environment, not Pi's command
 * line: when Pi writes sessions outside its default folders (`--session-dir`, the `sessionDir`
 * setting), that folder is passed on as `FABRIC_MEMORY_SESSIONS` unless the user set it. `$FABRIC_MEMORY_HOOK_TIMEOUT` (seconds, default
 * 30) bounds the hook: Pi puts no time limit on extension handlers. Pi's own contract for these
 * events and tools: pi-coding-agent/docs/extensions.md and .../compaction.md.
 */

import { spawn } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join, relative, resolve } from "node:path";
import { StringEnum } from "@earendil-works/pi-ai";
import { getAgentDir } from "@earendil-works/pi-coding-agent";
import type { ExtensionAPI, ExtensionContext, SessionBeforeCompactEvent } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

const DEFAULT_HOOK_TIMEOUT_SECONDS = 30;
/** The prompt's context keeps to 2 s itself (docs/handoff.md); this bounds the process. */
const PROMPT_TIMEOUT_SECONDS = 3;
const TOOL_TIMEOUT_SECONDS = 120;

/** How one run of the program ended. */
type Run =
	| { kind: "exited"; status: number | null; stdout: string; stderr: string }
	| { kind: "missing"; program: string }
	| { kind: "failed"; message: string }
	| { kind: "timeout"; seconds: number }
	| { kind: "aborted" };

function program(): string {
	return process.env.FABRIC_MEMORY_BIN || "fabric-memory";
}

function hookTimeoutSeconds(): number {
	const configured = Number(process.env.FABRIC_MEMORY_HOOK_TIMEOUT);
	return configured > 0 ? configured : DEFAULT_HOOK_TIMEOUT_SECONDS;
}

/** `path` with `~` and every symlink resolved, as fabric-memory keys its sessions roots. */
function realPath(path: string): string {
	const expanded = path === "~" || path.startsWith("~/") ? join(homedir(), path.slice(1)) : path;
	try {
		return realpathSync(expanded);
	} catch {
		return resolve(expanded);
	}
}

function isInside(path: string, folder: string): boolean {
	const rest = relative(folder, path);
	return rest === "" || (!rest.startsWith("..") && !isAbsolute(rest));
}

/**
 * The environment for the program: Pi's, plus `FABRIC_MEMORY_SESSIONS` naming the folder this
 * session is written to when that folder lies outside Pi's default sessions folder (which
 * fabric-memory reads by default, with oh-my-pi's) and the user did not choose one.
 */
function childEnv(ctx: ExtensionContext): NodeJS.ProcessEnv {
	try {
		const folder = ctx.sessionManager.getSessionDir();
		if (process.env.FABRIC_MEMORY_SESSIONS || !folder) return process.env;
		const configured = process.env.PI_CODING_AGENT_SESSION_DIR;
		const piDefault = realPath(configured || join(getAgentDir(), "sessions"));
		const written = realPath(folder);
		if (isInside(written, piDefault)) return process.env;
		return { ...process.env, FABRIC_MEMORY_SESSIONS: written };
	} catch {
		return process.env; // no session folder to tell: the defaults apply
	}
}

/** Run the program with `input` on stdin; never rejects. The child is killed on abort or timeout. */
function run(
	args: string[],
	input: string,
	seconds: number,
	env: NodeJS.ProcessEnv,
	signal?: AbortSignal,
): Promise<Run> {
	const name = program();
	return new Promise((resolve) => {
		if (signal?.aborted) return resolve({ kind: "aborted" });
		const stdout: Buffer[] = [];
		const stderr: Buffer[] = [];
		let settled = false;
		let child: ReturnType<typeof spawn>;
		const settle = (outcome: Run): void => {
			if (settled) return;
			settled = true;
			clearTimeout(timer);
			signal?.removeEventListener("abort", onAbort);
			if (outcome.kind === "timeout" || outcome.kind === "aborted") child.kill("SIGKILL");
			resolve(outcome);
		};
		const onAbort = (): void => settle({ kind: "aborted" });
		const timer = setTimeout(() => settle({ kind: "timeout", seconds }), seconds * 1000);
		try {
			child = spawn(name, args, { stdio: ["pipe", "pipe", "pipe"], env });
		} catch (error) {
			clearTimeout(timer);
			return resolve({ kind: "failed", message: `cannot start ${name}: ${messageOf(error)}` });
		}
		signal?.addEventListener("abort", onAbort, { once: true });
		child.on("error", (error: NodeJS.ErrnoException) =>
			settle(
				error.code === "ENOENT"
					? { kind: "missing", program: name }
					: { kind: "failed", message: `cannot run ${name}: ${error.message}` },
			),
		);
		child.stdout?.on("data", (chunk: Buffer) => stdout.push(chunk));
		child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk));
		child.on("close", (status) =>
			settle({
				kind: "exited",
				status,
				stdout: Buffer.concat(stdout).toString("utf8"),
				stderr: Buffer.concat(stderr).toString("utf8"),
			}),
		);
		child.stdin?.on("error", () => undefined); // a child that exits early closes its stdin
		child.stdin?.end(input);
	});
}

function messageOf(error: unknown): string {
	return error instanceof Error ? error.message : String(error);
}

/** The program's JSON answer, or why there is none (one line). */
function answerOf(outcome: Run): { value: Record<string, unknown> } | { problem: string } {
	switch (outcome.kind) {
		case "missing":
			return {
				problem: `${outcome.program} not found: install fabric-memory (pip install fabric-memory) or set FABRIC_MEMORY_BIN to its path`,
			};
		case "failed":
			return { problem: outcome.message };
		case "timeout":
			return { problem: `${program()} gave no answer within ${outcome.seconds} s and was stopped` };
		case "aborted":
			return { problem: "aborted" };
		case "exited": {
			try {
				const value: unknown = JSON.parse(outcome.stdout);
				if (value !== null && typeof value === "object" && !Array.isArray(value)) {
					return { value: value as Record<string, unknown> };
				}
			} catch {
				// reported below with the program's own last words
			}
			const said = outcome.stderr.trim().split("\n").pop() || "no output";
			return { problem: `${program()} exited with status ${outcome.status}: ${said}` };
		}
	}
}

/** `code: message` of a `{"error": {code, message}}` answer, else undefined. */
function errorOf(value: Record<string, unknown>): string | undefined {
	const error = value.error as { code?: unknown; message?: unknown } | undefined;
	if (error === undefined || error === null || typeof error !== "object") return undefined;
	return `${String(error.code ?? "error")}: ${String(error.message ?? "")}`;
}

// --- compaction ------------------------------------------------------------------------------

/** Exactly what `fabric-memory hook` reads: `preparation.fileOps` holds Sets, which JSON drops. */
function hookEvent(event: SessionBeforeCompactEvent, ctx: ExtensionContext): string {
	return JSON.stringify({
		type: "session_before_compact",
		preparation: {
			firstKeptEntryId: event.preparation.firstKeptEntryId,
			tokensBefore: event.preparation.tokensBefore,
		},
		branchEntries: event.branchEntries,
		sessionId: ctx.sessionManager.getSessionId(),
		sessionFile: ctx.sessionManager.getSessionFile() ?? null,
		signal: { aborted: event.signal.aborted },
	});
}

type Compaction = { summary: string; firstKeptEntryId: string; tokensBefore: number; details?: unknown };

function compactionOf(value: Record<string, unknown>): Compaction | undefined {
	const found = value.compaction as Partial<Compaction> | undefined;
	if (
		found !== null &&
		typeof found === "object" &&
		typeof found.summary === "string" &&
		typeof found.firstKeptEntryId === "string" &&
		typeof found.tokensBefore === "number"
	) {
		return found as Compaction;
	}
	return undefined;
}

// --- memory tools ----------------------------------------------------------------------------

const optionalText = (description: string) => Type.Optional(Type.String({ description }));
const optionalCount = (description: string, minimum = 0) =>
	Type.Optional(Type.Integer({ minimum, description }));

const recallParameters = Type.Object(
	{
		query: optionalText(
			"What to find, in plain words (a question or its key words); may be empty when a filter is given",
		),
		mode: Type.Optional(
			StringEnum(["literal", "phrase", "regex"] as const, {
				description: "literal (default): words; phrase: an exact word sequence; regex: single words by pattern",
			}),
		),
		match: Type.Optional(
			StringEnum(["any", "all"] as const, {
				description:
					"any (default): entries holding any word, those holding all first; all: only entries holding every word",
			}),
		),
		ref: optionalText("Exact Fabric ref, e.g. pi.read"),
		tool: optionalText("Exact tool name, e.g. fabric_exec or bash"),
		role: optionalText("Exact message role: user, assistant, toolResult"),
		provider: optionalText("Exact Fabric provider"),
		action: optionalText("Exact Fabric action"),
		outcome: optionalText("Exact operation outcome, e.g. failed"),
		since: optionalText("ISO time, inclusive"),
		until: optionalText("ISO time, inclusive"),
		session: optionalText("One session: its id"),
		agent: Type.Optional(
			StringEnum(["pi", "omp", "claude-code", "codex", "catui", "fabro"] as const, {
				description: "Only sessions this agent wrote (every hit names its agent)",
			}),
		),
		project: optionalText(
			"Only sessions that worked in this folder or inside it (without it, this project's sessions rank first)",
		),
		preferProject: optionalText("The folder whose sessions rank first (as a `next` carries it)"),
		branches: Type.Optional(StringEnum(["all", "active"] as const)),
		limit: optionalCount("Hits per page, 1 to 50 (default 10; more is clamped)", 1),
		offset: optionalCount("Hits to skip (use the answer's `next`)"),
	},
	{ additionalProperties: false },
);

const expandParameters = Type.Object(
	{
		session: Type.String({ description: "The session, as in a recall hit's follow.session" }),
		entries: Type.Optional(Type.Array(Type.String(), { description: "Entry ids" })),
		addresses: Type.Optional(
			Type.Array(Type.String(), {
				description: "Addresses as a summary or a hit prints them: entries (L12, a1b2c3d4), operations (L40/3)",
			}),
		),
		range: optionalText("FIRST:LAST entry addresses, inclusive: a summary's [L12 ... L31] is L12:L31"),
		indices: Type.Optional(Type.Array(Type.Integer({ minimum: 0 }), { description: "Entry positions in the file" })),
		positions: optionalText("FIRST:LAST entry positions (0-based), inclusive"),
		anchor: optionalText("Entry id to read around (with before/after)"),
		before: optionalCount("Also this many entries before each address, entry or the anchor"),
		after: optionalCount("Also this many entries after each address, entry or the anchor"),
		expectedSourceHash: optionalText("From follow: refuse a session file that changed since"),
		expectedLineageFingerprint: optionalText("From follow: refuse a branch that changed since"),
		maxEntries: optionalCount("Entries per page, 1 to 200 (more is clamped)", 1),
		maxChars: optionalCount("Characters per page, 1 to 24000 (default 20000; more is clamped)", 1),
		entryOffset: optionalCount("Paging: from the answer's `more:` call"),
		textOffset: optionalCount("Start at this character of the first entry (a `more:` call or a cut entry's call)"),
		entryChars: optionalCount("Characters of one entry of a range or neighbourhood (default 1200): longer shows head and tail", 1),
		kinds: Type.Optional(
			Type.Array(StringEnum(["user", "assistant", "tool", "edit", "error", "other"] as const), {
				description: "Only entries of these kinds (a user's or assistant's message, a tool result, an edit, an error, other)",
			}),
		),
		showSecrets: Type.Optional(
			Type.Boolean({
				description:
					"Secrets come back masked as [REDACTED:<kind>]; true returns the raw text. Only when the user explicitly asks for the value",
			}),
		),
		raw: Type.Optional(
			Type.Boolean({ description: "true: each entry's verbatim JSON line instead of readable text" }),
		),
	},
	{ additionalProperties: false },
);

async function callTool(name: string, params: object, signal: AbortSignal | undefined, ctx: ExtensionContext) {
	const outcome = await run(["pi", "tool", name], JSON.stringify(params), TOOL_TIMEOUT_SECONDS, childEnv(ctx), signal);
	const answer = answerOf(outcome);
	if ("problem" in answer) {
		throw new Error(`${outcome.kind === "exited" ? "tool_failed" : outcome.kind}: ${answer.problem}`);
	}
	const error = errorOf(answer.value);
	if (error !== undefined) throw new Error(error);
	// The model reads the text (next calls written as memory_expand/memory_recall calls);
	// the JSON value stays in details, for the session file and other extensions.
	const text = typeof answer.value.text === "string" ? answer.value.text : JSON.stringify(answer.value);
	return { content: [{ type: "text" as const, text }], details: answer.value.details ?? answer.value };
}

// --- the prompt's context --------------------------------------------------------------------

/** What `fabric-memory handoff` reads as a UserPromptSubmit hook: this prompt, this session. */
function promptEvent(prompt: string, ctx: ExtensionContext): string | undefined {
	const file = ctx.sessionManager.getSessionFile();
	if (!file) return undefined;
	return JSON.stringify({
		session_id: ctx.sessionManager.getSessionId(),
		transcript_path: file,
		cwd: ctx.sessionManager.getCwd(),
		hook_event_name: "UserPromptSubmit",
		prompt,
	});
}

/** The context the hook printed (`hookSpecificOutput.additionalContext`), or nothing. */
function contextOf(outcome: Run): string | undefined {
	if (outcome.kind !== "exited" || outcome.status !== 0 || !outcome.stdout.trim()) return undefined;
	try {
		const value = JSON.parse(outcome.stdout) as { hookSpecificOutput?: { additionalContext?: unknown } };
		const context = value.hookSpecificOutput?.additionalContext;
		return typeof context === "string" && context ? context : undefined;
	} catch {
		return undefined;
	}
}

// --- freshness -------------------------------------------------------------------------------

/** Re-index this session's file in a detached child; never waits, never fails Pi. */
function reindexInBackground(ctx: ExtensionContext): void {
	try {
		const file = ctx.sessionManager.getSessionFile();
		if (!file || !existsSync(file)) return;
		const child = spawn(program(), ["reindex", "--session", file], {
			detached: true,
			stdio: "ignore",
			env: childEnv(ctx),
		});
		child.on("error", () => undefined); // a missing program is reported by the hook and the tools
		child.unref();
	} catch {
		// same: nothing to tell the user here
	}
}

export default function fabricMemory(pi: ExtensionAPI): void {
	const told = new Set<string>();
	const tellOnce = (ctx: ExtensionContext, kind: string, message: string): void => {
		if (told.has(kind)) return;
		told.add(kind);
		try {
			ctx.ui.notify(`fabric-memory: ${message}; Pi's own compaction is used instead`, "warning");
		} catch {
			// no UI to tell
		}
	};

	pi.on("session_before_compact", async (event, ctx) => {
		try {
			const outcome = await run(["hook"], hookEvent(event, ctx), hookTimeoutSeconds(), childEnv(ctx), event.signal);
			if (outcome.kind === "aborted") return undefined;
			const answer = answerOf(outcome);
			if ("problem" in answer) {
				tellOnce(ctx, outcome.kind, answer.problem);
				return undefined;
			}
			const compaction = compactionOf(answer.value);
			if (compaction !== undefined) return { compaction };
			const declined = answer.value.cancel === true ? `declined: ${String(answer.value.reason)}` : undefined;
			tellOnce(ctx, "answer", declined ?? errorOf(answer.value) ?? "the hook gave no compaction");
		} catch (error) {
			tellOnce(ctx, "exception", messageOf(error));
		}
		return undefined; // never {cancel: true}: Pi's own compaction runs
	});

	pi.on("before_agent_start", async (event, ctx) => {
		try {
			if (event.messageType !== "user" || !event.prompt) return undefined;
			if (!ctx.sessionManager.getBranch().some((entry) => entry.type === "compaction")) return undefined;
			const input = promptEvent(event.prompt, ctx);
			if (input === undefined) return undefined;
			const context = contextOf(await run(["handoff"], input, PROMPT_TIMEOUT_SECONDS, childEnv(ctx)));
			if (context === undefined) return undefined;
			return { message: { customType: "fabric-memory-context", content: context, display: false } };
		} catch {
			return undefined; // the prompt goes as typed
		}
	});

	pi.on("session_compact", async (_event, ctx) => {
		reindexInBackground(ctx);
	});

	pi.on("session_shutdown", async (_event, ctx) => {
		reindexInBackground(ctx);
	});

	pi.registerTool({
		name: "memory_recall",
		label: "Memory recall",
		description:
			"Search earlier coding-agent sessions (all projects) for messages, tool calls and Fabric operations. " +
			"Ask in plain words: entries holding any of the words are ranked by relevance, those holding all first " +
			"(`matched`: all when every hit holds every word, any when some hold only some). " +
			"Answers in text: hits grouped by session (agent, project, path and sourceHash once), one line per hit " +
			"(address, role or tool, time) and its snippet, then the memory_expand call that reads the session's hits; " +
			"a `more:` line gives the memory_recall call for the following page.",
		promptSnippet: "Search earlier sessions' messages, tool calls and operations by plain words or exact filters",
		promptGuidelines: [
			"Use memory_recall before redoing work or asking the user about something that may have happened in an earlier session (an error, a decision, a file, a command); ask in plain words.",
			"Use memory_expand with the arguments a memory_recall answer prints on its `expand:` line, unchanged, to read those hits as text; a summary's addresses go to memory_expand as printed (addresses: [\"L12\"], range: \"L12:L31\" for [L12 ... L31]).",
		],
		parameters: recallParameters,
		async execute(_toolCallId, params, signal, _onUpdate, ctx) {
			return callTool("memory_recall", params, signal, ctx);
		},
	});

	pi.registerTool({
		name: "memory_expand",
		label: "Memory expand",
		description:
			"Read entries or operations of an earlier session as text (role, time, what was said, tool calls " +
			"as name(arguments), tool results; raw: true for the verbatim JSON lines): pass a memory_recall hit's " +
			"`follow` object as the arguments, unchanged, or the addresses a compaction summary prints as they " +
			"are (addresses: [\"L12\"]; range: \"L12:L31\" for [L12 ... L31]; before/after for neighbours). " +
			"In a range or neighbourhood a long entry shows its head and tail and the exact memory_expand call that " +
			"reads it on (its address and textOffset); kinds keeps only some entries (user, assistant, tool, edit, " +
			"error, other). Long results come in pages: the `more:` line is the call that continues. Secrets (API keys, tokens, passwords, private keys) come back masked as " +
			"[REDACTED:<kind>]; set showSecrets only when the user explicitly asks for the raw value.",
		promptSnippet: "Read the entries behind a memory_recall hit (its `follow`) or a summary's addresses, as text",
		promptGuidelines: [
			"Use memory_expand to quote or check what an earlier session actually said before relying on a memory_recall snippet.",
		],
		parameters: expandParameters,
		async execute(_toolCallId, params, signal, _onUpdate, ctx) {
			return callTool("memory_expand", params, signal, ctx);
		},
	});
}
