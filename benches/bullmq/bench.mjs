// BullMQ's own Node worker and Node HTTP workers on qlessd, side by side: same machine,
// same pass (the systems alternate within each round), the same redis-server flags, a
// fresh redis-server for every run, producer and worker in separate processes with
// `--lanes` concurrent lanes each.
//
//     (cd benches/bullmq && npm install)
//     cargo build --release            # the qlessd measured (or --qlessd <path>)
//     node benches/bullmq/bench.mjs [--jobs 20000] [--warmup 5000] [--rounds 3] [--lanes 50]
//                                   [--qlessd target/release/qlessd] [--qlessd-b <path>]
//                                   [--only a,b] [--client dispatch|fetch|undici|http]
//                                   [--transport tcp|unix|mixed] [--gateway-redis unix|tcp]
//                                   [--pipelining N]
//
// Four runs per round (names for --only), six with `--qlessd-b`:
// * `bullmq`: producer `queue.add` (one job per call), one `Worker` with concurrency
//   = lanes, a handler that does nothing (BullMQ 6 and ioredis, as `package.json`
//   pins them: since BullMQ 6, ioredis is a peer dependency that the user installs);
// * `qlessd`: producer `POST /v1/queues/q/jobs` (one job per request); each worker lane
//   pops one job, then completes each job with `"pop": {"count": 1, "wait": 1}` (the
//   next job comes with the completion: one request per job);
// * `bullmq-bulk`: as `bullmq`, the producer adding bulks of 10 (`addBulk`);
// * `qlessd-batch`: producer `POST /v1/queues/q/jobs/batch` with 10 jobs; each worker
//   lane pops 10, then completes them with one `POST /v1/jobs/complete` carrying
//   `"pop": {"count": 10, "wait": 1}` (one request per 10 jobs);
// * `qlessd-b`, `qlessd-b-batch` (only with `--qlessd-b <path>`): the same two runs with
//   a second qlessd binary, to compare two builds in one sitting. In even rounds the
//   second build runs before the first, so neither always follows the same run. Printed
//   besides: each round's ratio b / a (jobs/s, Redis CPU and gateway CPU per job).
// The HTTP clients (`--client`), one keep-alive connection per lane in each:
// * `dispatch` (the default): undici's callback interface `dispatch`, the one its
//   `request` is built on, collecting the answer's bytes in callbacks: the cheapest
//   client per request, what a worker library would write on its hot path, and what
//   the published figures up to 2026-11-27 used;
// * `fetch`: Node's built-in `fetch` (`await fetch(url, {method, headers, body})`, then
//   `await res.json()`), what most application code writes; over TCP only;
// * `undici`: undici's `request`, which wraps each answer in a stream;
// * `http`: `node:http` with a keep-alive agent; over TCP only.
// With `--pipelining N` (dispatch only), one connection per N lanes, each sending up to
// N requests before the first answer (HTTP/1.1 pipelining; marked idempotent, which
// undici requires before it pipelines a POST).
//
// `--transport` decides how the clients (producer and worker processes) reach their
// server, the same for both systems: `tcp` (the default), loopback TCP, as workers on
// other machines do (BullMQ's clients to Redis, the HTTP clients to qlessd); `unix`,
// Unix sockets, as on one machine (qlessd's `--listen unix:PATH`); `mixed`, how runs
// before 2026-11-27 11:00 UTC measured: HTTP over TCP but BullMQ's clients over a Unix
// socket. `--gateway-redis` is qlessd's own hop to Redis: `unix` (the default), as
// qlessd ships with its embedded Redis; `tcp`, as with a Redis of its own on the
// machine. (The orchestrator's own Redis connections, which count and read
// statistics, use the Unix socket in every case.)
//
// Each run first puts `--warmup` jobs through, untimed (connections open, the clients'
// JIT warm, gateway and Redis past their first requests). The clock starts when the
// warm-up's jobs are all complete and the producer starts on the `--jobs` timed ones,
// and stops when Redis holds every job as complete: the orchestrator counts the
// completed set (`ZCARD`, every 2 ms on one connection), since a worker hears of its
// last completion late when that completion also long-polls for a next job. The
// producer works meanwhile, as in production. CPU per job over the timed part: Redis's
// from `INFO cpu` (user + sys), the gateway's and the two client processes' from /proc.
// Printed: the date and the load average at the start and at the end, each run, then
// the medians per system and the ratios qlessd / BullMQ, of the medians and (steadier
// on a shared machine) each round's, with their median.
// BENCH_TIMELINE=1 prints the completed count every 100 ms.
//
// With BENCH_CALLGRIND=<dir>, each run's redis-server runs under valgrind's callgrind
// (`--hz 1`, so `serverCron` does not follow the slowed-down wall clock): its counts are
// zeroed when the clock starts and dumped when it stops (`<dir>/callgrind.<system>.<round>
// .out.1`), and `INFO commandstats` of the run is printed. Read the dumps with
// `python3 benches/redis_profile.py <dir>/callgrind.*.out.1 --jobs <jobs>` (instructions
// per job split by what Redis was doing). Rates and CPU under valgrind mean nothing, and
// a slowed-down Redis lets the gateway group far more calls than at full speed (compare
// `BENCH_COMMANDSTATS=1` without valgrind); BENCH_CALLGRIND_ARGS adds valgrind options
// (`--cache-sim=yes`). BENCH_QLESSD_ARGS adds arguments to the
// gateway's command line (`--group-calls 1`, say). BENCH_REDIS_CPUS runs redis-server
// on those CPUs only (`taskset -c`; run this script itself under `taskset` on the
// others), so that Redis's CPU time is not inflated by sharing a core with the clients.
//
// Internal roles (this file started again as a child process):
//     node bench.mjs --role <producer|worker> --system <name> --target <socket|url> ...

