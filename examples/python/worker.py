#!/usr/bin/env python3
"""A complete qlessd worker in Python, standard library only.

It puts a few jobs, then works: lease jobs with a long poll, heartbeat while working,
complete or fail each one, and stop gracefully on Ctrl-C or SIGTERM (finishing the
job in hand, never abandoning a lease). Completing (or failing) a job also leases the
next one in the same request (`"pop"`), so a busy worker makes one request per job;
only when that finds the queue empty does it long-poll. Run it against a qlessd on localhost:

    python3 examples/python/worker.py

A job whose work fails goes to the failure group `<klass>-<reason>`: the work names a
short reason (`Greet-no-name` for the job without a name), and an unexpected error
falls into `<klass>-error`. The same rule holds in every example.

Settings (environment): QLESSD_URL (default http://127.0.0.1:5858), QUEUE
(greetings), PUT_JOBS (jobs to put first, 5), WORK_SECONDS (time a job takes, 2),
HEARTBEAT_SECONDS (10), POP_WAIT (seconds a long poll waits, 10), QLESSD_TOKEN (sent
as a bearer token when set), EXIT_WHEN_IDLE (1: once the queue is empty, that is when
no job came with the last completion and a long poll then returns none either, print
`idle, exiting` and exit with status 0; unset, work until Ctrl-C or SIGTERM).
"""

import json
import os
import signal
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request

URL = os.environ.get("QLESSD_URL", "http://127.0.0.1:5858")
QUEUE = os.environ.get("QUEUE", "greetings")
PUT_JOBS = int(os.environ.get("PUT_JOBS", "5"))
WORK_SECONDS = float(os.environ.get("WORK_SECONDS", "2"))
# Well inside the lease (60 s unless the `heartbeat` option says otherwise).
HEARTBEAT_SECONDS = float(os.environ.get("HEARTBEAT_SECONDS", "10"))
POP_WAIT = float(os.environ.get("POP_WAIT", "10"))
EXIT_WHEN_IDLE = os.environ.get("EXIT_WHEN_IDLE") == "1"
# A worker name unique to this process: leases belong to it.
WORKER = f"{socket.gethostname()}-{os.getpid()}"


class ApiError(Exception):
    """A qlessd problem document: `code` is stable, `detail` is for humans."""

    def __init__(self, status, problem):
        super().__init__(f"{status} {problem.get('code')}: {problem.get('detail')}")
        self.status = status
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


def call(method, path, body=None):
    """One API call: JSON in, JSON out, errors raised as ApiError."""
    headers = {"Accept": "application/json"}
    if body is not None:  # a write without a body needs no Content-Type
        headers["Content-Type"] = "application/json"
    if os.environ.get("QLESSD_TOKEN"):
        headers["Authorization"] = "Bearer " + os.environ["QLESSD_TOKEN"]
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(URL + path, data=data, method=method, headers=headers)
    try:
        # The timeout must outlast a long poll.
        with urllib.request.urlopen(request, timeout=POP_WAIT + 30) as response:
            return json.load(response)
    except urllib.error.HTTPError as err:
        raise ApiError(err.code, json.load(err)) from None


def say(*words):
    print(*words, flush=True)


def put_jobs():
    # One name is empty, so that one job fails and shows up under /v1/failures.
    names = ["Ada", "Grace", "Linus", "Barbara", ""]
    for i in range(PUT_JOBS):
        job = call("POST", f"/v1/queues/{QUEUE}/jobs",
                   {"klass": "Greet", "data": {"name": names[i % len(names)]}, "retries": 2})
        say("put", job["jid"])


def greet(job, lost):
    """The work itself. Raises to fail the job; returns early if the lease is lost."""
    name = job["data"].get("name")
    if not name:
        raise JobFailed("no-name", "no name to greet")
    if lost.wait(WORK_SECONDS):  # "working", unless the lease goes first
        return None
    return {**job["data"], "greeting": f"Hello, {name}!"}


def heartbeat(jid, done, lost):
    """Renew the lease every HEARTBEAT_SECONDS until the work is done."""
    while not done.wait(HEARTBEAT_SECONDS):
        try:
            call("POST", f"/v1/jobs/{jid}/heartbeat", {"worker": WORKER})
            say("heartbeat", jid)
        except ApiError as err:
            if err.code in ("lock_lost", "conflict", "not_found"):
                # Another worker has it now (or it was canceled): stop working on it.
                say("lost", jid, err)
                lost.set()
                return
            say("heartbeat failed, will retry:", err)


def work(job, want_next):
    """Works one job; returns the jobs leased with its completion (or failure)."""
    jid = job["jid"]
    # Lease the next job in the same request, unless we are stopping.
    pop = {"pop": {"count": 1}} if want_next else {}
    done, lost = threading.Event(), threading.Event()
    beat = threading.Thread(target=heartbeat, args=(jid, done, lost))
    beat.start()
    try:
        result = greet(job, lost)
    except Exception as err:  # any failure of the work goes to a failure group
        done.set()
        beat.join()
        if not lost.is_set():
            group = failure_group(job["klass"], err)
            answer = call("POST", f"/v1/jobs/{jid}/fail",
                          {"worker": WORKER, "group": group, "message": str(err), **pop})
            say("failed", jid, "into", group + ":", err)
            return answer.get("popped", [])
        return []
    done.set()
    beat.join()
    if lost.is_set():
        return []
    answer = call("POST", f"/v1/jobs/{jid}/complete",
                  {"worker": WORKER, "queue": job["queue"], "data": result, **pop})
    say("completed", jid)
    return answer.get("popped", [])


def main():
    stopping = threading.Event()

    def stop(signum, _frame):
        say("stopping after the job in hand:", signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    put_jobs()
    say("worker", WORKER, "serving queue", QUEUE)
    jobs = []
    while jobs or not stopping.is_set():
        if not jobs:
            # Long poll: returns as soon as a job is available, or [] after POP_WAIT.
            try:
                jobs = call("POST", f"/v1/queues/{QUEUE}/pop",
                            {"worker": WORKER, "count": 1, "wait": POP_WAIT})
            except (ApiError, OSError) as err:
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
            jobs += work(job, want_next=not jobs and not stopping.is_set())
        except (ApiError, OSError) as err:
            say("could not finish", job["jid"], err)
    say("stopped")


if __name__ == "__main__":
    main()
