// The Vercel AI SDK's default OpenAI provider against the gateway. openai(model)
// calls POST {baseURL}/responses; this runs generateText and streamText and
// prints one JSON line per call for the Go test to assert on.
// Usage: node check.mjs BASE_URL API_KEY MODEL
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';

const [baseURL, apiKey, model] = process.argv.slice(2);
const openai = createOpenAI({ baseURL, apiKey });

const gen = await generateText({ model: openai(model), prompt: 'Say hello.' });
console.log(JSON.stringify({ call: 'generateText', text: gen.text, finishReason: gen.finishReason,
  inputTokens: gen.usage.inputTokens, outputTokens: gen.usage.outputTokens }));

const st = streamText({ model: openai(model), prompt: 'Say hello.' });
let parts = 0;
let text = '';
for await (const delta of st.textStream) {
  parts++;
  text += delta;
}
console.log(JSON.stringify({ call: 'streamText', text, parts, finishReason: await st.finishReason,
  outputTokens: (await st.usage).outputTokens }));