import { spawn, fork, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";

const HERE = dirname(fileURLToPath(import.meta.url));
const SYSTEMS = ["bullmq", "qlessd", "qlessd-b", "bullmq-bulk", "qlessd-batch", "qlessd-b-batch"];
const CLIENTS = ["dispatch", "fetch", "undici", "http"];
/** A second build's runs (`--qlessd-b`). */
const isB = (system) => system === "qlessd-b" || system === "qlessd-b-batch";
const QUEUE = "bench";
const BULK = 10;

function options(argv) {
  const o = {
    jobs: 20000,
    rounds: 3,
    warmup: 5000,
    lanes: 50,
    qlessd: resolve(HERE, "../../target/release/qlessd"),
    qlessdB: null,
    only: null,
    client: "dispatch",
    transport: "tcp",
    gatewayRedis: "unix",
    pipelining: 1,
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i].replace(/^--/, ""), argv[i + 1]];
    if (k === "only") o.only = v.split(",");
    else if (k === "gateway-redis") o.gatewayRedis = v;
    else if (k === "qlessd-b") o.qlessdB = resolve(v);
    else if (["jobs", "rounds", "lanes", "warmup", "pipelining"].includes(k)) o[k] = Number(v);
    else o[k] = v;
  }
  if (o.role) return o;
  o.only ??= SYSTEMS.filter((s) => o.qlessdB || !isB(s));
  const unknown = o.only.filter((s) => !SYSTEMS.includes(s));
  if (unknown.length) throw new Error(`--only takes ${SYSTEMS.join(",")}, not ${unknown.join(",")}`);
  if (o.only.some(isB) && !o.qlessdB) throw new Error("qlessd-b and qlessd-b-batch need --qlessd-b <path>");
  for (const binary of [o.qlessd, o.qlessdB].filter(Boolean)) {
    if (!existsSync(binary)) throw new Error(`no qlessd binary at ${binary}`);
  }
  if (!CLIENTS.includes(o.client)) throw new Error(`--client ${CLIENTS.join("|")}, not ${o.client}`);
  if (["fetch", "http"].includes(o.client) && o.transport === "unix") {
    throw new Error(`--client ${o.client} speaks TCP only (--transport tcp or mixed)`);
  }
  if (!["tcp", "unix", "mixed"].includes(o.transport)) throw new Error(`--transport tcp|unix|mixed, not ${o.transport}`);
  if (!["tcp", "unix"].includes(o.gatewayRedis)) throw new Error(`--gateway-redis unix|tcp, not ${o.gatewayRedis}`);
  if (!Number.isInteger(o.pipelining) || o.pipelining < 1) throw new Error(`--pipelining takes a whole number of at least 1, not ${o.pipelining}`);
  return o;
}

