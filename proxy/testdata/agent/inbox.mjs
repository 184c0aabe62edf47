// An operator at taskdeck's inbox (serve --proxy's /inbox): the official
// TypeScript MCP client lists what waits, shows the first task's form and
// answers its question with ANSWER_JSON (the form's content).
// Usage: node inbox.mjs URL ANSWER_JSON; the token is $TASKDECK_OPERATOR_TOKEN.
// It prints one JSON line per tool it called and exits 1 on the first surprise.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, answer] = process.argv.slice(2);
const headers = { authorization: "Bearer " + process.env.TASKDECK_OPERATOR_TOKEN };
function out(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}
function fail(msg) {
  out({ fail: msg });
  process.exit(1);
}

const client = new Client({ name: "ts-operator", version: "1.0.0" }, { capabilities: {} });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));

const { tools } = await client.listTools();
out({ tools: tools.map((t) => t.name).sort() });

async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) fail(`${name}: ${JSON.stringify(res.content)}`);
  out({ tool: name, result: res.structuredContent });
  return res.structuredContent;
}

const list = await call("inbox_list", {});
if (list.waiting.length !== 1) fail(`inbox_list: ${list.waiting.length} waiting, want 1`);
const task = list.waiting[0].task;
const shown = await call("inbox_show", { task });
const q = shown.questions[0];
if (!q.schema || !q.schema.properties) fail(`inbox_show gave no form: ${JSON.stringify(q)}`);
await call("inbox_answer", { task, key: q.key, content: JSON.parse(answer) });
await client.close();
