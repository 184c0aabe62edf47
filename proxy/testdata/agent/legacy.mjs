// A 2025-11-25 test agent: the official TypeScript MCP client pinned to
// that revision (a session, initialize), with the official tasks
// requester's generation-1 side, driven against taskdeck's proxy.
// Usage: node legacy.mjs URL flows|peek [TASK_ID]
//        node legacy.mjs URL outlive TOOL ARGS_JSON WANT
// URL "stdio" launches the server named by $TASKDECK_STDIO ({"command",
// "args", "env"}) and speaks to it over stdio instead.
// flows: call → task → poll → result, a failure, a cancel, then tasks/list.
// peek: tasks/list, and tasks/get of TASK_ID, as another agent would.
// outlive: call TOOL as a task and print it; follow it to its result on
// the same session through whatever taskdeck goes through meanwhile (a
// SIGKILL and a restart): a request the proxy cannot take while it is
// down is tried again, one that says the session is gone is a failure;
// then tasks/list.
// It prints one JSON line per outcome and exits 1 on the first surprise.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const [url, scenario, taskId] = process.argv.slice(2);
const auth = { authorization: "Bearer " + process.env.TASKDECK_AGENT_TOKEN };

function out(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}
function fail(msg) {
  out({ fail: msg });
  process.exit(1);
}

const client = new Client({ name: "ts-legacy-agent", version: "1.0.0" }, {
  capabilities: {},
  versionNegotiation: { mode: "legacy" },
});
const transport = url === "stdio"
  ? new StdioClientTransport({ ...JSON.parse(process.env.TASKDECK_STDIO), stderr: "inherit" })
  : new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } });
await client.connect(transport);
out({ session: transport.sessionId ?? "", protocolVersion: transport.protocolVersion ?? "" });

const session = createTaskSessionFromClient(client, { endpointId: "taskdeck-proxy-legacy-test" });
if (session.capabilities.inventory !== "server-list") fail("the proxy offers no tasks/list: " + JSON.stringify(session.capabilities));

function textOf(result) {
  return (result?.content ?? []).map((c) => c.text ?? "").join("");
}

// run calls tool as a task and checks that it ends in status with want in
// its text (completed) or its error's message (failed).
async function run(tool, args, want, status = "completed") {
  const exec = await session.callTool(tool, args, { task: { preference: "require" } });
  if (exec.kind !== "task") fail(`${tool}: ${exec.kind}, want a task`);
  const { outcome } = await exec.settle({ close: false });
  if (outcome.status !== status) fail(`${tool}: ${outcome.status} ${outcome.error?.message ?? ""}, want ${status}`);
  const result = status === "completed" ? resultFromTaskOutcome(outcome) : undefined;
  const text = result ? textOf(result) : outcome.error?.message ?? "";
  if (!text.includes(want)) fail(`${tool}: got ${JSON.stringify(text)}, want ${want}`);
  out({ tool, kind: exec.kind, taskId: exec.handle.taskId, status: outcome.status, text });
}

// outlive follows a task through a restart of the proxy (see above).
async function outlive(tool, args, want) {
  const exec = await session.callTool(tool, args, { task: { preference: "require" } });
  if (exec.kind !== "task") fail(`${tool}: ${exec.kind}, want a task`);
  const taskId = exec.handle.taskId;
  out({ tool, kind: exec.kind, taskId, status: "created" });
  // settle ends at the first request that fails (a failed outcome, or a
  // throw); the task is then asked of the proxy again until it answers.
  let outcome, err;
  try {
    ({ outcome } = await exec.settle({ close: false }));
    if (outcome.status !== "completed") err = outcome.error ?? new Error(outcome.status);
  } catch (e) {
    err = e;
  }
  while (err !== undefined) {
    const msg = (String(err?.message ?? err) + " " + String(err?.cause?.message ?? "")).trim();
    if (msg.includes("404") || msg.includes("initialize again")) fail(`${tool}: the session is gone: ${msg}`);
    out({ retry: msg });
    await new Promise((resolve) => setTimeout(resolve, 100)); // the proxy is down: try again
    err = undefined;
    try {
      outcome = await session.task(taskId).result();
    } catch (e) {
      err = e;
    }
  }
  const text = outcome.status === "completed" ? textOf(resultFromTaskOutcome(outcome)) : "";
  if (outcome.status !== "completed" || !text.includes(want)) fail(`${tool}: ${outcome.status} ${JSON.stringify(text)} ${outcome.error?.message ?? ""}, want ${want}`);
  out({ tool, taskId, status: outcome.status, text, session: transport.sessionId ?? "" });
  const page = await session.listTasks();
  out({ listed: page.tasks.map((t) => t.taskId), statuses: page.tasks.map((t) => t.status) });
}

try {
  if (scenario === "outlive") {
    await outlive(process.argv[4], JSON.parse(process.argv[5]), process.argv[6]);
  } else if (scenario === "peek") {
    const page = await session.listTasks();
    out({ listed: page.tasks.map((t) => t.taskId) });
    try {
      const view = await session.task(taskId).snapshot();
      out({ peeked: view.taskId, status: view.status });
    } catch (e) {
      out({ peeked: taskId, error: String(e?.message ?? e) });
    }
  } else {
    await run("echo", { text: "hello" }, "hello");
    await run("sleep", { seconds: 1 }, "slept");
    await run("fail", { mode: "error" }, "simulated failure", "failed");

    const exec = await session.callTool("sleep", { seconds: 600 }, { task: { preference: "require" } });
    if (exec.kind !== "task") fail("sleep 600 was not a task");
    await exec.cancel();
    const { outcome } = await exec.settle({ close: false });
    if (outcome.status !== "cancelled") fail("cancel: " + outcome.status);
    out({ tool: "sleep", kind: exec.kind, taskId: exec.handle.taskId, status: outcome.status });

    const page = await session.listTasks();
    out({ listed: page.tasks.map((t) => t.taskId), statuses: page.tasks.map((t) => t.status) });
  }
} finally {
  await session.close();
  await Promise.resolve(transport.terminateSession?.()).catch(() => {});
}
process.exit(0);
