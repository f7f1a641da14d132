// BullMQ's native worker under the same load as qlessd's worker scenario
// (benches/lifecycle.rs, section `bullmq`): 4 producers add `jobs` jobs in bulks of 10
// (~100 bytes of data each) while one Worker with concurrency 50 drains them; the
// handler does nothing. Prints one JSON line: {"jobs": n, "seconds": s}, the time from
// the first add to the last completion. Redis CPU is measured by the caller.
//
//     node bench.mjs <redis unix socket> <jobs>

import { Queue, Worker } from "bullmq";

const [socket, jobsArg, order] = process.argv.slice(2);
// "prefill": add every job first, then start the worker (draining a full queue).
const prefill = order === "prefill";
const jobs = Number(jobsArg ?? 20000);
const connection = { path: socket, maxRetriesPerRequest: null };
const PRODUCERS = 4;
const BULK = 10;
const CONCURRENCY = 50;

const queue = new Queue("work", { connection });
await queue.waitUntilReady();
let completed = 0;
let finish;
const finished = new Promise((resolve) => (finish = resolve));
let worker;
async function startWorker() {
  worker = new Worker("work", async () => null, { connection, concurrency: CONCURRENCY });
  worker.on("completed", () => {
    completed += 1;
    if (completed === jobs) finish();
  });
  await worker.waitUntilReady();
}
if (!prefill) await startWorker();

let started = process.hrtime.bigint();
let next = 0;
async function produce() {
  while (next < jobs) {
    const base = next;
    next += BULK;
    const bulk = [];
    for (let k = base; k < Math.min(base + BULK, jobs); k++) {
      bulk.push({
        name: "bench.Job",
        data: { user_id: k, email: `user-${k}@example.com`, plan: "pro", note: "welcome mail, retry ok" },
      });
    }
    await queue.addBulk(bulk);
  }
}
await Promise.all(Array.from({ length: PRODUCERS }, produce));
if (prefill) {
  started = process.hrtime.bigint();
  await startWorker();
}
await finished;
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
console.log(JSON.stringify({ jobs, seconds }));
await worker.close();
await queue.close();
