// The conformance suite's client scenarios drive taskdeck's client
// through this adapter: `node adapter.mjs URL`, with the scenario's name
// (and, for some, its context) in the environment, and the taskdeck
// binary in TASKDECK_BIN. Each step is one taskdeck command on a store
// of its own; the adapter exits with the first command's failure.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const url = process.argv.at(-1);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? "{}");
const dir = mkdtempSync(join(tmpdir(), "taskdeck-adapter-"));
writeFileSync(join(dir, "config.json"), `{"mcpServers":{}}`); // --url names the server
let failed = 0;

function td(...args) {
  const r = spawnSync(process.env.TASKDECK_BIN, [...args, "--data-dir", dir, "--config", join(dir, "config.json")], {
    encoding: "utf8",
    timeout: 20000,
  });
  process.stderr.write(`taskdeck ${args.join(" ")}: exit ${r.status}\n${r.stdout}${r.stderr}`);
  if (r.status !== 0 && !failed) failed = r.status ?? 1;
  return r;
}

// tools lists the server's tools as it sent them.
function tools() {
  const r = td("tools", "--url", url, "--json");
  return r.stdout.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
}

// call calls tool and follows it to its end, answering inputs by key.
function call(tool, args, inputs = {}) {
  const flags = Object.entries(inputs).flatMap(([k, v]) => ["--input", `${k}=${JSON.stringify(v)}`]);
  return td("call", "--url", url, tool, "--args", JSON.stringify(args), "--wait", ...flags);
}

// required fills a tool's required arguments with a value of their type.
function required(tool) {
  const s = tool.inputSchema ?? {};
  const sample = { string: "x", number: 1, integer: 1, boolean: true, object: {}, array: [] };
  return Object.fromEntries((s.required ?? []).map((k) => [k, sample[s.properties?.[k]?.type] ?? "x"]));
}

const confirmed = { confirm: { action: "accept", content: { confirmed: true } } };
try {
  switch (scenario) {
    case "tools_call":
      tools();
      call("add_numbers", { a: 2, b: 3 });
      break;
    case "sep-2322-client-request-state":
      tools();
      call("test_mrtr_echo_state", {}, confirmed);
      call("test_mrtr_no_state", {}, confirmed);
      call("test_mrtr_unrelated", {});
      call("test_mrtr_no_result_type", {}, confirmed);
      break;
    case "http-custom-headers":
      tools();
      for (const c of context.toolCalls ?? []) call(c.name, c.arguments ?? {});
      break;
    case "json-schema-2020-12-preservation": {
      const focal = tools().find((t) => t.name === "json_schema_2020_12_tool");
      call("json_schema_echo", { schema: focal?.inputSchema ?? {} });
      break;
    }
    case "json-schema-ref-no-deref":
      tools();
      break;
    default: // every tool offered, with its required arguments
      for (const t of tools()) call(t.name, required(t));
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed);
