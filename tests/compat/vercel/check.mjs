// The Vercel AI SDK against `cantata serve` at the URL given: plain, stream, multi-turn (the
// SDK's default: earlier turns as item_reference items), structured output, a tool round
// trip, a failing agent, each over the Responses API and the plain calls over chat
// completions too. Exits non-zero, saying what differed, on the first failure.
import assert from "node:assert/strict";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, Output, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const provider = createOpenAI({ baseURL: `${process.argv[2]}/v1`, apiKey: "unused" });
const model = provider("assistant"); // the Responses API
const options = { maxRetries: 0 };

const first = await generateText({ model, prompt: "hello", ...options });
assert.equal(first.text, "turn 1: hello");

const again = await generateText({
  model,
  messages: [{ role: "user", content: "hello" }, ...first.response.messages, { role: "user", content: "again" }],
  ...options,
});
assert.equal(again.text, "turn 2: again");

const streamed = streamText({ model, prompt: "streamed", ...options });
const pieces = [];
for await (const piece of streamed.textStream) pieces.push(piece);
assert.ok(pieces.length > 2, `one piece per delta, got ${JSON.stringify(pieces)}`);
assert.equal(pieces.join(""), "turn 1: streamed");

const chat = await generateText({ model: provider.chat("assistant"), prompt: "via chat", ...options });
assert.equal(chat.text, "turn 1: via chat");

const city = await generateText({
  model,
  output: Output.object({ schema: z.object({ name: z.string(), people: z.number().int() }) }),
  prompt: "a city?",
  ...options,
});
assert.deepEqual(city.output, { name: "Oslo", people: 3 });

const ran = [];
const weather = await generateText({
  model,
  tools: {
    get_weather: tool({
      description: "The weather in a city.",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        ran.push(city);
        return `sunny in ${city}`;
      },
    }),
  },
  stopWhen: stepCountIs(3),
  prompt: "weather?",
  ...options,
});
assert.deepEqual(ran, ["Oslo"]);
assert.equal(weather.text, "the tool said: sunny in Oslo");

await assert.rejects(
  generateText({ model: provider("broken"), prompt: "hi", ...options }),
  (error) => {
    assert.match(String(error.message), /the model server is down/);
    assert.equal(error.statusCode, 500);
    return true;
  },
);

console.log("vercel ai sdk: 7 checks passed");
