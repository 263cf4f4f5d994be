// The 3-turn tool loop with the TypeScript openai SDK's ResponsesWS, unchanged but for
// baseURL: each turn sends its new items and previous_response_id. Prints one JSON line.
import OpenAI from "openai";
import { ResponsesWS } from "openai/resources/responses/ws";

const [url, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
const tools = [
  {
    type: "function",
    name: "get_weather",
    description: "The weather in a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    },
    strict: false,
  },
];

const socket = new ResponsesWS(client);
const failures = [];
socket.on("error", (error) => failures.push(String(error.message ?? error)));

function turn(body) {
  return new Promise((resolve, reject) => {
    const onEvent = (event) => {
      if (event.type === "response.completed" || event.type === "error") {
        socket.off("event", onEvent);
        if (event.type === "error") reject(new Error(JSON.stringify(event)));
        else resolve(event.response);
      }
    };
    socket.on("event", onEvent);
    socket.send({ type: "response.create", ...body });
  });
}

const turns = [];
let input = [{ role: "user", content: "Weather in Paris and Oslo?" }];
let previous;
for (let i = 0; i < 3; i++) {
  const body = { model, input, tools, store: false };
  if (previous) body.previous_response_id = previous;
  const response = await turn(body);
  const calls = response.output.filter((item) => item.type === "function_call");
  turns.push({
    id: response.id,
    status: response.status,
    text: response.output_text ?? response.output
      .filter((item) => item.type === "message")
      .flatMap((item) => item.content.map((part) => part.text))
      .join(""),
    cities: calls.map((call) => JSON.parse(call.arguments).city),
  });
  previous = response.id;
  input = calls.map((call, n) => ({
    type: "function_call_output",
    call_id: call.call_id,
    output: `weather ${n}`,
  }));
}
socket.close();
console.log(JSON.stringify({ turns, failures }));