/** ~100 bytes of JSON data, as in the other benchmarks. */
function payload(i) {
  return {
    user_id: i,
    email: `user-${String(i).padStart(6, "0")}@example.com`,
    plan: "pro",
    note: "welcome mail, retry ok",
  };
}

// ---------------------------------------------------------------------------------
// Roles (child processes). Each sends {ready} once connected, waits for "go", works,
// and sends {done} (the worker once it completed every job).

/**
 * An undici pool of `lanes` connections to `target`: an `http://` origin, or
 * `unix:PATH` for qlessd on a Unix socket.
 */
async function undiciPool(target, lanes, pipelining = 1) {
  const { Pool } = await import("undici");
  const options = { connections: Math.ceil(lanes / pipelining), pipelining };
  return target.startsWith("unix:")
    ? new Pool("http://localhost", { ...options, socketPath: target.slice("unix:".length) })
    : new Pool(target, options);
}

/** An HTTP/1.1 keep-alive client for qlessd: one socket per lane. */
function qlessdClient(base, lanes) {
  if (base.startsWith("unix:")) throw new Error("--client http speaks TCP only");
  const url = new URL(base);
  const agent = new http.Agent({ keepAlive: true, maxSockets: lanes });
  return (method, path, body) =>
    new Promise((resolve, reject) => {
      const text = body === undefined ? "" : JSON.stringify(body);
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method,
          path,
          agent,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) },
        },
        (res) => {
          const chunks = [];
          res.on("data", (c) => chunks.push(c));
          res.on("end", () => {
            const reply = Buffer.concat(chunks).toString();
            if (res.statusCode >= 300) reject(new Error(`${method} ${path}: ${res.statusCode} ${reply}`));
            else resolve(reply ? JSON.parse(reply) : null);
          });
        },
      );
      req.on("error", reject);
      req.end(text);
    });
}

/**
 * The same with undici (the HTTP client behind Node's own `fetch`), one keep-alive
 * connection per lane: a cheaper client per request than `node:http`.
 */
