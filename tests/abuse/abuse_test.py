#!/usr/bin/env python3
"""capsim serve and capsim emulate under abuse on loopback (issue #35; docs/robustness.md).

For each server, for DURATION seconds (default 20), abusers run beside two well-behaved probes:
  - slowloris: 300 connections sending a request header one byte every 0.5 s, reconnecting when
    closed; idle: 100 connections that send nothing, reconnecting when closed;
  - a heavy client: 4 threads posting long simulations (serve) or long streamed chats (emulate)
    as fast as they are answered;
  - bad requests in a loop: a path and a body with bytes that are not UTF-8, an oversized body,
    a body nested 100k deep, file-naming fields (/etc/passwd and a FIFO as a draft model), a
    DNS-rebinding Host, a cross-site Origin, a text/plain POST.
The probes, every 0.25 s on a fresh connection: GET /healthz (/health) must answer 200 within
1 s; the light client's request (POST /v1/fit; a 3-token chat on emulate) 200 within 2 s. The
server's RSS (VmRSS) must stay under 300 MB, and it must be alive at the end. Every loop is
bounded in count and time; only 127.0.0.1 is contacted.

Usage: abuse_test.py CAPSIM_BINARY [DURATION_SECONDS]. Exit 0 pass, 1 fail.
"""
import json
import os
import re
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time

