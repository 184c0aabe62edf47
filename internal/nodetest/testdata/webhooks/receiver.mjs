// A Standard Webhooks receiver for taskdeck's notify tests, on the
// standardwebhooks package's own verifier (nobody here wrote it).
// Env: SECRET (whsec_...), FAIL_PERCENT (answer 503 to that share of
// deliveries before verifying, but never to a webhook-id's third try: the
// sender's backoff doubles on each failure, and a long run of chance
// failures would outlast any test's wait), REDIRECT=1 (answer every
// delivery 307).
// Prints "listening PORT" once bound to 127.0.0.1. GET /log returns every
// delivery it accepted, in order: {"id", "type", "task", "status", "questions", "answer"} (duplicates
// too).
import http from "node:http";
import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.SECRET);
const failPercent = Number(process.env.FAIL_PERCENT || "0");
const accepted = [];
let refused = 0, failed = 0;
const failedTries = new Map(); // webhook-id: deliveries failed on purpose
const maxFailedTries = 2;

const server = http.createServer((req, res) => {
  if (req.method === "GET" && req.url === "/log") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ accepted, refused, failed }));
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    if (process.env.REDIRECT === "1") {
      res.writeHead(307, { location: "http://127.0.0.1:1/elsewhere" });
      res.end();
      return;
    }
    const id = req.headers["webhook-id"];
    const tries = failedTries.get(id) || 0;
    if (tries < maxFailedTries && Math.random() * 100 < failPercent) {
      failedTries.set(id, tries + 1);
      failed++;
      res.writeHead(503);
      res.end("failing on purpose");
      return;
    }
    const body = Buffer.concat(chunks).toString("utf8");
    let msg;
    try {
      msg = wh.verify(body, req.headers);
    } catch (e) {
      refused++;
      res.writeHead(400);
      res.end(String(e));
      return;
    }
    accepted.push({ id: req.headers["webhook-id"], type: msg.type, task: msg.data?.task?.id,
      status: msg.data?.task?.status, questions: (msg.data?.questions || []).map((q) => q.key),
      answer: msg.data?.answer || "" });
    res.writeHead(204);
    res.end();
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log("listening " + server.address().port);
});
