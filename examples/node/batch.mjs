// A batch with a callback, in JavaScript, for Node 18+ with nothing to install (the
// built-in fetch).
//
// It puts three `Thumbnail` jobs in the queue `thumbnails` as one batch, with an
// `on_success` callback: a `ThumbnailsDone` job that qlessd puts in the queue
// `thumbnails-done` once every job of the batch has completed. Then it plays the
// workers itself: it leases the three jobs with a long poll and completes each with a
// small `result`; the last completion puts the callback (in the same script call), so
// it leases that next and prints the summary of the batch qlessd put in its data
// (`data.batch`), completes it and exits with status 0. Run it against a qlessd on
// localhost:
//
//     node examples/node/batch.mjs
//
// Settings (environment), as for the workers: QLESSD_URL (default
// http://127.0.0.1:5858), POP_WAIT (seconds a long poll waits, 10), QLESSD_TOKEN (sent
// as a bearer token when set).

import { hostname } from "node:os";

const env = process.env;
const URL = env.QLESSD_URL ?? "http://127.0.0.1:5858";
const POP_WAIT = Number(env.POP_WAIT ?? 10);
// A worker name unique to this process: leases belong to it.
const WORKER = `${hostname()}-${process.pid}`;

/** Ends the program with a message and status 1. */
function die(message) {
  console.error(message);
  process.exit(1);
}

/** One API call: JSON in, JSON out; an error ends the program. */
async function call(method, path, body) {
  const headers = { accept: "application/json", "content-type": "application/json" };
  if (env.QLESSD_TOKEN) headers.authorization = `Bearer ${env.QLESSD_TOKEN}`;
  const response = await fetch(URL + path, {
    method,
    headers,
    body: JSON.stringify(body),
  }).catch((err) => die(`${method} ${path}: ${err.cause?.message ?? err.message}`));
  const reply = await response.json();
  if (!response.ok) {
    die(`${method} ${path}: ${response.status} ${reply.code}: ${reply.detail}`);
  }
  return reply;
}

/** Leases one job of `queue`, waiting up to POP_WAIT seconds for it to come. */
async function lease(queue) {
  const jobs = await call("POST", `/v1/queues/${queue}/pop`, {
    worker: WORKER,
    count: 1,
    wait: POP_WAIT,
  });
  // The job was put before we asked, so it should be there.
  if (jobs.length === 0) die(`no job came in ${queue} within ${POP_WAIT} s`);
  return jobs[0];
}

// The jobs and the batch are written in one call: all of them, or none. The
// callback's data gets `batch` (the summary) beside its own keys.
const photos = ["beach.jpg", "harbour.jpg", "lighthouse.jpg"];
const batch = await call("POST", "/v1/batches", {
  description: "thumbnails of the holiday album",
  jobs: photos.map((photo) => ({
    queue: "thumbnails",
    klass: "Thumbnail",
    data: { photo },
  })),
  on_success: {
    queue: "thumbnails-done",
    klass: "ThumbnailsDone",
    data: { album: "holidays" },
  },
});
console.log("batch", batch.bid);

// Work the batch's jobs: lease each, "make the thumbnail", complete it with a result
// (kept beside the job's data, which stays as it was).
for (let i = 0; i < batch.jids.length; i++) {
  const job = await lease("thumbnails");
  const thumbnail = `thumb-${job.data.photo}`;
  await call("POST", `/v1/jobs/${job.jid}/complete`, {
    worker: WORKER,
    queue: job.queue,
    result: { thumbnail },
  });
  console.log("completed", job.jid);
}

// The last completion put the callback: an ordinary job, put exactly once.
const callback = await lease("thumbnails-done");
const summary = callback.data.batch; // bid, total, completed, failed, ...
console.log(
  `callback ${callback.jid}: ${summary.completed} of ${summary.total} completed`,
);
await call("POST", `/v1/jobs/${callback.jid}/complete`, {
  worker: WORKER,
  queue: callback.queue,
});
