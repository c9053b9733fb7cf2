#!/usr/bin/env python3
"""Runs examples/openresty on loopback from the source tree.

  serve.py [--nginx BIN] [--workers N] [--port P] [--stock] [--perf]

renders nginx.conf.in into a fresh temporary prefix (removed on exit), starts
nginx in the foreground (master_process on, daemon off) and waits until it
answers. Ctrl-C stops it. BIN defaults to build/bin/nginx; --stock runs
Debian's /usr/sbin/nginx with its ndk and lua modules (load_module). --perf
sets LUAJIT_PERF=1. As root the workers run as nobody (nginx's `user`).

Try it:
  curl -H "X-Api-Key: $(serve.py --key 7)" http://127.0.0.1:PORT/api/items/12
  wrk -c 8 -d 10 -s examples/openresty/load.lua http://127.0.0.1:PORT

Tests and benchmarks import it: Nginx(...).start() / .stop().
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if __name__ == "__main__":
    # Entry script: the source root on sys.path for the ljperf package (the
    # rule: ljperf/__init__.py). Imported (examples.openresty.serve), the
    # importer has it there already.
    sys.path.insert(0, ROOT)
from ljperf.procs import children_of  # serve.children_of: the tests use it too
STOCK_NGINX = "/usr/sbin/nginx"
STOCK_MODULES = ("/usr/lib/nginx/modules/ndk_http_module.so",
                 "/usr/lib/nginx/modules/ngx_http_lua_module.so")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def key_for(n):
    """The API key of client N (app.lua's key_checksum)."""
    h = 2166136261
    for i in range(1, 65):
        h = (h * 31 + n * i + 7) % 4294967296
    return "key-%03d-%08x" % (n, h)


class Nginx:
    """One nginx serving the example from a temporary prefix."""

    def __init__(self, binary=None, workers=2, port=None, stock=False, env=None,
                 user=None, daemon=False, perf_env=True):
        self.binary = binary or (STOCK_NGINX if stock else
                                 os.path.join(ROOT, "build", "bin", "nginx"))
        self.workers = workers
        self.port = port or free_port()
        self.backend_port = free_port()
        self.stock = stock
        self.env = dict(os.environ)
        self.env.update(env or {})
        if user is None and os.geteuid() == 0:
            user = "nobody nogroup"
        self.user = user
        self.prefix = None
        self.proc = None
        # daemon: nginx forks into the background (a binary upgrade needs
        # that: a master whose parent is still there ignores SIGUSR2)
        self.daemon = daemon
        # perf_env: the `env LUAJIT_PERF; env LUAJIT_PERF_DIR;` directives
        self.perf_env = perf_env
        self._master = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def render(self):
        with open(os.path.join(HERE, "nginx.conf.in")) as f:
            conf = f.read()
        mods = ""
        if self.stock:
            mods = "".join("load_module %s;\n" % m for m in STOCK_MODULES)
        cpath = ""
        if not self.stock:
            d = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(self.binary))),
                             "lib", "lua", "5.1")
            if os.path.isfile(os.path.join(d, "cjson.so")):
                cpath = d + "/?.so;"
        for k, v in (("LOAD_MODULES", mods), ("CPATH", cpath),
                     ("USER", "user %s;" % self.user if self.user else ""),
                     ("WORKERS", str(self.workers)), ("PREFIX", self.prefix),
                     ("DAEMON", "on" if self.daemon else "off"),
                     ("PERF_ENV", "env LUAJIT_PERF;\nenv LUAJIT_PERF_DIR;"
                      if self.perf_env else ""),
                     ("APPDIR", HERE), ("PORT", str(self.port)),
                     ("BACKEND_PORT", str(self.backend_port))):
            conf = conf.replace("@%s@" % k, v)
        return conf

    def start(self, timeout=15):
        if not os.access(self.binary, os.X_OK):
            raise RuntimeError("%s is not an executable nginx" % self.binary)
        self.prefix = tempfile.mkdtemp(prefix="ljperf-nginx-")
        os.chmod(self.prefix, 0o755)          # workers may run as nobody
        for d in ("conf", "logs", "tmp"):
            os.makedirs(os.path.join(self.prefix, d))
        conf = os.path.join(self.prefix, "conf", "nginx.conf")
        with open(conf, "w") as f:
            f.write(self.render())
        self.log = open(os.path.join(self.prefix, "logs", "stderr.log"), "w")
        self.proc = subprocess.Popen([self.binary, "-p", self.prefix, "-c", conf],
                                     env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        if self.daemon:
            if self.proc.wait(timeout) != 0:
                raise RuntimeError("%s exited (%d): %s" % (self.binary, self.proc.returncode,
                                                           self.errors()))
            pidfile = os.path.join(self.prefix, "logs", "nginx.pid")
            while self._master is None and time.time() < deadline:
                try:
                    with open(pidfile) as f:
                        self._master = int(f.read().strip())
                except (OSError, ValueError):
                    time.sleep(0.05)
        while time.time() < deadline:
            if not self.running():
                raise RuntimeError("%s exited: %s" % (self.binary, self.errors()))
            if len(self.worker_pids()) >= self.workers and self.answers():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("%s did not answer on %s within %d s: %s"
                           % (self.binary, self.url, timeout, self.errors()))

    def answers(self):
        try:
            self.get("/api/items/1", key=1)
            return True
        except (OSError, urllib.error.URLError):
            return False

    def get(self, path, key=1, timeout=5):
        """(status, headers dict, body bytes) of GET PATH."""
        req = urllib.request.Request(self.url + path)
        if key is not None:
            req.add_header("X-Api-Key", key_for(key))
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    @property
    def master(self):
        return self._master if self.daemon else self.proc.pid

    def running(self):
        if self.daemon:
            return self._master is not None and os.path.exists("/proc/%d" % self._master)
        return self.proc.poll() is None

    def worker_pids(self):
        if self.master is None:
            return []
        return [p for p in children_of(self.master) if self._is_worker(p)]

    @staticmethod
    def _is_worker(pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return b"worker process" in f.read()
        except OSError:
            return False

    def errors(self):
        out = []
        for name in ("stderr.log", "error.log"):
            try:
                with open(os.path.join(self.prefix, "logs", name)) as f:
                    out.append(f.read()[-1500:])
            except OSError:
                pass
        return " | ".join(x.strip() for x in out if x.strip())

    def stop(self):
        """Stops this nginx (fast shutdown, SIGKILL after 10 s) and removes
        the prefix. Only the master started here and its children."""
        if self.daemon and self.running():
            kids = children_of(self._master)
            os.kill(self._master, signal.SIGTERM)
            end = time.time() + 10
            while self.running() and time.time() < end:
                time.sleep(0.05)
            for p in (kids + [self._master]) if self.running() else ():
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        elif self.proc is not None and self.proc.poll() is None:
            kids = children_of(self.proc.pid)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                for p in kids + [self.proc.pid]:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
                self.proc.wait()
        if self.prefix:
            self.log.close()
            shutil.rmtree(self.prefix, ignore_errors=True)
            self.prefix = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nginx", metavar="BIN")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--port", type=int)
    p.add_argument("--stock", action="store_true",
                   help="Debian's nginx + libnginx-mod-http-lua")
    p.add_argument("--perf", action="store_true", help="LUAJIT_PERF=1")
    p.add_argument("--key", type=int, metavar="N", help="print client N's API key and exit")
    o = p.parse_args()
    if o.key is not None:
        print(key_for(o.key))
        return 0
    env = {"LUAJIT_PERF": "1"} if o.perf else {}
    ngx = Nginx(o.nginx, o.workers, o.port, o.stock, env)
    ngx.start()
    print("nginx %s: master %d, workers %s, http://127.0.0.1:%d/api/items/ID "
          "(header X-Api-Key: %s), prefix %s" % (ngx.binary, ngx.master,
          ",".join(map(str, ngx.worker_pids())), ngx.port, key_for(1), ngx.prefix))
    sys.stdout.flush()
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT, signal.SIGTERM])
    try:
        signal.sigwait([signal.SIGINT, signal.SIGTERM])
    except KeyboardInterrupt:
        pass
    finally:
        ngx.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
