// The Vercel AI SDK's default OpenAI provider against the gateway. openai(model)
// calls POST {baseURL}/responses. One JSON line per call for the Go test
// (cmd/gateway TestVercelAISDK) to assert on.
// Usage: node check.mjs BASE_URL API_KEY MODEL text|tools
//   text:  streamText, then generateText with an image part and maxOutputTokens.
//   tools: generateText and streamText with one tool the model calls; the SDK
//          runs it, sends the result back and the model answers (two steps),
//          with the SDK's default store (true: the answering step names the
//          tool call step's items by item_reference), then generateText
//          with store: false (the items sent whole).
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText, tool, stepCountIs } from 'ai';
import { z } from 'zod';
import { onlyGateway, pixelPNG, print } from './loopback.mjs';

const [baseURL, apiKey, modelName, phase] = process.argv.slice(2);
onlyGateway(baseURL);
const model = createOpenAI({ baseURL, apiKey })(modelName);
const usage = (u) => ({ inputTokens: u.inputTokens, outputTokens: u.outputTokens });

if (phase === 'text') {
  const st = streamText({ model, prompt: 'Say hello.', maxOutputTokens: 40, maxRetries: 0 });
  let parts = 0;
  let text = '';
  for await (const delta of st.textStream) {
    parts++;
    text += delta;
  }
  print({ call: 'streamText', text, parts, finishReason: await st.finishReason, ...usage(await st.usage) });

  const gen = await generateText({
    model, maxOutputTokens: 50, maxRetries: 0,
    messages: [{ role: 'user', content: [
      { type: 'text', text: 'What is in this image?' },
      { type: 'image', image: pixelPNG, mediaType: 'image/png' },
    ] }],
  });
  print({ call: 'generateText', text: gen.text, finishReason: gen.finishReason, ...usage(gen.usage) });
} else if (phase === 'tools') {
  // Each call gets its own tool, so what one call's tool received is its own.
  const lookupTool = (calls) => tool({
    description: 'Looks up which upstream served the request.',
    inputSchema: z.object({ identity: z.string() }),
    execute: async (input) => {
      calls.push(input);
      return { found: `result for ${input.identity}` };
    },
  });
  // How many of a call's request bodies named an item by item_reference:
  // the default store's answering step does, store: false's does not.
  let refs = 0;
  const gatewayFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    if (typeof init?.body === 'string' && init.body.includes('"item_reference"')) refs++;
    return gatewayFetch(input, init);
  };
  const toolLine = async (call, r, calls) => {
    const steps = await r.steps;
    print({ call, text: await r.text, finishReason: await r.finishReason, calls, itemReferences: refs,
      stepFinishReasons: steps.map((s) => s.finishReason),
      toolResults: steps.flatMap((s) => s.toolResults.map((t) => t.output)),
      ...usage(await r.totalUsage) });
    refs = 0;
  };
  const prompt = 'Use the lookup tool, then answer.';
  const genCalls = [];
  const gen = await generateText({ model, prompt, tools: { lookup: lookupTool(genCalls) }, stopWhen: stepCountIs(4), maxRetries: 0 });
  await toolLine('generateText', gen, genCalls);

  const stCalls = [];
  let streamError;
  const st = streamText({ model, prompt, tools: { lookup: lookupTool(stCalls) }, stopWhen: stepCountIs(4), maxRetries: 0,
    onError: ({ error }) => { streamError = error; } });
  for await (const _ of st.textStream) { /* drain */ }
  if (streamError) throw streamError;
  await toolLine('streamText', st, stCalls);

  // store: false makes the SDK send the tool call step's items back whole.
  const noStoreCalls = [];
  const noStore = await generateText({ model, prompt, tools: { lookup: lookupTool(noStoreCalls) }, stopWhen: stepCountIs(4), maxRetries: 0,
    providerOptions: { openai: { store: false } } });
  await toolLine('generateText store false', noStore, noStoreCalls);

} else {
  throw new Error(`unknown phase ${phase}`);
}