async function undiciClient(base, lanes) {
  const pool = await undiciPool(base, lanes);
  const headers = { "content-type": "application/json" };
  return async (method, path, body) => {
    const text = body === undefined ? "" : JSON.stringify(body);
    const res = await pool.request({ method, path, headers, body: text });
    const reply = await res.body.text();
    if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${reply}`);
    return reply ? JSON.parse(reply) : null;
  };
}

/**
 * The same over undici's `dispatch`, the callback interface its `request` is built on:
 * the response's bytes are collected in callbacks, without a stream object per
 * response (Node's streams cost more CPU per request than the parsing itself). What a
 * worker library would use on its hot path; `--client undici` keeps `request`.
 */
async function dispatchClient(base, lanes, pipelining) {
  const pool = await undiciPool(base, lanes, pipelining);
  const headers = { "content-type": "application/json" };
  return (method, path, body) =>
    new Promise((resolve, reject) => {
      const text = body === undefined ? "" : JSON.stringify(body);
      let status = 0;
      const chunks = [];
      pool.dispatch(
        { method, path, headers, body: text, idempotent: pipelining > 1 },
        {
          onRequestStart() {},
          onResponseStart(_controller, statusCode) {
            status = statusCode;
          },
          onResponseData(_controller, chunk) {
            chunks.push(chunk);
          },
          onResponseEnd() {
            const reply = chunks.length === 1 ? chunks[0].toString() : Buffer.concat(chunks).toString();
            if (status >= 300) reject(new Error(`${method} ${path}: ${status} ${reply}`));
            else resolve(reply ? JSON.parse(reply) : null);
          },
          onResponseError(_controller, err) {
            reject(err);
          },
        },
      );
    });
}

/**
 * The same with Node's built-in `fetch`, written as application code writes it: no
 * dispatcher of its own (Node's global one keeps connections alive and opens as many
 * as there are requests in flight, so one per lane here), the answer read with
 * `res.json()`.
 */
function fetchClient(base) {
  if (base.startsWith("unix:")) throw new Error("--client fetch speaks TCP only");
  const headers = { "content-type": "application/json" };
  return async (method, path, body) => {
    const res = await fetch(`${base}${path}`, { method, headers, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return await res.json();
  };
}

async function role(o) {
  const send = (m) => process.send(m);
  const message = (name) => new Promise((resolve) => process.on("message", (m) => m === name && resolve()));
  const warm = message("warm");
  const go = message("go");
  const lanes = o.lanes;
  const bulk = o.system.endsWith("bulk") || o.system.endsWith("batch") ? BULK : 1;
  const lanesOf = (fn) => Promise.all(Array.from({ length: lanes }, (_, lane) => fn(lane)));

  // The producer puts `o.warmup` jobs when told "warm" and `o.jobs` more on "go", each
  // lane taking the next `bulk` job numbers until the phase's are all taken.
  let next = 0;
  let limit = 0;
  const take = () => {
    const first = next;
    next = Math.min(limit, next + bulk);
    return Array.from({ length: next - first }, (_, k) => first + k);
  };
  const produce = async (put) => {
    const phase = (upTo) => {
      limit = upTo;
      return lanesOf(async () => {
        for (let batch = take(); batch.length > 0; batch = take()) await put(batch);
      });
    };
    send({ ready: true });
    await warm;
    await phase(o.warmup);
    send({ warmed: true });
    await go;
    await phase(o.warmup + o.jobs);
  };
  // Workers run until they are killed: the orchestrator counts completions in Redis.

  if (o.system.startsWith("bullmq")) {
    const { Queue, Worker } = await import("bullmq");
    const connection = o.target.startsWith("redis://")
      ? { host: "127.0.0.1", port: Number(new URL(o.target).port), maxRetriesPerRequest: null }
      : { path: o.target, maxRetriesPerRequest: null };
    if (o.role === "producer") {
      const queue = new Queue(QUEUE, { connection });
      await queue.waitUntilReady();
      await produce((batch) =>
        bulk === 1
          ? queue.add("bench.Job", payload(batch[0]))
          : queue.addBulk(batch.map((i) => ({ name: "bench.Job", data: payload(i) }))),
      );
    } else {
      const worker = new Worker(QUEUE, async () => null, { connection, concurrency: lanes, autorun: false });
      await worker.waitUntilReady();
      send({ ready: true });
      await warm;
      worker.run();
    }
    return;
  }

  const call =
    o.client === "http"
      ? qlessdClient(o.target, lanes)
      : o.client === "fetch"
        ? fetchClient(o.target)
        : o.client === "dispatch"
          ? await dispatchClient(o.target, lanes, o.pipelining)
          : await undiciClient(o.target, lanes);
  if (o.role === "producer") {
    await produce((batch) =>
      bulk === 1
        ? call("POST", `/v1/queues/${QUEUE}/jobs`, { klass: "bench.Job", data: payload(batch[0]) })
        : call("POST", `/v1/queues/${QUEUE}/jobs/batch`, {
            jobs: batch.map((i) => ({ klass: "bench.Job", data: payload(i) })),
          }),
    );
    return;
  }
  // Worker: each lane leases with a long poll, then ends each job (or each 10) with a
  // completion that leases the next ones, long-polling for them when the queue is
  // drained; a lane left with nothing long-polls again.
  const worker = `bench-${process.pid}`;
  const pop = { count: bulk, wait: 1 };
  send({ ready: true });
  await warm;
  lanesOf(async (lane) => {
    const name = `${worker}-${lane}`;
    let held = [];
    for (;;) {
      if (held.length === 0) {
        held = await call("POST", `/v1/queues/${QUEUE}/pop`, { worker: name, ...pop });
      } else if (bulk === 1) {
        const job = held[0];
        const reply = await call("POST", `/v1/jobs/${job.jid}/complete`, { worker: name, queue: job.queue, pop });
        held = reply.popped ?? [];
      } else {
        const reply = await call("POST", "/v1/jobs/complete", {
          jobs: held.map((job) => ({ jid: job.jid, worker: name, queue: job.queue })),
          pop,
        });
        held = reply.popped ?? [];
      }
    }
  }).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

// ---------------------------------------------------------------------------------
// Orchestration.

/** A minimal RESP client for INFO over the Unix socket. */
async function redisInfo(socket, section) {
  return new Promise((resolve, reject) => {
    const conn = net.createConnection(socket);
    let data = "";
    conn.on("data", (chunk) => {
      data += chunk;
      const header = data.indexOf("\r\n");
      if (header < 0) return;
      const length = Number(data.slice(1, header));
      if (Buffer.byteLength(data) >= header + 2 + length) {
        conn.end();
        resolve(data.slice(header + 2, header + 2 + length));
      }
    });
    conn.on("error", reject);
    conn.write(`*2\r\n$4\r\nINFO\r\n$${section.length}\r\n${section}\r\n`);
  });
}

async function redisCpu(socket) {
  const info = await redisInfo(socket, "cpu");
  const field = (name) => Number(info.match(new RegExp(`${name}:([0-9.]+)`))[1]);
  return field("used_cpu_user") + field("used_cpu_sys");
}

/** CPU seconds of a process (user + system, all threads), from /proc. */
function processCpu(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in ticks
}

async function waitFor(what, probe, seconds = 30) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not start`);
    await sleep(20);
  }
}

