// A complete qlessd worker in JavaScript, for Node 18+ with nothing to install (the
// built-in fetch).
//
// It puts a few jobs, then works: lease jobs with a long poll, heartbeat while working,
// complete or fail each one, and stop gracefully on Ctrl-C or SIGTERM (finishing the
// job in hand, never abandoning a lease). Completing (or failing) a job also leases the
// next one in the same request (`pop`), so a busy worker makes one request per job;
// only when that finds the queue empty does it long-poll. Run it against a qlessd on
// localhost:
//
//     node examples/node/worker.mjs
//
// A job whose work fails goes to the failure group `<klass>-<reason>`: the work names a
// short reason (`Greet-no-name` for the job without a name), and an unexpected error
// falls into `<klass>-error`. The same rule holds in every example.
//
// Settings (environment): QLESSD_URL (default http://127.0.0.1:5858), QUEUE
// (greetings), PUT_JOBS (jobs to put first, 5), WORK_SECONDS (time a job takes, 2),
// HEARTBEAT_SECONDS (10), POP_WAIT (seconds a long poll waits, 10), QLESSD_TOKEN (sent
// as a bearer token when set), EXIT_WHEN_IDLE (1: once the queue is empty, that is when
// no job came with the last completion and a long poll then returns none either, print
// `idle, exiting` and exit with status 0; unset, work until Ctrl-C or SIGTERM).

import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";

const env = process.env;
const URL = env.QLESSD_URL ?? "http://127.0.0.1:5858";
const QUEUE = env.QUEUE ?? "greetings";
const PUT_JOBS = Number(env.PUT_JOBS ?? 5);
const WORK_SECONDS = Number(env.WORK_SECONDS ?? 2);
// Well inside the lease (60 s unless the `heartbeat` option says otherwise).
const HEARTBEAT_SECONDS = Number(env.HEARTBEAT_SECONDS ?? 10);
const POP_WAIT = Number(env.POP_WAIT ?? 10);
const EXIT_WHEN_IDLE = env.EXIT_WHEN_IDLE === "1";
// A worker name unique to this process: leases belong to it.
const WORKER = `${hostname()}-${process.pid}`;

/** A qlessd problem document: `code` is stable, `detail` is for humans. */
class ApiError extends Error {
  constructor(status, problem) {
    super(`${status} ${problem.code}: ${problem.detail}`);
    this.status = status;
    this.code = problem.code;
  }
}

/** The work failed for a known reason: a short slug (`no-name`) that names the
 * failure group, `<klass>-<reason>`. */
class JobFailed extends Error {
  constructor(reason, message) {
    super(message);
    this.reason = reason;
  }
}

/** `<klass>-<reason>` for a JobFailed, `<klass>-error` for any other error. */
function failureGroup(klass, err) {
  return `${klass}-${err instanceof JobFailed ? err.reason : "error"}`;
}

/** One API call: JSON in, JSON out, errors thrown as ApiError. */
async function call(method, path, body) {
  const headers = { accept: "application/json" };
  // A write without a body needs no Content-Type.
  if (body !== undefined) headers["content-type"] = "application/json";
  if (env.QLESSD_TOKEN) headers.authorization = `Bearer ${env.QLESSD_TOKEN}`;
  const response = await fetch(URL + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const reply = await response.json();
  if (!response.ok) throw new ApiError(response.status, reply);
  return reply;
}

async function putJobs() {
  // One name is empty, so that one job fails and shows up under /v1/failures.
  const names = ["Ada", "Grace", "Linus", "Barbara", ""];
  for (let i = 0; i < PUT_JOBS; i++) {
    const job = await call("POST", `/v1/queues/${QUEUE}/jobs`, {
      klass: "Greet",
      data: { name: names[i % names.length] },
      retries: 2,
    });
    console.log("put", job.jid);
  }
}

/** The work itself. Throws to fail the job; `lease.signal` aborts when it is lost. */
async function greet(job, lease) {
  const name = job.data.name;
  if (!name) throw new JobFailed("no-name", "no name to greet");
  await sleep(WORK_SECONDS * 1000, undefined, { signal: lease.signal }); // "working"
  return { ...job.data, greeting: `Hello, ${name}!` };
}

/** Renews the lease every HEARTBEAT_SECONDS; aborts `lease` if it is lost. */
function heartbeat(jid, lease) {
  const timer = setInterval(async () => {
    try {
      await call("POST", `/v1/jobs/${jid}/heartbeat`, { worker: WORKER });
      console.log("heartbeat", jid);
    } catch (err) {
      if (["lock_lost", "conflict", "not_found"].includes(err.code)) {
        // Another worker has it now (or it was canceled): stop working on it.
        console.log("lost", jid, err.message);
        lease.abort();
      } else {
        console.log("heartbeat failed, will retry:", err.message);
      }
    }
  }, HEARTBEAT_SECONDS * 1000);
  return () => clearInterval(timer);
}

/** Works one job; returns the jobs leased with its completion (or failure). */
async function work(job, wantNext) {
  const lease = new AbortController();
  const stopBeating = heartbeat(job.jid, lease);
  // Lease the next job in the same request, unless we are stopping.
  const pop = wantNext ? { pop: { count: 1 } } : {};
  let result, failure;
  try {
    result = await greet(job, lease);
  } catch (err) {
    failure = err;
  } finally {
    stopBeating();
  }
  if (lease.signal.aborted) return []; // the job is someone else's now
  if (failure) {
    // Any failure of the work goes to a failure group.
    const group = failureGroup(job.klass, failure);
    const answer = await call("POST", `/v1/jobs/${job.jid}/fail`, {
      worker: WORKER,
      group,
      message: failure.message,
      ...pop,
    });
    console.log("failed", job.jid, `into ${group}:`, failure.message);
    return answer.popped ?? [];
  }
  const answer = await call("POST", `/v1/jobs/${job.jid}/complete`, {
    worker: WORKER,
    queue: job.queue,
    data: result,
    ...pop,
  });
  console.log("completed", job.jid);
  return answer.popped ?? [];
}

async function main() {
  let stopping = false;
  for (const signal of ["SIGINT", "SIGTERM"]) {
    process.on(signal, () => {
      console.log("stopping after the job in hand:", signal);
      stopping = true;
    });
  }

  await putJobs();
  console.log("worker", WORKER, "serving queue", QUEUE);
  let jobs = [];
  while (jobs.length > 0 || !stopping) {
    if (jobs.length === 0) {
      try {
        // Long poll: returns as soon as a job is available, or [] after POP_WAIT.
        jobs = await call("POST", `/v1/queues/${QUEUE}/pop`, {
          worker: WORKER,
          count: 1,
          wait: POP_WAIT,
        });
      } catch (err) {
        console.log("pop failed, retrying in 1 s:", err.message);
        await sleep(1000);
        continue;
      }
      if (jobs.length === 0 && EXIT_WHEN_IDLE) {
        // No job came with the last completion, nor in a whole long poll.
        console.log("idle, exiting");
        return;
      }
      continue;
    }
    // A job leased before the signal is still finished.
    const job = jobs.shift();
    try {
      jobs.push(...(await work(job, jobs.length === 0 && !stopping)));
    } catch (err) {
      console.log("could not finish", job.jid, err.message);
    }
  }
  console.log("stopped");
}

await main();
