// What a Node HTTP client spends per request over HTTP/1.1 and over cleartext HTTP/2,
// the server side held equal: both talk to a Node server (node:http or node:http2) in a
// child process that answers every POST with the same ~150-byte JSON, so the client's
// CPU is what differs. 50 lanes; undici's `Pool` with 50 connections against its
// `H2CClient` on one session. The requests are marked idempotent: undici sends a POST
// that is not only when nothing else is in flight on the connection or session, which
// would make HTTP/2 one request at a time.
//
//     (cd benches/bullmq && npm install)
//     node benches/bullmq/http2_client.mjs [--requests 40000] [--rounds 2]
//
// Prints, per round and protocol, requests/s and the client's CPU per request.

import http from "node:http";
import http2 from "node:http2";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";

const LANES = 50;
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const body = JSON.stringify({ worker: "w", queue: "q", pop: { count: 1, wait: 1 } });
const answer = JSON.stringify({
  jid: "x".repeat(32),
  popped: [{ jid: "y".repeat(32), data: { user_id: 1, note: "welcome mail, retry ok" } }],
});

if (args[0] === "--serve") {
  const handler = (req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) });
      res.end(answer);
    });
  };
  const server = args[1] === "h2" ? http2.createServer(handler) : http.createServer({ keepAlive: true }, handler);
  server.listen(0, "127.0.0.1", () => process.send(server.address().port));
} else {
  const { Pool, H2CClient } = await import("undici");
  const requests = option("requests", 40000);
  for (let round = 1; round <= option("rounds", 2); round++) {
    for (const protocol of ["h1", "h2"]) {
      const server = fork(fileURLToPath(import.meta.url), ["--serve", protocol]);
      const port = await new Promise((resolve) => server.once("message", resolve));
      const origin = `http://127.0.0.1:${port}`;
      const client = protocol === "h2" ? new H2CClient(origin) : new Pool(origin, { connections: LANES });
      const call = () =>
        new Promise((resolve, reject) => {
          const chunks = [];
          client.dispatch(
            { method: "POST", path: "/", headers: { "content-type": "application/json" }, body, idempotent: true },
            {
              onRequestStart() {},
              onResponseStart() {},
              onResponseData(_controller, chunk) {
                chunks.push(chunk);
              },
              onResponseEnd() {
                resolve(JSON.parse(Buffer.concat(chunks).toString()));
              },
              onResponseError(_controller, err) {
                reject(err);
              },
            },
          );
        });
      const run = async (count) => {
        let left = count;
        await Promise.all(Array.from({ length: LANES }, async () => {
          while (left-- > 0) await call();
        }));
      };
      await run(5000); // warm-up: connections open, JIT warm
      const cpu = process.cpuUsage();
      const started = performance.now();
      await run(requests);
      const used = process.cpuUsage(cpu);
      const seconds = (performance.now() - started) / 1000;
      const per = (us) => (us / requests).toFixed(1);
      console.log(
        `round ${round} ${protocol === "h2" ? "HTTP/2  " : "HTTP/1.1"} ${(requests / seconds).toFixed(0).padStart(6)} requests/s` +
          `  client ${per(used.user + used.system)} us/request (user ${per(used.user)}, system ${per(used.system)})`,
      );
      await client.close();
      server.kill();
    }
  }
}
