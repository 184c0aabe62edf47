// A test agent: the official TypeScript MCP client, with the official
// tasks requester for the task flows, driven against taskdeck's proxy.
// Usage: node agent.mjs URL flows|flows-extra|hold TOOL ARGS_JSON
// ($TASKDECK_IDEMPOTENCY_KEY, if set, is sent as the Idempotency-Key header;
// $TASKDECK_TRACEPARENT, if set, as the held call's _meta.traceparent and
// as the traceparent header).
// flows-extra answers every form with a field it does not name, too.
// It prints one JSON line per outcome and exits 1 on the first surprise.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const [url, scenario, ...rest] = process.argv.slice(2);
const clientInfo = { name: "ts-agent", version: "1.0.0" };
// The agent's credential at the proxy, as its config would hold it.
const auth = process.env.TASKDECK_AGENT_TOKEN ? { authorization: "Bearer " + process.env.TASKDECK_AGENT_TOKEN } : {};

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
let paramHeaders = {};
async function rawDispatch(request, options) {
  const body = { jsonrpc: "2.0", id: nextId++, ...request };
  const p = body.params ?? {};
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": body.method,
    ...auth,
  };
  const name = p.name ?? p.uri ?? p.taskId;
  if (name !== undefined) headers["mcp-name"] = String(name);
  // The header-annotated arguments (x-mcp-header) of the call under way.
  if (body.method === "tools/call") Object.assign(headers, paramHeaders);
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
// An idempotency key, when the environment gives one, goes with every request.
const key = process.env.TASKDECK_IDEMPOTENCY_KEY ? { "idempotency-key": process.env.TASKDECK_IDEMPOTENCY_KEY } : {};
// The trace context goes as the W3C header too, as an instrumented fetch sends it.
const traced = process.env.TASKDECK_TRACEPARENT ? { traceparent: process.env.TASKDECK_TRACEPARENT } : {};
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { ...auth, ...key, ...traced } } }));

if (scenario === "hold") {
  // No tasks requester: the proxy holds the call until the task ends.
  const [tool, args] = rest;
  out({ calling: tool });
  // The caller's trace context (SEP-414), when the environment gives one.
  const meta = process.env.TASKDECK_TRACEPARENT ? { _meta: { traceparent: process.env.TASKDECK_TRACEPARENT } } : {};
  const res = await client.callTool({ name: tool, arguments: JSON.parse(args ?? "{}"), ...meta });
  out({ tool, result: res });
  process.exit(0);
}

// The answers, by the question's opening words.
const answers = [
  ["Approve", { action: "accept", content: { approve: true, reason: "ts says yes" } }],
  ["Run confirm_first", { action: "accept", content: { confirm: true } }],
  ["How can we reach you", { action: "accept", content: { email: "ts@example.com", plan: "pro" } }],
  ["How would you rate us", { action: "accept", content: { score: 9 } }],
];
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
    const msg = request.params.message;
    out({ tool: current, input: msg });
    const answer = answers.find(([start]) => msg.startsWith(start));
    if (!answer) fail(`${current}: no answer for ${JSON.stringify(msg)}`);
    if (scenario === "flows-extra") return { ...answer[1], content: { ...answer[1].content, note: "not in the form" } };
    return answer[1];
  },
});

function textOf(result) {
  return (result?.content ?? []).map((c) => c.text ?? "").join("");
}

// run calls tool and checks that it ends in status with want in its text
// (completed) or its error's message (failed).
async function run(tool, args, want, { status = "completed", headers = {} } = {}) {
  current = tool;
  paramHeaders = headers;
  const exec = await session.callTool(tool, args);
  const { outcome } = await exec.settle();
  paramHeaders = {};
  if (outcome.status !== status) fail(`${tool}: ${outcome.status} ${outcome.error?.message ?? ""}, want ${status}`);
  const result = status === "completed" ? resultFromTaskOutcome(outcome) : undefined;
  const text = result ? textOf(result) : outcome.error?.message ?? "";
  if (!text.includes(want)) fail(`${tool}: got ${JSON.stringify(text)}, want ${want}`);
  out({ tool, kind: exec.kind, taskId: exec.handle?.taskId, status: outcome.status, isError: result?.isError === true, text });
}

try {
  await run("echo", { text: "hello" }, "hello");
  await run("sleep", { seconds: 1 }, "slept");
  await run("pipeline", { stages: 2 }, "");
  await run("approve", { action: "ship" }, "approved ship: ts says yes");
  await run("confirm_first", {}, "confirmed");
  await run("fail", { mode: "error" }, "simulated failure", { status: "failed" });
  await run("fail", { mode: "tool" }, "simulated tool failure");
  await run("survey", {}, "survey: email=ts@example.com plan=pro score=9");
  await run("deploy", { region: "eu-west", priority: 7 },
    "deployed to eu-west at priority 7; headers seen: Mcp-Param-Region=eu-west Mcp-Param-Priority=7",
    { headers: { "mcp-param-region": "eu-west", "mcp-param-priority": "7" } });
  await run("instant", { text: "now" }, "instant: now");
  await run("instant", { mode: "error" }, "instant failure", { status: "failed" });

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
