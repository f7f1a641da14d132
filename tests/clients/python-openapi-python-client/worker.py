"""A worker written against the Python client that `openapi-python-client` makes from
openapi/openapi.json on its default settings (package `qlessd_client`;
tests/process/clients.rs puts it on PYTHONPATH and runs this). It walks a job's life
through the generated API and prints one line per step; any surprise exits non-zero.
"""

import os

from qlessd_client import Client
from qlessd_client.api.failures import list_failed_jobs, list_failure_groups, unfail_jobs
from qlessd_client.api.jobs import (
    add_job_dependencies,
    add_job_tags,
    cancel_job,
    complete_job,
    fail_job,
    get_job,
    heartbeat_job,
    remove_job_dependencies,
    remove_job_tags,
)
from qlessd_client.api.queues import get_queue, pause_queue, pop_jobs, put_job, unpause_queue
from qlessd_client.models import (
    AddJobDependenciesRequest,
    CompleteJobRequest,
    FailJobRequest,
    HeartbeatJobRequest,
    JobState,
    JobTagsRequest,
    PopJobsRequest,
    PopNext,
    Problem,
    PutJobRequest,
    UnfailRequest,
)
from qlessd_client.types import UNSET

QUEUE = os.environ.get("QUEUE", "python")
WORKER = "python-client-worker"


def say(*words):
    print(*words, flush=True)


def expect(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def ok(response):
    """The parsed answer of a request that must succeed."""
    if response.status_code >= 300:
        raise AssertionError(f"{response.status_code}: {response.content!r}")
    return response.parsed


def main():
    client = Client(base_url=os.environ["QLESSD_URL"], raise_on_unexpected_status=True)

    def put(klass, depends=UNSET):
        body = PutJobRequest(klass=klass, data={"name": "Ada"}, depends=depends)
        return ok(put_job.sync_detailed(QUEUE, client=client, body=body)).jid

    # An empty queue: the long poll waits, then answers an empty list.
    popped = ok(pop_jobs.sync_detailed(QUEUE, client=client, body=PopJobsRequest(worker=WORKER, wait=0.2)))
    expect(popped, [], "pop of an empty queue")
    say("waited")

    first = put("Greet")
    say("put", first)
    popped = ok(pop_jobs.sync_detailed(QUEUE, client=client, body=PopJobsRequest(worker=WORKER, wait=1)))
    expect([job.jid for job in popped], [first], "popped jids")
    expect(popped[0].state, JobState.RUNNING, "popped state")
    expect(popped[0].history[0].q, QUEUE, "put entry's queue")
    expect(popped[0].history[1].worker, WORKER, "popped entry's worker")
    say("popped", first)

    beat = ok(heartbeat_job.sync_detailed(first, client=client, body=HeartbeatJobRequest(worker=WORKER)))
    expect(beat.expires, ok(get_job.sync_detailed(first, client=client)).expires, "heartbeat's expires")
    say("heartbeat", first)

    second = put("Greet")
    body = CompleteJobRequest(worker=WORKER, queue=QUEUE, pop=PopNext(count=1))
    done = ok(complete_job.sync_detailed(first, client=client, body=body))
    expect(done.state, JobState.COMPLETE, "completed state")
    expect([job.jid for job in done.popped], [second], "jids popped by the completion")
    say("completed", first, "popped", second)

    group = "Greet-NameError"
    body = FailJobRequest(worker=WORKER, group=group, message="no name")
    failed = ok(fail_job.sync_detailed(second, client=client, body=body))
    expect(failed.state, JobState.FAILED, "failed state")
    say("failed", second)

    groups = ok(list_failure_groups.sync_detailed(client=client))
    expect(groups.to_dict(), {group: 1}, "failure groups")
    expect(ok(list_failed_jobs.sync_detailed(group, client=client)).jids, [second], "failed jobs")
    history = ok(get_job.sync_detailed(second, client=client)).history
    expect(history[-1].group, group, "failed entry's group")
    say("failures", group)

    moved = ok(unfail_jobs.sync_detailed(group, client=client, body=UnfailRequest(queue=QUEUE)))
    expect(moved.moved, 1, "unfailed jobs")
    say("unfailed", second)

    tags = ok(add_job_tags.sync_detailed(second, client=client, body=JobTagsRequest(tags=["urgent"])))
    expect(tags.tags, ["urgent"], "tags after adding")
    tags = ok(remove_job_tags.sync_detailed(second, client=client, tag=["urgent"]))
    expect(tags.tags, [], "tags after removing")
    say("tagged", second)

    prerequisite = put("Prepare")
    dependent = put("Greet", [prerequisite])
    extra = put("Prepare")
    body = AddJobDependenciesRequest(depends=[extra])
    ok(add_job_dependencies.sync_detailed(dependent, client=client, body=body))
    expect(len(ok(get_job.sync_detailed(dependent, client=client)).dependencies), 2, "dependencies")
    ok(remove_job_dependencies.sync_detailed(dependent, client=client, dependency=[extra]))
    expect(
        ok(get_job.sync_detailed(dependent, client=client)).dependencies,
        [prerequisite],
        "dependencies after removing",
    )
    say("dependencies", dependent)

    ok(pause_queue.sync_detailed(QUEUE, client=client))
    expect(ok(get_queue.sync_detailed(QUEUE, client=client)).paused, True, "paused")
    ok(unpause_queue.sync_detailed(QUEUE, client=client))
    expect(ok(get_queue.sync_detailed(QUEUE, client=client)).paused, False, "paused after unpausing")
    say("paused", QUEUE)

    ok(cancel_job.sync_detailed(dependent, client=client))
    missing = get_job.sync_detailed(dependent, client=client)
    expect(isinstance(missing.parsed, Problem), True, "a problem for a canceled job")
    expect((missing.status_code, missing.parsed.code), (404, "not_found"), "a canceled job")
    say("canceled", dependent)

    # The second job waits again (unfailed): a heartbeat is a conflict.
    answer = heartbeat_job.sync_detailed(second, client=client, body=HeartbeatJobRequest(worker=WORKER))
    conflict = answer.parsed
    expect(isinstance(conflict, Problem), True, "a problem for a conflict")
    expect((answer.status_code, conflict.status, conflict.code), (409, 409, "conflict"), "a conflict")
    say("conflict", conflict.code)
    say("done")


if __name__ == "__main__":
    main()
