#!/usr/bin/env python3
"""Instructions redis-server executes inside EVALSHA per call of the qless script, for
one or more checkouts' lua/ side by side: a quick A/B of a script edit, without
building Rust (the `instructions` section of `cargo bench --bench lifecycle` measures
the compiled-in script through the gateway's client).

    python3 benches/script_instructions.py /work/main .      # before, after
    python3 benches/script_instructions.py . --calls 500
    python3 benches/script_instructions.py /work/main . --namespace bench

Each checkout gets its own redis-server under `valgrind --tool=callgrind
--toggle-collect=evalShaCommand` (only the script's execution is counted: not the
event loop, not reading the request; `--hz 1` keeps cron work out), with the embedded
Redis's encodings. Per checkout: put `calls` new jobs (~100-byte data), pop them one by
one, heartbeat each, complete each, then complete `calls` jobs each with a pop of the
next one in the same call (`pop.after`, the single-job worker's path), then put `calls`
more and pop them 100 at a time, as JSON and (the gateway's way) as fields; then the
single-job worker's path as the gateway groups it (`batch` invocations of 10 puts and
10 `pop.after`s, per job); `now` has a fractional part, as real clocks give.
Prints the mean per call (per job for the pop of 100). `--namespace NS` makes every
call in the namespace `ql:{NS}` (one key) instead of on the plain `ql:` prefix. Lua's
garbage collector runs in steps, so figures move by ~1 % between runs; differences
below that are noise.
"""
import argparse
import glob
import os
import socket
import subprocess
import tempfile
import time

# Calls of each kind in one `batch` of the grouped phase (the gateway groups 14-21 calls
# per invocation on the single-job worker path at full speed).
GROUP = 10

FILES = ["base", "config", "job", "queue", "recurring", "worker", "extra", "throttle", "push", "batches", "workflow", "deadlines", "api"]


def source(checkout):
    """The script as qlessd loads it (src/core/script.rs): shebang, files in order."""
    parts = [open(os.path.join(checkout, "lua", f + ".lua")).read() + "\n" for f in FILES if os.path.exists(os.path.join(checkout, "lua", f + ".lua"))]
    return "#!lua\n" + "".join(parts)


