/**
 * Test-only Pi extension: a scripted model provider, so the end-to-end tests can drive the
 * real Pi without a network model (pi-coding-agent/docs/custom-provider.md, "Implement custom streaming").
 *
 * It answers deterministically from the last message of the request:
 * - Pi's own summarization request (its system prompt starts with SUMMARY_PROMPT): a fixed
 *   summary naming the provider, so a test can tell Pi's compaction from fabric-memory's.
 * - A user message `CALL <tool> <json>`: one call of that tool with those arguments.
 * - A tool result: `tool <name> answered <n> characters` (the test reads the result itself
 *   from Pi's tool_execution_end event).
 * - The user message `CONTEXT`: every non-system message of the request, one line each
 *   (`role: text`, cut at 300 characters), so a test sees what Pi rebuilt after a compaction.
 * - Any other user message: `echo: <its text>`.
 */

import {
	type Api,
	type AssistantMessage,
	type AssistantMessageEventStream,
	createAssistantMessageEventStream,
	getCurrentSystemPrompt,
	type Model,
	type SimpleStreamOptions,
	type TranscriptContext,
} from "@earendil-works/pi-ai";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

const SUMMARY_PROMPT = "You are a context summarization assistant.";
export const PI_SUMMARY = "## Goal\nscripted-provider summary (Pi's own compaction)";

type Reply = { text: string } | { tool: string; args: Record<string, unknown> };

function textOf(content: unknown): string {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.filter((part): part is { type: "text"; text: string } => part?.type === "text")
		.map((part) => part.text)
		.join("");
}

function reply(context: TranscriptContext): Reply {
	if (getCurrentSystemPrompt(context.messages).startsWith(SUMMARY_PROMPT)) return { text: PI_SUMMARY };
	const last = context.messages[context.messages.length - 1];
	if (last?.role === "toolResult") {
		return { text: `tool ${last.toolName} answered ${textOf(last.content).length} characters` };
	}
	const text = last?.role === "user" ? textOf(last.content) : "";
	const call = /^CALL (\w+) (.*)$/s.exec(text);
	if (call) return { tool: call[1], args: JSON.parse(call[2]) as Record<string, unknown> };
	if (text === "CONTEXT") {
		const shown = context.messages
			.filter((message) => message.role !== "system")
			.map((message) => `${message.role}: ${textOf(message.content).slice(0, 300)}`);
		return { text: shown.join("\n") };
	}
	return { text: `echo: ${text}` };
}

let calls = 0;

function streamScripted(
	model: Model<Api>,
	context: TranscriptContext,
	_options?: SimpleStreamOptions,
): AssistantMessageEventStream {
	const stream = createAssistantMessageEventStream();
	const output: AssistantMessage = {
		role: "assistant",
		content: [],
		api: model.api,
		provider: model.provider,
		model: model.id,
		usage: {
			input: 10,
			output: 10,
			cacheRead: 0,
			cacheWrite: 0,
			totalTokens: 20,
			cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
		},
		stopReason: "pending",
		timestamp: Date.now(),
	};
	queueMicrotask(() => {
		try {
			const answer = reply(context);
			stream.push({ type: "start", partial: output });
			if ("text" in answer) {
				output.content.push({ type: "text", text: answer.text });
				stream.push({ type: "text_start", contentIndex: 0, partial: output });
				stream.push({ type: "text_delta", contentIndex: 0, delta: answer.text, partial: output });
				stream.push({ type: "text_end", contentIndex: 0, content: answer.text, partial: output });
				output.stopReason = "stop";
				stream.push({ type: "done", reason: "stop", message: output });
			} else {
				calls += 1;
				const toolCall = {
					type: "toolCall" as const,
					id: `call_${calls}`,
					name: answer.tool,
					arguments: answer.args as never,
				};
				output.content.push(toolCall);
				stream.push({ type: "toolcall_start", contentIndex: 0, partial: output });
				stream.push({ type: "toolcall_end", contentIndex: 0, toolCall, partial: output });
				output.stopReason = "toolUse";
				stream.push({ type: "done", reason: "toolUse", message: output });
			}
		} catch (error) {
			output.stopReason = "error";
			output.errorMessage = error instanceof Error ? error.message : String(error);
			stream.push({ type: "error", reason: "error", error: output });
		}
		stream.end();
	});
	return stream;
}

export default function (pi: ExtensionAPI) {
	pi.registerProvider("scripted", {
		baseUrl: "http://127.0.0.1:9",
		apiKey: "scripted",
		api: "scripted-api",
		models: [
			{
				id: "scripted-1",
				name: "Scripted test model",
				reasoning: false,
				input: ["text"],
				cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
				contextWindow: 200000,
				maxTokens: 4096,
			},
		],
		streamSimple: streamScripted,
	});
}
