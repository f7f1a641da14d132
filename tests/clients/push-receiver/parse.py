"""Reads a delivery's body (a job, as qlessd sends it to a pushed queue's endpoint) on
stdin with the models openapi-generator's `python` generator made from
openapi/push-receiver.json, and prints what a receiver would use of it."""

import sys

from openapi_client.models.job import Job

job = Job.from_json(sys.stdin.read())
print("jid", job.jid)
print("klass", job.klass)
print("state", job.state.value)
print("data", job.data["name"])
print("tags", ",".join(job.tags))
print("throttles", ",".join(job.throttles or []))
print("partition", job.partition)
