// Holds a conversation with a generated app's /responses the way any Vercel AI SDK app does, with the SDK's own
// OpenAI provider (`openai.responses(...)`, its baseURL at the app) and nothing of the app's:
//
//   node chat.mjs BASE_URL MODE STORE PROMPT...
// MODE is `generate` (generateText) or `stream` (streamText); either way the history is kept as the model messages
// each turn returns (`response.messages`) and sent again on the next. STORE is `default` (the provider's own,
// `store: true`: the model's earlier items go back as `item_reference`s by id) or `false` (sent whole).
// Prints {"requests": [{status, body}], "replies": [text of each turn], "content": [content parts of each turn],
// "warnings": [...]} as JSON; a turn that fails exits 1.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';

globalThis.AI_SDK_LOG_WARNINGS = false; // they are in the output's `warnings`
const [baseUrl, mode, store, ...prompts] = process.argv.slice(2);
const requests = [];
const openai = createOpenAI({
  baseURL: baseUrl,
  apiKey: 'unused',
  fetch: async (url, init) => {
    const response = await fetch(url, init);
    requests.push({ status: response.status, body: JSON.parse(init.body) });
    return response;
  },
});
const model = openai.responses('agent');
const options = { model, maxRetries: 0, ...(store === 'false' && { providerOptions: { openai: { store: false } } }) };

const messages = [];
const replies = [];
const content = [];
const warnings = [];
for (const prompt of prompts) {
  messages.push({ role: 'user', content: prompt });
  let result;
  if (mode === 'stream') {
    const errors = [];
    result = streamText({ ...options, messages, onError: ({ error }) => errors.push(error) });
    await result.consumeStream();
    if (errors.length) throw errors[0];
  } else {
    result = await generateText({ ...options, messages });
  }
  const response = await result.response;
  messages.push(...response.messages);
  replies.push(await result.text);
  content.push(await result.content);
  warnings.push(...((await result.warnings) || []));
}
console.log(JSON.stringify({ requests, replies, content, warnings }));
