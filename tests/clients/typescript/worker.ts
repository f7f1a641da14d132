// A worker written against the TypeScript client that openapi-generator's
// `typescript-fetch` generator makes from openapi/openapi.json on its default settings
// (tests/process/clients.rs compiles it with `tsc` and runs it with Node 18+, whose
// global `fetch` the client uses). It walks a job's life through the generated API and
// prints one line per step; any surprise exits non-zero.

import {
  Configuration,
  FailuresApi,
  JobState,
  JobsApi,
  ProblemFromJSON,
  QueuesApi,
  ResponseError,
} from "./client";
import type { Problem } from "./client";

// The two Node globals used here, declared rather than pulling in @types/node.
declare const process: {
  env: Record<string, string | undefined>;
  exit(code: number): never;
};

const configuration = new Configuration({ basePath: process.env.QLESSD_URL });
const queues = new QueuesApi(configuration);
const jobs = new JobsApi(configuration);
const failures = new FailuresApi(configuration);
const queue = process.env.QUEUE ?? "typescript";
const worker = "typescript-worker";

function say(...words: unknown[]): void {
  console.log(words.join(" "));
}

function expect(got: unknown, want: unknown, what: string): void {
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

// The status and problem of a request that must fail.
async function problemOf(request: Promise<unknown>): Promise<[number, Problem]> {
  try {
    await request;
  } catch (err) {
    if (err instanceof ResponseError) {
      return [err.response.status, ProblemFromJSON(await err.response.json())];
    }
    throw err;
  }
  throw new Error("the request succeeded");
}

async function put(klass: string, depends?: string[]): Promise<string> {
  const answer = await queues.putJob({
    queue,
    putJobRequest: { klass, data: { name: "Ada" }, depends },
  });
  return answer.jid;
}

async function main(): Promise<void> {
  // An empty queue: the long poll waits, then answers an empty list.
  let popped = await queues.popJobs({ queue, popJobsRequest: { worker, wait: 0.2 } });
  expect(popped.length, 0, "pop of an empty queue");
  say("waited");

  const first = await put("Greet");
  say("put", first);
  popped = await queues.popJobs({ queue, popJobsRequest: { worker, wait: 1 } });
  expect(popped.map((job) => job.jid), [first], "popped jids");
  expect(popped[0].state, JobState.Running, "popped state");
  expect(popped[0].history[0].q, queue, "put entry's queue");
  expect(popped[0].history[1].worker, worker, "popped entry's worker");
  say("popped", first);

  const beat = await jobs.heartbeatJob({ jid: first, heartbeatJobRequest: { worker } });
  expect(beat.expires, (await jobs.getJob({ jid: first })).expires, "heartbeat's expires");
  say("heartbeat", first);

  const second = await put("Greet");
  const done = await jobs.completeJob({
    jid: first,
    completeJobRequest: { worker, queue, pop: { count: 1 } },
  });
  expect(done.state, JobState.Complete, "completed state");
  expect(done.popped?.map((job) => job.jid), [second], "jids popped by the completion");
  say("completed", first, "popped", second);

  const group = "Greet-NameError";
  const failed = await jobs.failJob({
    jid: second,
    failJobRequest: { worker, group, message: "no name" },
  });
  expect(failed.state, JobState.Failed, "failed state");
  say("failed", second);

  expect(await failures.listFailureGroups(), { [group]: 1 }, "failure groups");
  expect((await failures.listFailedJobs({ group })).jids, [second], "failed jobs");
  const history = (await jobs.getJob({ jid: second })).history;
  expect(history[history.length - 1].group, group, "failed entry's group");
  say("failures", group);

  const moved = await failures.unfailJobs({ group, unfailRequest: { queue } });
  expect(moved.moved, 1, "unfailed jobs");
  say("unfailed", second);

  let tags = await jobs.addJobTags({ jid: second, jobTagsRequest: { tags: ["urgent"] } });
  expect(tags.tags, ["urgent"], "tags after adding");
  tags = await jobs.removeJobTags({ jid: second, tag: ["urgent"] });
  expect(tags.tags, [], "tags after removing");
  say("tagged", second);

  const prerequisite = await put("Prepare");
  const dependent = await put("Greet", [prerequisite]);
  const extra = await put("Prepare");
  await jobs.addJobDependencies({
    jid: dependent,
    addJobDependenciesRequest: { depends: [extra] },
  });
  expect((await jobs.getJob({ jid: dependent })).dependencies.length, 2, "dependencies");
  await jobs.removeJobDependencies({ jid: dependent, dependency: [extra] });
  expect(
    (await jobs.getJob({ jid: dependent })).dependencies,
    [prerequisite],
    "dependencies after removing",
  );
  say("dependencies", dependent);

  await queues.pauseQueue({ queue });
  expect((await queues.getQueue({ queue })).paused, true, "paused");
  await queues.unpauseQueue({ queue });
  expect((await queues.getQueue({ queue })).paused, false, "paused after unpausing");
  say("paused", queue);

  await jobs.cancelJob({ jid: dependent });
  const [gone, missing] = await problemOf(jobs.getJob({ jid: dependent }));
  expect([gone, missing.code], [404, "not_found"], "a canceled job");
  say("canceled", dependent);

  // The second job waits again (unfailed): a heartbeat is a conflict.
  const [status, conflict] = await problemOf(
    jobs.heartbeatJob({ jid: second, heartbeatJobRequest: { worker } }),
  );
  expect([status, conflict.status, conflict.code], [409, 409, "conflict"], "a conflict");
  say("conflict", conflict.code);
  say("done");
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
