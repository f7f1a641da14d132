#!/usr/bin/env python3
"""A qlessd push receiver in Python: the standard library's HTTP server, and the
`standardwebhooks` package (pip install standardwebhooks==1.1.0) to check signatures.

qlessd leases each job of a pushed queue and POSTs it here, signed: the body is the job
as GET /v1/jobs/{jid} shows it. The answer decides the job: 200 completes it, and the
JSON body becomes its `result`; a 4xx (other than 408 and 429) fails it at once into
`push-http-<status>`, with the start of the body as its message; a 5xx retries it. So
this program does the same greeting job as worker.py, with no qlessd API calls at all:

    QLESSD_PUSH_SECRET=whsec_... python3 examples/python/receiver.py
    curl -X PUT localhost:5858/v1/queues/greetings/push \\
         -H 'content-type: application/json' -d '{"url": "http://127.0.0.1:8000/"}'

(The PUT answers the secret once; start the receiver with it. qlessd refuses loopback
URLs unless started with --push-allow-private.)

Settings (environment): QLESSD_PUSH_SECRET (required: the queue's `whsec_...` secret),
PORT (8000), HOST (127.0.0.1; 0.0.0.0 to take deliveries from other machines).
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook, WebhookVerificationError

PORT = int(os.environ.get("PORT", "8000"))
HOST = os.environ.get("HOST", "127.0.0.1")
# Checks webhook-id, webhook-timestamp (within 5 minutes of now) and
# webhook-signature (an HMAC of id, timestamp and body under the secret).
WEBHOOK = Webhook(os.environ["QLESSD_PUSH_SECRET"])
# A job is at most qlessd's --max-job-size (1 MiB by default), with some room.
MAX_BODY = 2 * 1024 * 1024


class Refused(Exception):
    """A job this receiver cannot do: answered 422, so it fails at once."""


def greet(job):
    """The work itself: the same greeting as worker.py. Its result is the answer."""
    if job.get("klass") != "Greet":
        raise Refused(f"no such job class here: {job.get('klass')}")
    name = job["data"].get("name")
    if not name:
        raise Refused("no name to greet")
    return {**job["data"], "greeting": f"Hello, {name}!"}


# Deliveries are handled on several threads at once: one line at a time.
SAYING = threading.Lock()


def say(*words):
    with SAYING:
        print(*words, flush=True)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY:
            return self.answer(413, "text/plain", "too large")
        body = self.rfile.read(length)
        try:
            # Verifies, then parses the body as JSON. Only qlessd knows the secret.
            job = WEBHOOK.verify(body, dict(self.headers))
        except (WebhookVerificationError, ValueError) as err:
            say("refused an unverified delivery:", err)
            return self.answer(401, "text/plain", "signature not verified")
        # A delivery may come twice (after a crash, say): webhook-id, the job's id,
        # is the same each time. Greeting twice does no harm.
        try:
            result = greet(job)
        except Refused as err:
            say("failed", job["jid"] + ":", err)
            return self.answer(422, "text/plain", str(err))
        say("completed", job["jid"] + ":", result["greeting"])
        self.answer(200, "application/json", json.dumps(result))

    def answer(self, status, content_type, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass  # one line per delivery is said above


def main():
    # A thread per delivery: qlessd sends up to the queue's `concurrency` at once.
    server = ThreadingHTTPServer((HOST, PORT), Receiver)
    say(f"listening on http://{HOST}:{PORT}/")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        say("stopped")


if __name__ == "__main__":
    main()
