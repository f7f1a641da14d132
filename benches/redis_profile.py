#!/usr/bin/env python3
"""Where redis-server's instructions go, per job, from callgrind dumps of a whole run.

    BENCH_CALLGRIND=/tmp/cg node benches/bullmq/bench.mjs --jobs 2000 --rounds 1 \\
        --only bullmq,qlessd --qlessd target/release/qlessd
    python3 benches/redis_profile.py /tmp/cg/callgrind.*.out.1 --jobs 2000

Splits each dump's user-space instructions (callgrind does not see the kernel: socket
reads and writes are counted up to the syscall) into disjoint parts by the inclusive
cost of a few exported redis-server functions (Debian's binary is stripped, but
Redis links with -rdynamic, so its global functions keep their names):

* scripts: EVAL/EVALSHA (`evalGenericCommand`) less the publishes made inside them;
  for BullMQ, whose scripts are EVALSHA too, the same;
* publish: `publishCommand` / `spublishCommand` (matching channels and patterns,
  queuing the message to each subscriber), made by the scripts;
* other commands: `call` less the two above;
* parsing requests: `processInputBuffer` less `call`;
* socket reads: `readQueryFromClient` less `processInputBuffer`;
* replies written: `handleClientsWithPendingWrites`(`UsingThreads`) and `writeToClient`
  called from elsewhere (`sendReplyToClient`);
* cron: `serverCron`; before sleep: `beforeSleep` less the reply writing it runs;
* other: the rest (the event loop, epoll, timers, allocator...).
"""

import re
import subprocess
import sys


def inclusive(dump):
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", dump],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    costs = {}
    total = None
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        what = m.group(2)
        if "PROGRAM TOTALS" in what:
            total = n
            continue
        name = what.split(":", 1)[-1].split(" [")[0].strip()
        costs[name] = max(costs.get(name, 0), n)
    return total, costs


def split(dump, jobs):
    total, c = inclusive(dump)
    g = lambda name: c.get(name, 0)
    # Both systems publish only from scripts: inside evalGenericCommand.
    publish = g("publishCommand") + g("spublishCommand")
    scripts = g("evalGenericCommand") - publish
    call = g("call")
    other_cmds = call - g("evalGenericCommand")
    parse = g("processInputBuffer") - call
    reads = g("readQueryFromClient") - g("processInputBuffer")
    writes = g("handleClientsWithPendingWritesUsingThreads") or g(
        "handleClientsWithPendingWrites"
    )
    writes += g("sendReplyToClient")
    cron = g("serverCron")
    before_sleep = max(0, g("beforeSleep") - writes + g("sendReplyToClient"))
    parts = [
        ("scripts (EVALSHA, less publishes)", scripts),
        ("publish (PUBLISH from scripts)", publish),
        ("other commands", other_cmds),
        ("parsing requests", parse),
        ("socket reads", reads),
        ("replies written", writes),
        ("serverCron", cron),
        ("beforeSleep, other", before_sleep),
    ]
    rest = total - sum(v for _, v in parts)
    parts.append(("other (event loop, epoll, ...)", rest))
    parts.append(("total", total))
    return parts


def events(dump):
    """Every event's whole-run total (`events:` and `summary:` lines of the dump)."""
    names, totals = [], []
    with open(dump) as f:
        for line in f:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("summary:"):
                totals = [int(v) for v in line.split()[1:]]
    return dict(zip(names, totals))


def main():
    args = sys.argv[1:]
    jobs = 1
    if "--jobs" in args:
        k = args.index("--jobs")
        jobs = int(args[k + 1])
        del args[k : k + 2]
    for dump in args:
        print(f"{dump}: instructions per job ({jobs} jobs)")
        for label, v in split(dump, jobs):
            print(f"  {label:<36} {v / jobs / 1000:>9.1f}k")
        totals = events(dump)
        if len(totals) > 1:  # --cache-sim=yes: misses per job too
            print("  all events per job: " + ", ".join(
                f"{k} {v / jobs / 1000:.1f}k" for k, v in totals.items()))


if __name__ == "__main__":
    main()
