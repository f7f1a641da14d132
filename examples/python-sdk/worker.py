#!/usr/bin/env python3
"""The same worker as examples/python, on a client generated from qlessd's OpenAPI
document: typed requests and responses, one function per operation. Like it, it
leases its next job with each completion (`pop`) and long-polls only when idle.

Generate the client once (from the repository root), then run the worker:

    pip install openapi-python-client
    openapi-python-client generate --path openapi/openapi.json \\
        --output-path examples/python-sdk/qlessd-client
    python3 examples/python-sdk/worker.py

The generated package (qlessd_client) needs httpx and attrs, which
openapi-python-client installs. A job whose work fails goes to the failure group
`<klass>-<reason>`, as in every example: the work names a short reason (`Greet-no-name`
for the job without a name), and an unexpected error falls into `<klass>-error`.

Settings (environment) as in examples/python: QLESSD_URL, QUEUE, PUT_JOBS,
WORK_SECONDS, HEARTBEAT_SECONDS, POP_WAIT, QLESSD_TOKEN, and EXIT_WHEN_IDLE (1: once
the queue is empty, that is when no job came with the last completion and a long poll
then returns none either, print `idle, exiting` and exit with status 0; unset, work
until Ctrl-C or SIGTERM).
"""

import json
import os
import signal
import socket
import sys
import threading

# The generated client lives next to this file unless it was installed with pip.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "qlessd-client"))

import httpx  # noqa: E402
from qlessd_client import AuthenticatedClient, Client  # noqa: E402
from qlessd_client.api.jobs import complete_job, fail_job, heartbeat_job  # noqa: E402
from qlessd_client.api.queues import pop_jobs, put_job  # noqa: E402
from qlessd_client.models import (  # noqa: E402
    CompleteJobRequest,
    FailJobRequest,
    HeartbeatJobRequest,
    PopJobsRequest,
    PopNext,
    PutJobRequest,
)
from qlessd_client.types import UNSET  # noqa: E402

URL = os.environ.get("QLESSD_URL", "http://127.0.0.1:5858")
QUEUE = os.environ.get("QUEUE", "greetings")
PUT_JOBS = int(os.environ.get("PUT_JOBS", "5"))
WORK_SECONDS = float(os.environ.get("WORK_SECONDS", "2"))
HEARTBEAT_SECONDS = float(os.environ.get("HEARTBEAT_SECONDS", "10"))
POP_WAIT = float(os.environ.get("POP_WAIT", "10"))
EXIT_WHEN_IDLE = os.environ.get("EXIT_WHEN_IDLE") == "1"
WORKER = f"{socket.gethostname()}-{os.getpid()}"


class ApiError(Exception):
    """A qlessd problem document: `code` is stable."""

    def __init__(self, response):
        problem = json.loads(response.content or b"{}")
        super().__init__(f"{response.status_code} {problem.get('code')}: {problem.get('detail')}")
        self.code = problem.get("code")


class JobFailed(Exception):
    """The work failed for a known reason: a short slug (`no-name`) that names the
    failure group, `<klass>-<reason>`."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason


def failure_group(klass, err):
    """`<klass>-<reason>` for a JobFailed, `<klass>-error` for any other error."""
    return f"{klass}-{err.reason if isinstance(err, JobFailed) else 'error'}"


def ok(response):
    """The parsed body of a success; a problem raised as ApiError."""
    if response.status_code >= 300:
        raise ApiError(response)
    return response.parsed


def say(*words):
    print(*words, flush=True)


def greet(job, lost):
    """The work itself. Raises to fail the job; returns early if the lease is lost."""
    name = job.data.get("name")
    if not name:
        raise JobFailed("no-name", "no name to greet")
    if lost.wait(WORK_SECONDS):  # "working", unless the lease goes first
        return None
    return {**job.data, "greeting": f"Hello, {name}!"}


def heartbeat(client, jid, done, lost):
    """Renew the lease every HEARTBEAT_SECONDS until the work is done."""
    while not done.wait(HEARTBEAT_SECONDS):
        try:
            ok(heartbeat_job.sync_detailed(jid, client=client, body=HeartbeatJobRequest(worker=WORKER)))
            say("heartbeat", jid)
        except ApiError as err:
            if err.code in ("lock_lost", "conflict", "not_found"):
                say("lost", jid, err)  # someone else has it now: stop working on it
                lost.set()
                return
            say("heartbeat failed, will retry:", err)


def work(client, job, want_next):
    """Works one job; returns the jobs leased with its completion (or failure)."""
    # Lease the next job in the same request, unless we are stopping.
    pop = PopNext(count=1) if want_next else UNSET
    done, lost = threading.Event(), threading.Event()
    beat = threading.Thread(target=heartbeat, args=(client, job.jid, done, lost))
    beat.start()
    try:
        result, failure = greet(job, lost), None
    except Exception as err:  # any failure of the work goes to a failure group
        result, failure = None, err
    finally:
        done.set()
        beat.join()
    if lost.is_set():
        return []
    if failure is not None:
        group = failure_group(job.klass, failure)
        request = FailJobRequest(worker=WORKER, group=group, message=str(failure), pop=pop)
        answer = ok(fail_job.sync_detailed(job.jid, client=client, body=request))
        say("failed", job.jid, "into", group + ":", failure)
    else:
        request = CompleteJobRequest(worker=WORKER, queue=job.queue, data=result, pop=pop)
        answer = ok(complete_job.sync_detailed(job.jid, client=client, body=request))
        say("completed", job.jid)
    return list(answer.popped) if answer.popped else []


def main():
    stopping = threading.Event()

    def stop(signum, _frame):
        say("stopping after the job in hand:", signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    # The timeout must outlast a long poll.
    timeout = httpx.Timeout(POP_WAIT + 30)
    token = os.environ.get("QLESSD_TOKEN")
    client = (AuthenticatedClient(base_url=URL, token=token, timeout=timeout) if token
              else Client(base_url=URL, timeout=timeout))
    with client:
        names = ["Ada", "Grace", "Linus", "Barbara", ""]
        for i in range(PUT_JOBS):
            body = PutJobRequest(klass="Greet", data={"name": names[i % len(names)]}, retries=2)
            say("put", ok(put_job.sync_detailed(QUEUE, client=client, body=body)).jid)
        say("worker", WORKER, "serving queue", QUEUE)
        jobs = []
        while jobs or not stopping.is_set():
            if not jobs:
                request = PopJobsRequest(worker=WORKER, count=1, wait=POP_WAIT)
                try:
                    jobs = ok(pop_jobs.sync_detailed(QUEUE, client=client, body=request))
                except (ApiError, httpx.HTTPError) as err:
                    say("pop failed, retrying in 1 s:", err)
                    stopping.wait(1)
                    continue
                if not jobs and EXIT_WHEN_IDLE:
                    # No job came with the last completion, nor in a whole long poll.
                    say("idle, exiting")
                    return
                continue
            job = jobs.pop(0)  # a job leased before the signal is still finished
            try:
                jobs += work(client, job, want_next=not jobs and not stopping.is_set())
            except (ApiError, httpx.HTTPError) as err:
                say("could not finish", job.jid, err)
    say("stopped")


if __name__ == "__main__":
    main()