class Redis:
    """A redis-server under callgrind, spoken to in RESP over a Unix socket."""

    def __init__(self):
        self.dir = tempfile.mkdtemp()
        sock = os.path.join(self.dir, "redis.sock")
        self.out = os.path.join(self.dir, "callgrind.out")
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--toggle-collect=evalShaCommand",
             f"--callgrind-out-file={self.out}", "redis-server", "--port", "0",
             "--save", "", "--appendonly", "no", "--hz", "1", "--unixsocket", sock,
             "--hash-max-listpack-value", "1024", "--zset-max-listpack-entries", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(sock)
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("redis-server under valgrind did not start")
                time.sleep(0.2)
        self.reader = self.sock.makefile("rb")

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.reader.readline()
        kind, rest = line[:1], line[1:-2]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.reader.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")

    def control(self, what):
        subprocess.run(["callgrind_control", what, str(self.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def counted(self):
        """Instructions since the last zeroing (the newest dump's summary)."""
        dumps = [p for p in glob.glob(self.out + ".*") if p.rsplit(".", 1)[1].isdigit()]
        newest = max(dumps, key=lambda p: int(p.rsplit(".", 1)[1]))
        with open(newest) as dump:
            for line in dump:
                if line.startswith("summary:"):
                    return int(line.split()[1])
        raise RuntimeError("no summary in " + newest)

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def payload(i):
    return ('{"user_id":%d,"email":"user-%06d@example.com","plan":"pro",'
            '"note":"welcome mail, retry ok"}' % (i, i))


def measure(checkout, calls, namespace=None):
    redis = Redis()
    sha = redis.call("SCRIPT", "LOAD", source(checkout)).decode()
    keys = ["1", "ql:{%s}" % namespace] if namespace else ["0"]

    def q(*args):
        return redis.call("EVALSHA", sha, *keys, *args)

    rows = []

    def phase(label, n, body, per=1):
        redis.control("-z")
        for i in range(n):
            body(i)
        redis.control("-d")
        rows.append((label, redis.counted() / n / per))

    now = 1700000000.123
    phase("put", calls, lambda i: q("put", f"{now + i * 0.001:.3f}", "", "bench",
                                    f"job-{i}", "bench.Job", payload(i), "0"))
    phase("pop (1 job)", calls, lambda i: q("pop", f"{now + 100 + i * 0.001:.3f}", "bench",
                                            "w", "1"))
    phase("heartbeat", calls, lambda i: q("heartbeat", f"{now + 200 + i * 0.001:.3f}",
                                          f"job-{i}", "w"))

    def complete(i):
        reply = q("complete", f"{now + 300 + i * 0.001:.3f}", f"job-{i}", "w", "bench", "{}")
        assert reply == b"complete", reply
    phase("complete", calls, complete)
    for i in range(calls + 1):
        q("put", f"{now + 350 + i * 0.001:.3f}", "", "next", f"n-{i}", "bench.Job", payload(i), "0")
    q("pop", f"{now + 360:.3f}", "next", "w", "1")

    def complete_pop(i):
        reply = q("pop.after", f"{now + 370 + i * 0.001:.3f}", "1", "complete", "4",
                  f"n-{i}", "w", "next", "{}")
        # (reply[2]: the leased job's fields, its jid first; JSON before 2026-11-26)
        leased = reply[2]
        assert reply[0] == b"complete", reply
        assert (leased[0] == b"n-%d" % (i + 1) if isinstance(leased, list)
                else leased.startswith(b"[{")), reply
    phase("complete + pop (1)", calls, complete_pop)
    for i in range(calls):
        q("put", f"{now + 400:.3f}", "", "batch", f"b-{i}", "bench.Job", payload(i), "0")
    phase("pop (100 jobs), per job", calls // 100,
          lambda i: q("pop", f"{now + 500 + i:.3f}", "batch", "w", "100"), per=100)
    for i in range(calls):
        q("put", f"{now + 600:.3f}", "", "fields", f"f-{i}", "bench.Job", payload(i), "0")
    phase("pop fields (100), per job", calls // 100,
          lambda i: q("pop", f"{now + 700 + i:.3f}", "fields", "w", "100", "fields"), per=100)
    # The single-job HTTP worker's path as the gateway's group commit sends it: one
    # `batch` of GROUP puts and GROUP completions that each lease the next job
    # (`pop.after 1`), one worker per lane; per job.
    lanes = GROUP
    for i in range(lanes):
        q("put", f"{now + 800:.3f}", "", "group", f"g-{i}", "bench.Job", payload(i), "0")
    held = [q("pop", f"{now + 801:.3f}", "group", f"w-{k}", "1", "fields")[0].decode()
            for k in range(lanes)]
    made = [lanes]

    def group(i):
        at = f"{now + 900 + i * 0.001:.3f}"
        args = []
        for k in range(lanes):
            args += ["put", "6", "", "group", f"g-{made[0]}", "bench.Job", payload(made[0]), "0"]
            made[0] += 1
        for k in range(lanes):
            args += ["pop.after", "7", "1", "complete", "4", held[k], f"w-{k}", "group", "{}"]
        replies = q("batch", at, *args)
        for k in range(lanes):
            reply = replies[lanes + k]
            assert reply[0] == b"complete", reply
            held[k] = reply[2][0].decode()
    phase("grouped put + complete/pop, per job", calls // GROUP, group, per=GROUP)
    redis.close()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkouts", nargs="+", help="directories holding lua/")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--namespace", help="run in the namespace ql:{NAMESPACE}")
    args = parser.parse_args()
    results = [measure(c, args.calls, args.namespace) for c in args.checkouts]
    print(f"{'instructions per call':<26}" + "".join(f"{c[-24:]:>26}" for c in args.checkouts)
          + ("   ratio (last / first)" if len(results) > 1 else ""))
    for k, (label, _) in enumerate(results[0]):
        figures = [r[k][1] for r in results]
        ratio = f"   {figures[-1] / figures[0]:.3f}" if len(figures) > 1 else ""
        print(f"{label:<26}" + "".join(f"{f:>26,.0f}" for f in figures) + ratio)


if __name__ == "__main__":
    main()
