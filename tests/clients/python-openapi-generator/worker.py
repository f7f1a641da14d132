"""A worker written against the Python client that openapi-generator's `python`
generator makes from openapi/openapi.json on its default settings (package
`openapi_client`; tests/process/clients.rs puts it on PYTHONPATH and runs this). It walks
a job's life through the generated API and prints one line per step; any surprise
exits non-zero.
"""

import os

import openapi_client
from openapi_client import (
    AddJobDependenciesRequest,
    CompleteJobRequest,
    FailJobRequest,
    HeartbeatJobRequest,
    JobState,
    JobTagsRequest,
    PopJobsRequest,
    PopNext,
    PutJobRequest,
    UnfailRequest,
)
from openapi_client.exceptions import ApiException

QUEUE = os.environ.get("QUEUE", "python")
WORKER = "python-worker"


def say(*words):
    print(*words, flush=True)


def expect(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def problem_of(call, *args, **kwargs):
    """The status and problem of a request that must fail."""
    try:
        call(*args, **kwargs)
    except ApiException as err:
        return err.status, err.data
    raise AssertionError("the request succeeded")


def main():
    configuration = openapi_client.Configuration(host=os.environ["QLESSD_URL"])
    with openapi_client.ApiClient(configuration) as client:
        queues = openapi_client.QueuesApi(client)
        jobs = openapi_client.JobsApi(client)
        failures = openapi_client.FailuresApi(client)

        def put(klass, depends=None):
            request = PutJobRequest(klass=klass, data={"name": "Ada"}, depends=depends)
            return queues.put_job(QUEUE, request).jid

        # An empty queue: the long poll waits, then answers an empty list.
        popped = queues.pop_jobs(QUEUE, PopJobsRequest(worker=WORKER, wait=0.2))
        expect(popped, [], "pop of an empty queue")
        say("waited")

        first = put("Greet")
        say("put", first)
        popped = queues.pop_jobs(QUEUE, PopJobsRequest(worker=WORKER, wait=1))
        expect([job.jid for job in popped], [first], "popped jids")
        expect(popped[0].state, JobState.RUNNING, "popped state")
        expect(popped[0].history[0].q, QUEUE, "put entry's queue")
        expect(popped[0].history[1].worker, WORKER, "popped entry's worker")
        say("popped", first)

        beat = jobs.heartbeat_job(first, HeartbeatJobRequest(worker=WORKER))
        expect(beat.expires, jobs.get_job(first).expires, "heartbeat's expires")
        say("heartbeat", first)

        second = put("Greet")
        done = jobs.complete_job(
            first, CompleteJobRequest(worker=WORKER, queue=QUEUE, pop=PopNext(count=1))
        )
        expect(done.state, JobState.COMPLETE, "completed state")
        expect([job.jid for job in done.popped], [second], "jids popped by the completion")
        say("completed", first, "popped", second)

        group = "Greet-NameError"
        failed = jobs.fail_job(
            second, FailJobRequest(worker=WORKER, group=group, message="no name")
        )
        expect(failed.state, JobState.FAILED, "failed state")
        say("failed", second)

        expect(failures.list_failure_groups(), {group: 1}, "failure groups")
        expect(failures.list_failed_jobs(group).jids, [second], "failed jobs")
        expect(jobs.get_job(second).history[-1].group, group, "failed entry's group")
        say("failures", group)

        moved = failures.unfail_jobs(group, UnfailRequest(queue=QUEUE))
        expect(moved.moved, 1, "unfailed jobs")
        say("unfailed", second)

        tags = jobs.add_job_tags(second, JobTagsRequest(tags=["urgent"]))
        expect(tags.tags, ["urgent"], "tags after adding")
        tags = jobs.remove_job_tags(second, ["urgent"])
        expect(tags.tags, [], "tags after removing")
        say("tagged", second)

        prerequisite = put("Prepare")
        dependent = put("Greet", [prerequisite])
        extra = put("Prepare")
        jobs.add_job_dependencies(dependent, AddJobDependenciesRequest(depends=[extra]))
        expect(len(jobs.get_job(dependent).dependencies), 2, "dependencies")
        jobs.remove_job_dependencies(dependent, dependency=[extra])
        expect(
            jobs.get_job(dependent).dependencies, [prerequisite], "dependencies after removing"
        )
        say("dependencies", dependent)

        queues.pause_queue(QUEUE)
        expect(queues.get_queue(QUEUE).paused, True, "paused")
        queues.unpause_queue(QUEUE)
        expect(queues.get_queue(QUEUE).paused, False, "paused after unpausing")
        say("paused", QUEUE)

        jobs.cancel_job(dependent)
        status, missing = problem_of(jobs.get_job, dependent)
        expect((status, missing.code), (404, "not_found"), "a canceled job")
        say("canceled", dependent)

        # The second job waits again (unfailed): a heartbeat is a conflict.
        status, conflict = problem_of(
            jobs.heartbeat_job, second, HeartbeatJobRequest(worker=WORKER)
        )
        expect((status, conflict.status, conflict.code), (409, 409, "conflict"), "a conflict")
        say("conflict", conflict.code)
        say("done")


if __name__ == "__main__":
    main()
