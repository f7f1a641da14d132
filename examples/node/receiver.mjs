// A qlessd push receiver in JavaScript, for Node 18+: node:http, and the
// `standardwebhooks` package to check signatures (`npm ci` in examples/node installs
// it, pinned by package.json and package-lock.json).
//
// qlessd leases each job of a pushed queue and POSTs it here, signed: the body is the
// job as GET /v1/jobs/{jid} shows it. The answer decides the job: 200 completes it,
// and the JSON body becomes its `result`; a 4xx (other than 408 and 429) fails it at
// once into `push-http-<status>`, with the start of the body as its message; a 5xx
// retries it. So this program does the same greeting job as worker.mjs, with no qlessd
// API calls at all:
//
//     QLESSD_PUSH_SECRET=whsec_... node examples/node/receiver.mjs
//     curl -X PUT localhost:5858/v1/queues/greetings/push \
//          -H 'content-type: application/json' -d '{"url": "http://127.0.0.1:8000/"}'
//
// (The PUT answers the secret once; start the receiver with it. qlessd refuses
// loopback URLs unless started with --push-allow-private.)
//
// Settings (environment): QLESSD_PUSH_SECRET (required: the queue's `whsec_...`
// secret), PORT (8000), HOST (127.0.0.1; 0.0.0.0 to take deliveries from other
// machines).

import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

const env = process.env;
const PORT = Number(env.PORT ?? 8000);
const HOST = env.HOST ?? "127.0.0.1";
// Checks webhook-id, webhook-timestamp (within 5 minutes of now) and
// webhook-signature (an HMAC of id, timestamp and body under the secret).
const webhook = new Webhook(env.QLESSD_PUSH_SECRET);
// A job is at most qlessd's --max-job-size (1 MiB by default), with some room.
const MAX_BODY = 2 * 1024 * 1024;

/** A job this receiver cannot do: answered 422, so it fails at once. */
class Refused extends Error {}

/** The work itself: the same greeting as worker.mjs. Its result is the answer. */
function greet(job) {
  if (job.klass !== "Greet") throw new Refused(`no such job class here: ${job.klass}`);
  const name = job.data.name;
  if (!name) throw new Refused("no name to greet");
  return { ...job.data, greeting: `Hello, ${name}!` };
}

/** The request's body, or null when it is longer than MAX_BODY. */
async function read(request) {
  const chunks = [];
  let size = 0;
  for await (const chunk of request) {
    size += chunk.length;
    if (size > MAX_BODY) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

async function receive(request, response) {
  const answer = (status, type, text) =>
    response.writeHead(status, { "content-type": type }).end(text);
  const body = await read(request);
  if (body === null) return answer(413, "text/plain", "too large");
  let job;
  try {
    // Verifies, then parses the body as JSON. Only qlessd knows the secret.
    job = webhook.verify(body, request.headers);
  } catch (err) {
    console.log("refused an unverified delivery:", err.message);
    return answer(401, "text/plain", "signature not verified");
  }
  // A delivery may come twice (after a crash, say): webhook-id, the job's id, is the
  // same each time. Greeting twice does no harm.
  try {
    const result = greet(job);
    console.log("completed", `${job.jid}:`, result.greeting);
    answer(200, "application/json", JSON.stringify(result));
  } catch (err) {
    if (!(err instanceof Refused)) throw err;
    console.log("failed", `${job.jid}:`, err.message);
    answer(422, "text/plain", err.message);
  }
}

createServer((request, response) => {
  receive(request, response).catch((err) => {
    // A bug: 500, so qlessd retries the job later.
    console.log("error:", err);
    if (!response.headersSent) response.writeHead(500).end();
  });
}).listen(PORT, HOST, () => console.log(`listening on http://${HOST}:${PORT}/`));
