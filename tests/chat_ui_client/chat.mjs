// Holds a conversation with a generated app the way the Databricks chat UI's server does
// (databricks/app-templates, e2e-chatbot-app-next: server/src/routes/chat.ts,
// server/src/lib/stream-fallback.ts and packages/ai-sdk-providers/src/providers-server.ts),
// with the UI's own packages:
// - the provider from @databricks/ai-sdk-provider, Responses model, `useRemoteToolCalling: true`,
//   every request sent to the app's /invocations (the UI's API_PROXY setting);
// - the model wrapped in `extractReasoningMiddleware({ tagName: 'think' })`;
// - the conversation context added to each body, as the UI's fetch does.
//
//   node chat.mjs BASE_URL MODE PROMPT...
// MODE is how each turn is answered:
// - stream: UI messages -> `convertToModelMessages` -> `streamText`, read back into a UI message
//   with `readUIMessageStream` (the UI's normal path);
// - generate: `generateText`, the history kept as the model messages it returns
//   (`response.messages`), as a non-streaming AI SDK client keeps it;
// - fallback: the UI's fallback when a stream fails before its first text: the same turn again
//   with `generateText`, its content written into the UI message stream (text, tool calls and
//   tool results; the UI ignores tool errors there). Here every streamed request fails at connect.
// A PROMPT of APPROVE or DENY (stream mode) answers the tool approval the last turn asked for, as the
// UI's Approve/Deny buttons do (`addToolApprovalResponse`): the part's state becomes
// `approval-responded`, and the next request continues that assistant message.
// Prints {"requests": [{status, body}], "replies": [text of each turn]} as JSON.
import { randomUUID } from 'node:crypto';
import { createDatabricksProvider } from '@databricks/ai-sdk-provider';
import {
  convertToModelMessages,
  createUIMessageStream,
  extractReasoningMiddleware,
  generateText,
  readUIMessageStream,
  streamText,
  wrapLanguageModel,
} from 'ai';

const [baseUrl, mode, ...prompts] = process.argv.slice(2);
const conversationId = randomUUID();
const requests = [];

const provider = createDatabricksProvider({
  useRemoteToolCalling: true,
  baseURL: `${baseUrl}/serving-endpoints`,
  formatUrl: () => `${baseUrl}/invocations`,
  fetch: async (url, init) => {
    const body = { ...JSON.parse(init.body), context: { conversation_id: conversationId, user_id: 'tester' } };
    if (mode === 'fallback' && body.stream) {
      requests.push({ status: null, body });
      throw new TypeError('fetch failed (the test drops every streamed request)');
    }
    const response = await fetch(url, { ...init, body: JSON.stringify(body) });
    requests.push({ status: response.status, body });
    return response;
  },
});
const model = wrapLanguageModel({
  model: provider.responses('agent'),
  middleware: [extractReasoningMiddleware({ tagName: 'think' })],
});
const options = { providerOptions: { databricks: { includeTrace: true } }, maxRetries: 0 };

async function lastSnapshot(stream, message) {
  for await (const snapshot of readUIMessageStream({ stream, message, terminateOnError: true })) message = snapshot;
  return message;
}

// With `originalMessages`, as the UI's server passes them, a turn that continues the last assistant
// message (after an approval) keeps that message's id, so the stream continues it.
async function streamed(messages, continuing) {
  const result = streamText({ model, messages: await convertToModelMessages(messages), ...options });
  const stream = result.toUIMessageStream({
    sendReasoning: true,
    generateMessageId: randomUUID,
    originalMessages: messages,
  });
  return lastSnapshot(stream, continuing);
}

// The UI's Approve/Deny: the waiting tool part of the last message gets the user's answer.
function answerApproval(message, approved) {
  const waiting = message.parts.find((part) => part.state === 'approval-requested');
  if (!waiting) throw new Error(`no tool approval to answer in ${JSON.stringify(message)}`);
  waiting.state = 'approval-responded';
  waiting.approval = { ...waiting.approval, approved, ...(approved ? {} : { reason: 'not now' }) };
}

// Forwards a stream's chunks; says whether it failed before its first text, as the UI's fallback checks.
async function failedBeforeText(stream, writer) {
  let sawText = false;
  for await (const chunk of stream) {
    if (chunk.type === 'error' && !sawText) return true;
    sawText ||= chunk.type.startsWith('text-');
    writer.write(chunk);
  }
  return false;
}

// The generateText result as UI message chunks, part by part (tool errors are left out, as the UI does).
function writeContent(result, writer) {
  for (const part of result.content) {
    const id = randomUUID();
    if (part.type === 'text' && part.text) {
      writer.write({ type: 'text-start', id });
      writer.write({ type: 'text-delta', id, delta: part.text });
      writer.write({ type: 'text-end', id });
    } else if (part.type === 'tool-call') {
      const { toolCallId, toolName, input, dynamic } = part;
      writer.write({ type: 'tool-input-available', toolCallId, toolName, input, dynamic });
    } else if (part.type === 'tool-result') {
      writer.write({ type: 'tool-output-available', toolCallId: part.toolCallId, output: part.output });
    }
  }
  writer.write({ type: 'finish', finishReason: result.finishReason });
}

async function withFallback(messages) {
  const modelMessages = await convertToModelMessages(messages);
  const stream = createUIMessageStream({
    generateId: randomUUID,
    execute: async ({ writer }) => {
      const result = streamText({ model, messages: modelMessages, ...options, onError: () => {} });
      if (await failedBeforeText(result.toUIMessageStream({ sendReasoning: true }), writer)) {
        writeContent(await generateText({ model, messages: modelMessages, ...options }), writer);
      }
    },
  });
  return lastSnapshot(stream);
}

const textOf = (message) => message.parts.filter((part) => part.type === 'text').map((part) => part.text).join('');
const replies = [];
const messages = [];
for (const text of prompts) {
  if (text === 'APPROVE' || text === 'DENY') {
    const last = messages.at(-1);
    answerApproval(last, text === 'APPROVE');
    const before = textOf(last).length;
    const continued = await streamed(messages, structuredClone(last));
    messages[messages.length - 1] = continued;
    replies.push(textOf(continued).slice(before));
  } else if (mode === 'generate') {
    messages.push({ role: 'user', content: text });
    const result = await generateText({ model, messages, ...options });
    messages.push(...result.response.messages);
    replies.push(result.text);
  } else {
    messages.push({ id: randomUUID(), role: 'user', parts: [{ type: 'text', text }] });
    const reply = await (mode === 'fallback' ? withFallback : streamed)(messages);
    messages.push(reply);
    replies.push(textOf(reply));
  }
}
console.log(JSON.stringify({ requests, replies, messages }));
