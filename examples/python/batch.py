#!/usr/bin/env python3
"""A batch with a callback, in Python, standard library only.

It puts three `Thumbnail` jobs in the queue `thumbnails` as one batch, with an
`on_success` callback: a `ThumbnailsDone` job that qlessd puts in the queue
`thumbnails-done` once every job of the batch has completed. Then it plays the
workers itself: it leases the three jobs with a long poll and completes each with a
small `result`; the last completion puts the callback (in the same script call), so
it leases that next and prints the summary of the batch qlessd put in its data
(`data.batch`), completes it and exits with status 0. Run it against a qlessd on
localhost:

    python3 examples/python/batch.py

Settings (environment), as for the workers: QLESSD_URL (default
http://127.0.0.1:5858), POP_WAIT (seconds a long poll waits, 10), QLESSD_TOKEN (sent
as a bearer token when set).
"""

import json
import os
import socket
import sys
import urllib.error
import urllib.request

URL = os.environ.get("QLESSD_URL", "http://127.0.0.1:5858")
POP_WAIT = float(os.environ.get("POP_WAIT", "10"))
# A worker name unique to this process: leases belong to it.
WORKER = f"{socket.gethostname()}-{os.getpid()}"


def call(method, path, body):
    """One API call: JSON in, JSON out; an error ends the program."""
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    if os.environ.get("QLESSD_TOKEN"):
        headers["Authorization"] = "Bearer " + os.environ["QLESSD_TOKEN"]
    request = urllib.request.Request(URL + path, data=json.dumps(body).encode(),
                                     method=method, headers=headers)
    try:
        # The timeout must outlast a long poll.
        with urllib.request.urlopen(request, timeout=POP_WAIT + 30) as response:
            return json.load(response)
    except urllib.error.HTTPError as err:
        problem = json.load(err)
        sys.exit(f"{method} {path}: {err.code} {problem.get('code')}: "
                 f"{problem.get('detail')}")
    except OSError as err:  # qlessd not there, say
        sys.exit(f"{method} {path}: {err}")


def lease(queue):
    """Leases one job of `queue`, waiting up to POP_WAIT seconds for it to come."""
    jobs = call("POST", f"/v1/queues/{queue}/pop",
                {"worker": WORKER, "count": 1, "wait": POP_WAIT})
    if not jobs:  # the job was put before we asked, so it should be there
        sys.exit(f"no job came in {queue} within {POP_WAIT} s")
    return jobs[0]


def main():
    # The jobs and the batch are written in one call: all of them, or none. The
    # callback's data gets `batch` (the summary) beside its own keys.
    photos = ["beach.jpg", "harbour.jpg", "lighthouse.jpg"]
    batch = call("POST", "/v1/batches", {
        "description": "thumbnails of the holiday album",
        "jobs": [{"queue": "thumbnails", "klass": "Thumbnail", "data": {"photo": photo}}
                 for photo in photos],
        "on_success": {"queue": "thumbnails-done", "klass": "ThumbnailsDone",
                       "data": {"album": "holidays"}},
    })
    print("batch", batch["bid"], flush=True)

    # Work the batch's jobs: lease each, "make the thumbnail", complete it with a
    # result (kept beside the job's data, which stays as it was).
    for _ in batch["jids"]:
        job = lease("thumbnails")
        thumbnail = "thumb-" + job["data"]["photo"]
        call("POST", f"/v1/jobs/{job['jid']}/complete",
             {"worker": WORKER, "queue": job["queue"], "result": {"thumbnail": thumbnail}})
        print("completed", job["jid"], flush=True)

    # The last completion put the callback: an ordinary job, put exactly once.
    callback = lease("thumbnails-done")
    summary = callback["data"]["batch"]  # bid, total, completed, failed, ...
    print(f"callback {callback['jid']}:",
          f"{summary['completed']} of {summary['total']} completed", flush=True)
    call("POST", f"/v1/jobs/{callback['jid']}/complete",
         {"worker": WORKER, "queue": callback["queue"]})


if __name__ == "__main__":
    main()
