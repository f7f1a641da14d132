#!/usr/bin/env python3
"""Times the dashboard's pages on a large data set.

Seeds a running qlessd (default http://127.0.0.1:5858) with 100,000 waiting jobs in
one queue (`big`, batches of 1,000), one job in each of 1,000 more queues and 200 failed
jobs in one group, then fetches each page 20 times and prints the median and worst
time. Usage: python3 benches/ui_pages.py [BASE_URL]
"""

import json
import statistics
import sys
import time
import urllib.request

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:5858"


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request) as response:
        return response.read()


def seed():
    for batch in range(100):
        jobs = [{"klass": "Big", "data": {"n": batch * 1000 + i}} for i in range(1000)]
        call("POST", "/v1/queues/big/jobs/batch", {"jobs": jobs})
    for q in range(1000):
        call("POST", f"/v1/queues/q{q:04}/jobs", {"klass": "Small", "data": {}})
    for i in range(200):
        call("POST", "/v1/queues/failing/jobs", {"klass": "F", "data": {}, "jid": f"f{i}"})
    popped = json.loads(call("POST", "/v1/queues/failing/pop", {"worker": "w", "count": 200}))
    for job in popped["jobs"] if isinstance(popped, dict) else popped:
        call("POST", f"/v1/jobs/{job['jid']}/fail",
             {"worker": "w", "group": "boom", "message": "it broke"})


PAGES = [
    "/ui",
    "/ui/queues/big",
    "/ui/queues/big?state=waiting&offset=50000",
    "/ui/queues/q0999",
    "/ui/jobs/f0",
    "/ui/failures",
    "/ui/failures/boom",
    "/ui/failures/boom?offset=175",
    "/ui/workers",
    "/ui/recurring",
]


def main():
    seed()
    print(f"{'page':45} {'median ms':>10} {'max ms':>8} {'bytes':>8}")
    for page in PAGES:
        times, size = [], 0
        for _ in range(20):
            start = time.perf_counter()
            size = len(call("GET", page))
            times.append((time.perf_counter() - start) * 1000)
        print(f"{page:45} {statistics.median(times):10.1f} {max(times):8.1f} {size:8}")


if __name__ == "__main__":
    main()
