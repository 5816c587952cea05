// The OpenAI Agents SDK (@openai/agents) against the gateway: an Agent with one
// function tool on the SDK's default model (OpenAI Responses), with the
// OpenAI client pointed at the gateway and tracing off (its exporter would
// call api.openai.com). One JSON line per run for the Go test
// (cmd/gateway TestOpenAIAgentsSDK) to assert on.
// Usage: node agents.mjs BASE_URL API_KEY MODEL
import { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { onlyGateway, pixelPNG, print } from './loopback.mjs';

const [baseURL, apiKey, modelName] = process.argv.slice(2);
onlyGateway(baseURL);
setTracingDisabled(true);
setOpenAIAPI('responses');
setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey, maxRetries: 0 }));

const agentWith = (calls, modelSettings = {}) => new Agent({
  name: 'checker',
  modelSettings,
  instructions: 'Answer with the lookup tool.',
  model: modelName,
  tools: [tool({
    name: 'lookup',
    description: 'Looks up which upstream served the request.',
    parameters: z.object({ identity: z.string() }),
    execute: async (input) => {
      calls.push(input);
      return `result for ${input.identity}`;
    },
  })],
});
const prompt = 'Use the lookup tool, then answer.';
// items names the run's new items by type, so the test sees call, output, message.
const items = (r) => r.newItems.map((i) => i.type);
const usage = (r) => ({ inputTokens: r.state.usage.inputTokens, outputTokens: r.state.usage.outputTokens,
  requests: r.state.usage.requests });

const runCalls = [];
const res = await run(agentWith(runCalls), prompt, { maxTurns: 4 });
print({ call: 'run', finalOutput: res.finalOutput, calls: runCalls, items: items(res), ...usage(res) });

// The streamed run sends an image part too, and a token limit.
const streamCalls = [];
const withImage = [{ role: 'user', content: [
  { type: 'input_text', text: prompt },
  { type: 'input_image', image: `data:image/png;base64,${pixelPNG.toString('base64')}` },
] }];
const st = await run(agentWith(streamCalls, { maxTokens: 50 }), withImage, { maxTurns: 4, stream: true });
let deltas = 0;
for await (const ev of st) {
  if (ev.type === 'raw_model_stream_event' && ev.data.type === 'output_text_delta') deltas++;
}
await st.completed;
if (st.error) throw st.error;
print({ call: 'run stream', finalOutput: st.finalOutput, calls: streamCalls, items: items(st), deltas, ...usage(st) });
