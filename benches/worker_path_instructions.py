#!/usr/bin/env python3
"""Instructions the gateway executes per job on the single-job HTTP worker's path: a
put (`POST /v1/queues/q/jobs`) and a completion that leases the next job
(`POST /v1/jobs/{jid}/complete` with `"pop": {"count": 1}`), as
`benches/bullmq/bench.mjs` drives it, for one or more qlessd binaries side by side.

    python3 benches/worker_path_instructions.py target/release/qlessd /tmp/qlessd-old
    python3 benches/worker_path_instructions.py target/release/qlessd --jobs 4000 --keep /tmp/d

Each binary runs under `valgrind --tool=callgrind` in front of its own redis-server
(the embedded Redis's encodings, on a Unix socket), with 10 lanes of keep-alive
connections (a producer's and a worker's per lane); the counts are zeroed after an
untimed warm-up and dumped after `--jobs` jobs, and the figure is the gateway's
user-space instructions (tokio's threads, the log writer's, everything) divided by the
jobs. Unlike CPU time, neighbours cannot move it; how concurrent calls happen to be
grouped can, by a percent or so. With `--keep DIR` the dumps stay in DIR/<n>/ for
`callgrind_annotate --inclusive=yes`.
"""
import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

LANES = 10
PAYLOAD = {"user_id": 1, "email": "user-000001@example.com", "plan": "pro",
           "note": "welcome mail, retry ok"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Connection:
    """One keep-alive HTTP/1.1 connection, JSON in and out."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.reader = self.sock.makefile("rb")

    def request(self, method, path, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.sock.sendall(
            f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json"
            f"\r\ncontent-length: {len(data)}\r\n\r\n".encode() + data)
        status = int(self.reader.readline().split()[1])
        length = 0
        while True:
            line = self.reader.readline()
            if line == b"\r\n":
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        text = self.reader.read(length)
        return status, json.loads(text) if text else None


def measure(binary, jobs, dump_dir):
    work = tempfile.mkdtemp()
    redis_socket = os.path.join(work, "redis.sock")
    redis = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", redis_socket, "--save", "",
         "--appendonly", "no", "--hash-max-listpack-value", "1024",
         "--zset-max-listpack-entries", "0"], stdout=subprocess.DEVNULL)
    port = free_port()
    out = os.path.join(dump_dir, "callgrind.out")
    gateway = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary,
         "--redis-url", "unix://" + redis_socket, "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while True:
            try:
                if Connection(port).request("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"{binary} did not become ready under valgrind")
            time.sleep(0.5)
        producers = [Connection(port) for _ in range(LANES)]
        workers = [Connection(port) for _ in range(LANES)]
        held = [None] * LANES

        def lane(k, count):
            for _ in range(count):
                status, _ = producers[k].request(
                    "POST", "/v1/queues/q/jobs", {"klass": "bench.Job", "data": PAYLOAD})
                assert status == 201, status
                worker = f"w{k}"
                if held[k] is None:
                    status, popped = workers[k].request("POST", "/v1/queues/q/pop",
                                                        {"worker": worker})
                else:
                    status, reply = workers[k].request(
                        "POST", f"/v1/jobs/{held[k]}/complete",
                        {"worker": worker, "queue": "q", "pop": {"count": 1}})
                    popped = reply["popped"]
                assert status == 200, status
                held[k] = popped[0]["jid"] if popped else None

        def phase(count):
            lanes = [threading.Thread(target=lane, args=(k, count // LANES))
                     for k in range(LANES)]
            for thread in lanes:
                thread.start()
            for thread in lanes:
                thread.join()

        def control(what):
            subprocess.run(["callgrind_control", what, str(gateway.pid)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        phase(400)
        control("-z")
        phase(jobs)
        control("-d")
        dumps = [p for p in glob.glob(out + ".*") if p.rsplit(".", 1)[1].isdigit()]
        newest = max(dumps, key=lambda p: int(p.rsplit(".", 1)[1]))
        with open(newest) as dump:
            for line in dump:
                if line.startswith("summary:"):
                    return int(line.split()[1]) / (jobs // LANES * LANES)
        raise RuntimeError("no summary in " + newest)
    finally:
        gateway.terminate()
        gateway.wait()
        redis.terminate()
        redis.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binaries", nargs="+", help="qlessd binaries")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--keep", help="keep the callgrind dumps in KEEP/<n>/")
    args = parser.parse_args()
    figures = []
    for n, binary in enumerate(args.binaries):
        dump_dir = (os.path.join(args.keep, str(n + 1)) if args.keep
                    else tempfile.mkdtemp())
        os.makedirs(dump_dir, exist_ok=True)
        figures.append(measure(binary, args.jobs, dump_dir))
        if not args.keep:
            shutil.rmtree(dump_dir, ignore_errors=True)
    first = figures[0]
    for binary, figure in zip(args.binaries, figures):
        print(f"{binary:<40} {figure:>10,.0f} instructions per job   {figure / first:.3f}")


if __name__ == "__main__":
    main()