CAPSIM = sys.argv[1]
DURATION = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
HOST = "127.0.0.1"
RSS_LIMIT_MB = 300.0
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def start(args, pattern):
    proc = subprocess.Popen([CAPSIM] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stdout.readline().decode(errors="replace")
    m = re.search(pattern, line)
    if not m:
        proc.kill()
        raise SystemExit("could not start: %r %s" % (line, proc.stderr.read().decode(errors="replace")))
    return proc, int(m.group(1))


def exchange(port, raw, timeout=10.0):
    """Sends raw bytes, returns (status, body, seconds); status 0 when closed without an answer."""
    t0 = time.monotonic()
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(raw)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
            head, sep, rest = data.partition(b"\r\n\r\n")
            if sep:
                m = re.search(rb"content-length:\s*(\d+)", head, re.I)
                if m and len(rest) >= int(m.group(1)):
                    break
                if b"chunked" in head.lower() and rest.endswith(b"0\r\n\r\n"):
                    break
    seconds = time.monotonic() - t0
    m = re.match(rb"HTTP/1\.[01] (\d+)", data)
    return (int(m.group(1)) if m else 0), data.partition(b"\r\n\r\n")[2], seconds


def post(path, body, headers=b"Content-Type: application/json\r\n", host=b"127.0.0.1", close=True):
    if isinstance(body, str):
        body = body.encode()
    return (b"POST " + path + b" HTTP/1.1\r\nHost: " + host + b"\r\n" + headers +
            (b"Connection: close\r\n" if close else b"") +
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def get(path, host=b"127.0.0.1", headers=b""):
    return b"GET " + path + b" HTTP/1.1\r\nHost: " + host + b"\r\n" + headers + b"Connection: close\r\n\r\n"


def rss_mb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return 0.0


class Abuse:
    def __init__(self, port, stop):
        self.port, self.stop = port, stop
        self.counts = {"slow_reconnects": 0, "idle_reconnects": 0, "heavy": 0, "bad": 0}

    def connections(self, n_slow=300, n_idle=100):
        """Slow and idle connections on one selector, reconnecting when the server closes them."""
        sel = selectors.DefaultSelector()
        slow, idle = {}, {}
        header = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4000

        def open_one(kind):
            try:
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex((HOST, self.port))
                sel.register(s, selectors.EVENT_READ, kind)
                (slow if kind == "slow" else idle)[s] = 0
            except OSError:
                pass

        for _ in range(n_slow):
            open_one("slow")
        for _ in range(n_idle):
            open_one("idle")
        last_byte = 0.0
        while not self.stop.is_set():
            for key, _ in sel.select(timeout=0.1):
                s, kind = key.fileobj, key.data
                try:
                    closed = s.recv(4096) == b""
                except BlockingIOError:
                    closed = False
                except OSError:
                    closed = True
                if closed:
                    sel.unregister(s)
                    s.close()
                    (slow if kind == "slow" else idle).pop(s, None)
                    self.counts["slow_reconnects" if kind == "slow" else "idle_reconnects"] += 1
                    open_one(kind)
            if time.monotonic() - last_byte >= 0.5:
                last_byte = time.monotonic()
                for s in list(slow):
                    i = slow[s]
                    try:
                        s.send(header[i:i + 1])
                        slow[s] = (i + 1) % len(header)
                    except (BlockingIOError, OSError):
                        pass
        for key in list(sel.get_map().values()):
            key.fileobj.close()

    def heavy(self, raw):
        while not self.stop.is_set():
            try:
                exchange(self.port, raw, timeout=30)
            except OSError:
                time.sleep(0.05)
            self.counts["heavy"] += 1

    def bad(self, requests):
        while not self.stop.is_set():
            for raw in requests:
                if self.stop.is_set():
                    break
                try:
                    exchange(self.port, raw, timeout=5)
                except OSError:
                    pass
                self.counts["bad"] += 1


def run(name, proc, port, heavy_raw, bad_requests, health_path, light_raw, light_check):
    stop = threading.Event()
    abuse = Abuse(port, stop)
    threads = [threading.Thread(target=abuse.connections)]
    threads += [threading.Thread(target=abuse.heavy, args=(heavy_raw,)) for _ in range(4)]
    threads += [threading.Thread(target=abuse.bad, args=(bad_requests,))]
    for t in threads:
        t.daemon = True
        t.start()
    worst_health = worst_light = 0.0
    max_rss = 0.0
    probes = 0
    end = time.monotonic() + DURATION
    while time.monotonic() < end:
        r = rss_mb(proc.pid)
        if r is None or proc.poll() is not None:
            fail("%s: the server exited (status %s)" % (name, proc.poll()))
            break
        max_rss = max(max_rss, r)
        try:
            status, _, secs = exchange(port, get(health_path), timeout=5)
        except OSError as e:
            status, secs = 0, 5.0
        worst_health = max(worst_health, secs)
        if status != 200 or secs > 1.0:
            fail("%s: %s answered %d in %.2f s (must be 200 within 1 s)" % (name, health_path.decode(), status, secs))
        try:
            status, body, secs = exchange(port, light_raw, timeout=5)
        except OSError:
            status, body, secs = 0, b"", 5.0
        worst_light = max(worst_light, secs)
        if status != 200 or secs > 2.0 or not light_check(body):
            fail("%s: the light client's request answered %d in %.2f s (must be 200 within 2 s)" % (name, status, secs))
        probes += 1
        time.sleep(0.25)
    stop.set()
    for t in threads:
        t.join(timeout=40)
    if max_rss > RSS_LIMIT_MB:
        fail("%s: RSS reached %.0f MB (limit %.0f MB)" % (name, max_rss, RSS_LIMIT_MB))
    if proc.poll() is not None:
        fail("%s: the server is not alive at the end" % name)
    print("%s: %d probes; worst %s %.3f s, worst light request %.3f s; max RSS %.0f MB; abuse %s" %
          (name, probes, health_path.decode(), worst_health, worst_light, max_rss, json.dumps(abuse.counts)), flush=True)


def main():
    tmp = tempfile.mkdtemp(prefix="capsim-abuse-")
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)

    # capsim serve
    proc, port = start(["serve", "--port", "0", "--workers", "2", "--read-timeout", "5"], r"http://127\.0\.0\.1:(\d+)/")
    try:
        fit = '{"model": "llama-3.1-8b", "deployment": {"card": "h100-sxm"}}'
        heavy = post(b"/v1/simulate", '{"model": "llama-3.1-8b", "workload": {"rate": 20, "requests": 60000}}')
        deep = b'{"model": "llama-3.1-8b", "x": ' + b"[" * 100000 + b"]" * 100000 + b"}"
        bad = [
            b"GET /\xff\xfe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            post(b"/v1/simulate", b'{"mo\xffdel": "llama-3.1-8b"}'),
            post(b"/v1/simulate", b'{"name": "' + b"x" * (2 << 20) + b'"}'),
            post(b"/v1/simulate", deep[:900000]),
            post(b"/v1/simulate", json.dumps({"model": "llama-3.1-8b", "speculative": {"method": "draft_model", "model": "/etc/passwd"}})),
            post(b"/v1/simulate", json.dumps({"model": "llama-3.1-8b", "speculative": {"method": "draft_model", "model": fifo}})),
            get(b"/v1/cards", host=b"rebound.example:8080"),
            post(b"/v1/fit", fit, headers=b"Content-Type: text/plain\r\nOrigin: https://evil.example\r\n"),
        ]
        run("serve", proc, port, heavy, bad, b"/healthz", post(b"/v1/fit", fit),
            lambda body: b'"fits"' in body)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    # capsim emulate
    proc, port = start(["emulate", "--port", "0", "--model", "llama-3.1-8b", "--card", "h100-sxm", "--read-timeout", "5",
                        "--max-body", "1024"], r"http://127\.0\.0\.1:(\d+)")
    try:
        chat = '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}'
        heavy = post(b"/v1/chat/completions",
                     '{"messages": [{"role": "user", "content": "Go on."}], "max_tokens": 1500, "ignore_eos": true, "stream": true}')
        deep = b'{"messages": [{"role": "user", "content": "x"}], "x": ' + b"[" * 100000 + b"]" * 100000 + b"}"
        bad = [
            b"GET /\xff\xfe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            post(b"/v1/chat/completions", b'{"mess\xffages": []}'),
            post(b"/v1/chat/completions", b'{"x": "' + b"x" * (2 << 20) + b'"}'),
            post(b"/v1/chat/completions", deep),
            get(b"/v1/models", host=b"rebound.example:8000"),
            post(b"/v1/chat/completions", chat, headers=b"Content-Type: text/plain\r\nOrigin: https://evil.example\r\n"),
        ]
        run("emulate", proc, port, heavy, bad, b"/health", post(b"/v1/chat/completions", chat),
            lambda body: b'"choices"' in body)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    os.unlink(fifo)
    os.rmdir(tmp)
    if failures:
        print("%d failures" % len(failures))
        return 1
    print("abuse test: both servers held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
