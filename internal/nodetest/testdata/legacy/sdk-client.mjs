// A 2025-11-25 agent on the TypeScript SDK 1.x's client and its
// experimental tasks API (callToolStream), for taskdeck's proxy tests.
// Usage: node sdk-client.mjs URL TOOL ARGS_JSON
// It answers every form with $ANSWER_JSON (the content of an accept) and
// prints one JSON line per message of the stream, and per question.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, tool, args] = process.argv.slice(2);
const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const client = new Client({ name: "sdk1-agent", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  out({ input: req.params.message, related: req.params._meta?.["io.modelcontextprotocol/related-task"]?.taskId ?? "" });
  return { action: "accept", content: JSON.parse(process.env.ANSWER_JSON ?? "{}") };
});
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { authorization: "Bearer " + process.env.TASKDECK_AGENT_TOKEN } },
});
await client.connect(transport);
let code = 1;
for await (const m of client.experimental.tasks.callToolStream({ name: tool, arguments: JSON.parse(args) }, CallToolResultSchema, { task: { ttl: 60000 } })) {
  switch (m.type) {
    case "taskCreated":
      out({ taskId: m.task.taskId, status: m.task.status });
      break;
    case "taskStatus":
      out({ status: m.task.status });
      break;
    case "result":
      out({ text: m.result.content.map((c) => c.text ?? "").join(""), isError: m.result.isError === true });
      code = 0;
      break;
    case "error":
      out({ error: String(m.error?.message ?? m.error) });
      break;
  }
}
await transport.terminateSession().catch(() => {});
process.exit(code);
