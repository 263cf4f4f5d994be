// Issue 23: the vendors' TypeScript SDKs at their defaults (only the base URL set),
// against the gateway. Prints one JSON object of what each call returned; the Python
// test (test_ts_sdks.py) asserts it. Usage: node ts_sdks.mjs GATEWAY_URL
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI, Type } from "@google/genai";

const url = process.argv[2];
const question = "What is the weather in Vienna?";
const weather = {
  name: "get_weather",
  description: "Get the current weather for a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
  },
};
const out = {};

const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
const messages = [{ role: "user", content: question }];
for (const model of ["oa", "demo"]) {
  const whole = await openai.chat.completions.create({ model, messages });
  let streamed = "";
  for await (const chunk of await openai.chat.completions.create({ model, messages, stream: true })) {
    streamed += chunk.choices[0]?.delta?.content ?? "";
  }
  const tools = await openai.chat.completions.create({
    model,
    messages,
    tools: [{ type: "function", function: weather }],
  });
  const response = await openai.responses.create({ model: model === "oa" ? "resp" : model, input: question });
  out[`openai.${model}`] = {
    whole: whole.choices[0].message.content,
    finish: whole.choices[0].finish_reason,
    streamed,
    call: tools.choices[0].message.tool_calls?.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
    responses: response.output_text,
  };
}
const two = await openai.chat.completions.create({ model: "oa", messages, n: 2 });
out["openai.n"] = two.choices.map((c) => [c.index, c.message.content]);
try {
  await openai.chat.completions.create({ model: "nope", messages });
} catch (error) {
  out["openai.unknown"] = [error.constructor.name, error.status];
}

const anthropic = new Anthropic({ baseURL: url, apiKey: "unused", maxRetries: 0 });
for (const model of ["claude", "demo"]) {
  const whole = await anthropic.messages.create({ model, max_tokens: 200, messages });
  const stream = anthropic.messages.stream({ model, max_tokens: 200, messages });
  let streamed = "";
  stream.on("text", (text) => (streamed += text));
  await stream.finalMessage();
  const tools = await anthropic.messages.create({
    model,
    max_tokens: 200,
    messages,
    tools: [{ name: weather.name, description: weather.description, input_schema: weather.parameters }],
  });
  const counted = await anthropic.messages.countTokens({ model, messages });
  out[`anthropic.${model}`] = {
    whole: whole.content.map((b) => b.text).join(""),
    stop: whole.stop_reason,
    streamed,
    call: tools.content.filter((b) => b.type === "tool_use").map((b) => [b.name, b.input]),
    count: counted.input_tokens,
  };
}
for (const model of ["nope", "claude-down"]) {
  try {
    await anthropic.messages.create({ model, max_tokens: 10, messages });
  } catch (error) {
    out[`anthropic.error.${model}`] = [error.constructor.name, error.status];
  }
}

for (const version of ["default", "v1beta"]) {
  const httpOptions = version === "default" ? { baseUrl: url } : { baseUrl: url, apiVersion: version };
  const genai = new GoogleGenAI({ apiKey: "unused", httpOptions });
  for (const model of ["gem", "demo"]) {
    const whole = await genai.models.generateContent({ model, contents: question });
    let streamed = "";
    for await (const chunk of await genai.models.generateContentStream({ model, contents: question })) {
      streamed += chunk.text ?? "";
    }
    const called = await genai.models.generateContent({
      model,
      contents: question,
      config: {
        tools: [
          {
            functionDeclarations: [
              {
                name: weather.name,
                description: weather.description,
                parameters: {
                  type: Type.OBJECT,
                  properties: { city: { type: Type.STRING } },
                  required: ["city"],
                },
              },
            ],
          },
        ],
      },
    });
    const counted = await genai.models.countTokens({ model, contents: question });
    out[`genai.${version}.${model}`] = {
      whole: whole.text,
      streamed,
      call: (called.functionCalls ?? []).map((c) => [c.name, c.args]),
      count: counted.totalTokens,
    };
  }
}
console.log(JSON.stringify(out));
