// A 2025-11-25 server on the TypeScript SDK 1.x's own experimental task
// API (its InMemoryTaskStore), over stdio, or with the argument "http"
// over the SDK's streamable HTTP transport without sessions (one server
// per request, PORT from the environment, one task store for all: its
// tasks outlive a client, as on a server that binds tasks to credentials
// rather than sessions). "square" supports tasks optionally and fails
// when asked to; "wait" stays working for ms (the poll benchmark's task),
// kept for the ttl asked (the crash storm's tasks outlive its run), else
// a minute past its end; "hello" forbids them. TASKDECK_TEST_LIST makes tasks/list a listing
// that never ends: "endless", empty pages; "flood", 500 tasks a page.
import http from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from "@modelcontextprotocol/sdk/experimental/tasks";
import { z } from "zod";

class TestStore extends InMemoryTaskStore {
  async listTasks(cursor, sessionId) {
    const mode = process.env.TASKDECK_TEST_LIST;
    if (!mode) return super.listTasks(cursor, sessionId);
    const page = Number(cursor ?? 0), now = new Date().toISOString();
    const tasks = mode !== "flood" ? [] : Array.from({ length: 500 }, (_, i) =>
      ({ taskId: `t${page}-${i}`, status: "working", ttl: 60000, createdAt: now, lastUpdatedAt: now }));
    return { tasks, nextCursor: String(page + 1) };
  }
}

const taskStore = new TestStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();

function build() {
const server = new McpServer({ name: "taskdeck-sdk1-test", version: "1.0.0" }, {
  capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
  taskStore,
  taskMessageQueue,
});

server.experimental.tasks.registerToolTask("square", {
  description: "Squares n after a short while; fails when fail is true.",
  inputSchema: z.object({ n: z.number(), fail: z.boolean().default(false) }),
  execution: { taskSupport: "optional" },
}, {
  createTask: async (args, extra) => {
    const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 100 });
    setTimeout(() => {
      const result = args.fail
        ? { content: [{ type: "text", text: `cannot square ${args.n}` }], isError: true }
        : { content: [{ type: "text", text: `${args.n * args.n}` }] };
      extra.taskStore.storeTaskResult(task.taskId, args.fail ? "failed" : "completed", result).catch(() => {});
    }, 300);
    return { task };
  },
  getTask: async (args, extra) => extra.taskStore.getTask(extra.taskId),
  getTaskResult: async (args, extra) => extra.taskStore.getTaskResult(extra.taskId),
});

server.experimental.tasks.registerToolTask("wait", {
  description: "Completes after ms milliseconds.",
  inputSchema: z.object({ ms: z.number() }),
  execution: { taskSupport: "required" },
}, {
  createTask: async (args, extra) => {
    const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? args.ms + 60000, pollInterval: 100 });
    setTimeout(() => {
      extra.taskStore.storeTaskResult(task.taskId, "completed", { content: [{ type: "text", text: "waited" }] }).catch(() => {});
    }, args.ms);
    return { task };
  },
  getTask: async (args, extra) => extra.taskStore.getTask(extra.taskId),
  getTaskResult: async (args, extra) => extra.taskStore.getTaskResult(extra.taskId),
});

server.registerTool("hello", { description: "Says hello at once.", inputSchema: { name: z.string() } },
  async ({ name }) => ({ content: [{ type: "text", text: `hello ${name}` }] }));

return server;
}

if (process.argv[2] === "http") {
  http.createServer(async (req, res) => {
    const server = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  }).listen(Number(process.env.PORT ?? 0), "127.0.0.1");
} else {
  await build().connect(new StdioServerTransport());
}
