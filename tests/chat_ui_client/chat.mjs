// Holds a conversation with a generated app the way the Databricks chat UI's server does
// (databricks/app-templates, e2e-chatbot-app-next: server/src/routes/chat.ts and
// packages/ai-sdk-providers/src/providers-server.ts), with the UI's own packages:
// - the provider from @databricks/ai-sdk-provider, Responses model, `useRemoteToolCalling: true`,
//   every request sent to the app's /invocations (the UI's API_PROXY setting);
// - the model wrapped in `extractReasoningMiddleware({ tagName: 'think' })`;
// - each turn: UI messages -> `convertToModelMessages` -> `streamText` with
//   `providerOptions.databricks.includeTrace`, the reply read back into a UI message with
//   `readUIMessageStream`, and the conversation context added to the body as the UI's fetch does.
//
//   node chat.mjs BASE_URL PROMPT...
// Prints {"requests": [{status, body}], "messages": [UI messages]} as JSON.
import { randomUUID } from 'node:crypto';
import { createDatabricksProvider } from '@databricks/ai-sdk-provider';
import {
  convertToModelMessages,
  extractReasoningMiddleware,
  readUIMessageStream,
  streamText,
  wrapLanguageModel,
} from 'ai';

const [baseUrl, ...prompts] = process.argv.slice(2);
const conversationId = randomUUID();
const requests = [];

const provider = createDatabricksProvider({
  useRemoteToolCalling: true,
  baseURL: `${baseUrl}/serving-endpoints`,
  formatUrl: () => `${baseUrl}/invocations`,
  fetch: async (url, init) => {
    const body = { ...JSON.parse(init.body), context: { conversation_id: conversationId, user_id: 'tester' } };
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

async function reply(messages) {
  const result = streamText({ model, messages: await convertToModelMessages(messages), ...options });
  const stream = result.toUIMessageStream({ sendReasoning: true, generateMessageId: randomUUID });
  let message;
  for await (const snapshot of readUIMessageStream({ stream, terminateOnError: true })) message = snapshot;
  return message;
}

const messages = [];
for (const text of prompts) {
  messages.push({ id: randomUUID(), role: 'user', parts: [{ type: 'text', text }] });
  messages.push(await reply(messages));
}
console.log(JSON.stringify({ requests, messages }));
