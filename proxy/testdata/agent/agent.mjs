// A test agent: the official TypeScript MCP client, with the official
// tasks requester for the task flows, driven against taskdeck's proxy.
// Usage: node agent.mjs URL flows|hold TOOL ARGS_JSON
// It prints one JSON line per outcome and exits 1 on the first surprise.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const [url, scenario, ...rest] = process.argv.slice(2);
const clientInfo = { name: "ts-agent", version: "1.0.0" };

function out(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}
function fail(msg) {
  out({ fail: msg });
  process.exit(1);
}

// rawDispatch is the host's request path for the tasks wire shapes: one
// POST per request, as streamable HTTP on 2026-07-28 asks.
let nextId = 1;
async function rawDispatch(request, options) {
  const body = { jsonrpc: "2.0", id: nextId++, ...request };
  const p = body.params ?? {};
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": body.method,
  };
  const name = p.name ?? p.uri ?? p.taskId;
  if (name !== undefined) headers["mcp-name"] = String(name);
  const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body), signal: options?.signal });
  let text = await res.text();
  if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    const data = text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim());
    text = data.find((d) => d.includes('"id"')) ?? "";
  }
  const msg = JSON.parse(text);
  return msg.error ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result };
}

const client = new Client(clientInfo, {
  capabilities: { elicitation: { form: {} } },
  versionNegotiation: { mode: { pin: "2026-07-28" } },
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));

if (scenario === "hold") {
  // No tasks requester: the proxy holds the call until the task ends.
  const [tool, args] = rest;
  out({ calling: tool });
  const res = await client.callTool({ name: tool, arguments: JSON.parse(args ?? "{}") });
  out({ tool, result: res });
  process.exit(0);
}

const answers = {
  approve: { action: "accept", content: { approve: true, reason: "ts says yes" } },
  confirm_first: { action: "accept", content: { confirm: true } },
};
let current = "";
const session = createTaskSessionFromClient(client, {
  endpointId: "taskdeck-proxy-test",
  rawDispatch,
  v2RequestFraming: {
    protocolVersion: "2026-07-28",
    clientInfo,
    clientCapabilities: { elicitation: { form: {} } },
  },
  onInputRequest: async (request) => {
    if (request.kind !== "elicitation") fail("unexpected input request " + request.kind);
    out({ tool: current, input: request.params.message });
    return answers[current];
  },
});

function textOf(result) {
  return (result?.content ?? []).map((c) => c.text ?? "").join("");
}

async function run(tool, args, want) {
  current = tool;
  const exec = await session.callTool(tool, args);
  const { outcome } = await exec.settle();
  if (outcome.status !== "completed") fail(`${tool}: ${outcome.status} ${outcome.error?.message ?? ""}`);
  const text = textOf(resultFromTaskOutcome(outcome));
  if (!text.includes(want)) fail(`${tool}: got ${JSON.stringify(text)}, want ${want}`);
  out({ tool, kind: exec.kind, taskId: exec.handle?.taskId, text });
}

try {
  await run("echo", { text: "hello" }, "hello");
  await run("sleep", { seconds: 1 }, "slept");
  await run("pipeline", { stages: 2 }, "");
  await run("approve", { action: "ship" }, "approved ship: ts says yes");
  await run("confirm_first", {}, "confirmed");

  current = "sleep";
  const exec = await session.callTool("sleep", { seconds: 600 });
  if (exec.kind !== "task") fail("sleep 600 was not a task");
  await exec.cancel();
  const { outcome } = await exec.settle();
  if (outcome.status !== "cancelled") fail("cancel: " + outcome.status);
  out({ tool: "sleep", kind: exec.kind, taskId: exec.handle.taskId, cancelled: true });
} finally {
  await session.close();
}
process.exit(0);