function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Sends one command over the Unix socket; resolves with the first reply's text. */
async function redisCommand(socket, ...args) {
  return new Promise((resolve, reject) => {
    const conn = net.createConnection(socket);
    let data = "";
    conn.on("data", (chunk) => {
      data += chunk;
      if (data.includes("\r\n")) {
        conn.end();
        resolve(data);
      }
    });
    conn.on("error", reject);
    conn.write(`*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join(""));
  });
}

/** Same flags for every run: the embedded Redis's encodings, no persistence. */
function startRedis(dir, callgrindOut, port = 0) {
  const socket = join(dir, "redis.sock");
  const flags = [
    "--port", String(port), "--bind", "127.0.0.1", "--unixsocket", socket, "--save", "", "--appendonly", "no",
    "--maxmemory-policy", "noeviction",
    "--hash-max-listpack-value", "1024", "--zset-max-listpack-entries", "0",
  ];
  const child = callgrindOut
    ? spawn("valgrind", ["--tool=callgrind", `--callgrind-out-file=${callgrindOut}`,
        ...(process.env.BENCH_CALLGRIND_ARGS ?? "").split(" ").filter(Boolean), "redis-server", ...flags, "--hz", "1"], {
        stdio: "ignore",
      })
    : process.env.BENCH_REDIS_CPUS
      ? spawn("taskset", ["-c", process.env.BENCH_REDIS_CPUS, "redis-server", ...flags], { stdio: "ignore" })
      : spawn("redis-server", flags, { stdio: "ignore" });
  return { child, socket, port };
}

/**
 * A persistent RESP connection that asks `ZCARD key` (the completed jobs: BullMQ and
 * qless both keep them in a sorted set), so the clock stops when Redis has completed
 * the last job rather than when a worker heard of it.
 */
function completedCounter(socket, key) {
  const conn = net.createConnection(socket);
  let pending = null;
  let data = "";
  conn.on("data", (chunk) => {
    data += chunk;
    const end = data.indexOf("\r\n");
    if (end < 0) return;
    const reply = data.slice(0, end);
    data = data.slice(end + 2);
    const done = pending;
    pending = null;
    if (reply[0] === ":") done.resolve(Number(reply.slice(1)));
    else done.reject(new Error(`ZCARD ${key}: ${reply}`));
  });
  const command = `*2\r\n$5\r\nZCARD\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n`;
  return {
    count: () =>
      new Promise((resolve, reject) => {
        pending = { resolve, reject };
        conn.write(command);
      }),
    close: () => conn.end(),
  };
}

/** Resolves once `counter` reaches `target` (polled every 2 ms). */
async function completedReach(counter, target, label) {
  let shown = Date.now();
  for (;;) {
    const n = await counter.count();
    if (n >= target) return;
    if (process.env.BENCH_TIMELINE && Date.now() - shown >= 100) {
      shown = Date.now();
      console.log(`  ${label}: ${n} of ${target} complete`);
    }
    await sleep(2);
  }
}

async function run(o, system, round) {
  const dir = mkdtempSync(join(tmpdir(), "bench-bullmq-"));
  const profile = process.env.BENCH_CALLGRIND;
  const clientsOverTcp = o.transport === "tcp";
  const gatewayOverTcp = o.gatewayRedis === "tcp";
  const redisPort = clientsOverTcp || gatewayOverTcp ? await freePort() : 0;
  const redis = startRedis(dir, profile && join(profile, `callgrind.${system}.${round}.out`), redisPort);
  await waitFor("redis-server", async () => existsSync(redis.socket) && (await redisCpu(redis.socket)) >= 0, 120);
  let gateway;
  // BullMQ's clients: the Redis socket path, or `redis://` over TCP.
  let target = clientsOverTcp ? `redis://127.0.0.1:${redisPort}` : redis.socket;
  if (system.startsWith("qlessd")) {
    const listen = o.transport === "unix" ? `unix:${join(dir, "qlessd.sock")}` : `127.0.0.1:${await freePort()}`;
    target = o.transport === "unix" ? listen : `http://${listen}`;
    const redisUrl = gatewayOverTcp ? `redis://127.0.0.1:${redisPort}` : `unix://${redis.socket}`;
    const extra = (process.env.BENCH_QLESSD_ARGS ?? "").split(" ").filter(Boolean);
    gateway = spawn(isB(system) ? o.qlessdB : o.qlessd, ["--redis-url", redisUrl, "--listen", listen, ...extra], {
      stdio: "ignore",
    });
    const probe = await undiciPool(target, 1);
    await waitFor("qlessd", async () => {
      const res = await probe.request({ method: "GET", path: "/readyz" });
      await res.body.text();
      return res.statusCode === 200;
    });
    await probe.close();
  }
  // (The gateway's keys: `ql:` or, with `--namespace NS` in BENCH_QLESSD_ARGS, `ql:{NS}:`.)
  const extraArgs = (process.env.BENCH_QLESSD_ARGS ?? "").split(" ");
  const namespace = extraArgs[extraArgs.indexOf("--namespace") + 1];
  const prefix = extraArgs.includes("--namespace") ? `ql:{${namespace}}:` : "ql:";
  const counter = completedCounter(redis.socket, system.startsWith("qlessd") ? `${prefix}completed` : `bull:${QUEUE}:completed`);
  if (gateway) {
    // qless keeps the newest 50,000 completed jobs by default; keep them all, as BullMQ
    // does, so that the count of completed jobs is the count of jobs completed.
    await redisCommand(redis.socket, "HSET", `${prefix}config`, "jobs-history-count", String(o.warmup + o.jobs + 1));
  }
  const args = ["--system", system, "--target", target, "--jobs", String(o.jobs), "--lanes", String(o.lanes),
    "--client", o.client, "--warmup", String(o.warmup), "--pipelining", String(o.pipelining)];
  const child = (r) => fork(fileURLToPath(import.meta.url), ["--role", r, ...args], { stdio: "inherit" });
  const worker = child("worker");
  const producer = child("producer");
  let failed;
  const failure = new Promise((_, reject) => (failed = reject));
  failure.catch(() => {});
  const message = (proc, key) =>
    Promise.race([failure, new Promise((resolve) => proc.on("message", (m) => m[key] && resolve(m)))]);
  for (const proc of [worker, producer]) {
    proc.on("exit", (code, signal) => signal !== "SIGKILL" && failed(new Error(`${system} child exited ${code}`)));
  }
  await Promise.all([message(worker, "ready"), message(producer, "ready")]);
  worker.send("warm");
  producer.send("warm");
  await message(producer, "warmed");
  await Promise.race([failure, completedReach(counter, o.warmup, `${system} warm-up`)]);

  const stats = profile || process.env.BENCH_COMMANDSTATS;
  if (stats) await redisCommand(redis.socket, "CONFIG", "RESETSTAT");
  if (profile) {
    execFileSync("callgrind_control", ["-z", String(redis.child.pid)], { stdio: "ignore" });
  }
  const clientsCpu = () => processCpu(worker.pid) + processCpu(producer.pid);
  const cpu0 = await redisCpu(redis.socket);
  const gw0 = gateway ? processCpu(gateway.pid) : 0;
  const clients0 = clientsCpu();
  const t0 = process.hrtime.bigint();
  producer.send("go");
  await Promise.race([failure, completedReach(counter, o.warmup + o.jobs, system)]);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const clients1 = clientsCpu();
  const cpu1 = await redisCpu(redis.socket);
  const gw1 = gateway ? processCpu(gateway.pid) : 0;
  counter.close();
  if (profile) execFileSync("callgrind_control", ["-d", String(redis.child.pid)], { stdio: "ignore" });
  if (stats) {
    const text = await redisInfo(redis.socket, "commandstats");
    console.log(`commandstats, ${system} round ${round}:\n${text.trim()}`);
    const cpu = await redisInfo(redis.socket, "cpu");
    const field = (name) => Number(cpu.match(new RegExp(`${name}:([0-9.]+)`))[1]);
    if (gateway) {
      // Script calls by command, group sizes and requests by route: what Redis ran.
      const pool = await undiciPool(target, 1);
      const metrics = await (await pool.request({ method: "GET", path: "/metrics" })).body.text();
      await pool.close();
      for (const line of metrics.split("\n")) {
        if (/^(qless_redis_call_duration_seconds_(count|sum)|qless_redis_group_size_(count|sum)|http_server_request_duration_seconds_(count|sum))/.test(line)) {
          console.log(`  ${line}`);
        }
      }
    }
    const status = readFileSync(`/proc/${redis.child.pid}/status`, "utf8");
    const switches = (k) => Number(status.match(new RegExp(`${k}:\\s+(\\d+)`))[1]);
    console.log(
      `redis since start: cpu user ${field("used_cpu_user")} s, sys ${field("used_cpu_sys")} s; ` +
        `context switches voluntary ${switches("voluntary_ctxt_switches")}, ` +
        `involuntary ${switches("nonvoluntary_ctxt_switches")}`,
    );
  }
  for (const p of [worker, producer, gateway, redis.child]) p?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
  return {
    system,
    rate: o.jobs / seconds,
    redisUs: ((cpu1 - cpu0) * 1e6) / o.jobs,
    gatewayUs: gateway ? ((gw1 - gw0) * 1e6) / o.jobs : NaN,
    clientsUs: ((clients1 - clients0) * 1e6) / o.jobs,
  };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : "-");

/** When and how busy: the date (UTC) and the load averages over 1, 5 and 15 minutes. */
const conditions = () =>
  `${new Date().toISOString().slice(0, 19)}Z, load average ${loadavg().map((x) => x.toFixed(2)).join(", ")}`;

/**
 * The round's order: `systems` as given, except that in even rounds each second-build
 * run swaps places with the first build's run of the same kind (`qlessd-b` before
 * `qlessd`), so that neither build always runs right after the same system.
 */
function order(systems, round) {
  if (round % 2 === 1) return systems;
  const swapped = [...systems];
  for (const [a, b] of [["qlessd", "qlessd-b"], ["qlessd-batch", "qlessd-b-batch"]]) {
    const [i, j] = [swapped.indexOf(a), swapped.indexOf(b)];
    if (i >= 0 && j >= 0) [swapped[i], swapped[j]] = [swapped[j], swapped[i]];
  }
  return swapped;
}

async function main() {
  const o = options(process.argv.slice(2));
  if (o.role) return role(o);
  const systems = SYSTEMS.filter((s) => o.only.includes(s));
  console.log(
    `BullMQ vs qlessd: ${o.jobs} jobs timed after ${o.warmup} untimed, ${o.lanes} lanes, ${o.rounds} rounds, ` +
      `clients over ${o.transport} (${o.client} HTTP client), qlessd to Redis over ${o.gatewayRedis}, qlessd ${o.qlessd}` +
      (o.qlessdB ? `, qlessd-b ${o.qlessdB}` : ""),
  );
  console.log(`start: ${conditions()}`);
  const results = Object.fromEntries(systems.map((s) => [s, []]));
  for (let round = 1; round <= o.rounds; round++) {
    for (const system of order(systems, round)) {
      const r = await run(o, system, round);
      results[system].push(r);
      console.log(
        `round ${round} ${system.padEnd(14)} ${fmt(r.rate).padStart(7)} jobs/s  ` +
          `redis ${fmt(r.redisUs, 1).padStart(6)} us/job  gateway ${fmt(r.gatewayUs, 1).padStart(6)} us/job  ` +
          `clients ${fmt(r.clientsUs, 1).padStart(6)} us/job`,
      );
    }
  }
  console.log(`end: ${conditions()}`);
  console.log(
    "\nmedians               jobs/s   redis us/job  gateway us/job  clients us/job   x BullMQ jobs/s   x BullMQ redis CPU",
  );
  const med = {};
  for (const s of systems) {
    med[s] = {
      rate: median(results[s].map((r) => r.rate)),
      redisUs: median(results[s].map((r) => r.redisUs)),
      gatewayUs: median(results[s].map((r) => r.gatewayUs)),
      clientsUs: median(results[s].map((r) => r.clientsUs)),
    };
  }
  const base = {
    bullmq: "bullmq",
    qlessd: "bullmq",
    "qlessd-b": "bullmq",
    "bullmq-bulk": "bullmq-bulk",
    "qlessd-batch": "bullmq-bulk",
    "qlessd-b-batch": "bullmq-bulk",
  };
  for (const s of systems) {
    const b = med[base[s]];
    const m = med[s];
    console.log(
      `${s.padEnd(18)} ${fmt(m.rate).padStart(9)} ${fmt(m.redisUs, 1).padStart(14)} ${fmt(m.gatewayUs, 1).padStart(15)} ${fmt(m.clientsUs, 1).padStart(15)}` +
        `   ${b ? fmt(m.rate / b.rate, 2).padStart(15) : "-"}   ${b ? fmt(m.redisUs / b.redisUs, 2).padStart(17) : "-"}`,
    );
  }
  if (med["qlessd-batch"] && med.bullmq) {
    console.log(
      `qlessd-batch vs bullmq (single adds): ${fmt(med["qlessd-batch"].rate / med.bullmq.rate, 2)}x jobs/s, ` +
        `${fmt(med["qlessd-batch"].redisUs / med.bullmq.redisUs, 2)}x Redis CPU per job`,
    );
  }
  // The ratio of each round's two runs, taken minutes apart at most: on a shared
  // machine whose speed drifts, steadier than the ratio of medians taken over the
  // whole pass.
  const perRound = (s, other, key) => {
    const ratios = results[s].map((r, i) => r[key] / results[other][i]?.[key]).filter(Number.isFinite);
    const sorted = [...ratios].sort((a, b) => a - b);
    return ratios.length
      ? `${fmt(median(ratios), 2)} (${fmt(sorted[0], 2)}-${fmt(sorted[sorted.length - 1], 2)})`
      : "-";
  };
  const compared = systems.filter((s) => s.startsWith("qlessd") && results[base[s]]);
  if (compared.length) {
    console.log("\nper round, median (min-max)   x BullMQ jobs/s      x BullMQ redis CPU");
    for (const s of compared) {
      console.log(
        `${s.padEnd(28)} ${perRound(s, base[s], "rate").padStart(17)}   ${perRound(s, base[s], "redisUs").padStart(20)}`,
      );
    }
  }
  // Two builds side by side: b / a of each round's runs of the same kind.
  const pairs = [["qlessd-b", "qlessd"], ["qlessd-b-batch", "qlessd-batch"]].filter(
    ([b, a]) => results[b] && results[a],
  );
  if (pairs.length) {
    console.log(`\nb / a per round, median (min-max)   jobs/s   redis CPU per job   gateway CPU per job`);
    console.log(`(a: ${o.qlessd}; b: ${o.qlessdB})`);
    for (const [b, a] of pairs) {
      console.log(
        `${`${b} / ${a}`.padEnd(30)} ${perRound(b, a, "rate").padStart(17)}   ${perRound(b, a, "redisUs").padStart(17)}` +
          `   ${perRound(b, a, "gatewayUs").padStart(19)}`,
      );
    }
  }
}

await main();
