"""nginx serving a test's own Lua module from tests/openresty (mem.py,
offcpu.py): examples/openresty/serve.Nginx with a configuration of the
subclass's LOCATIONS instead of the example's; and an nginx started
without the VM's LUAJIT_PERF* variables (those and remote.py)."""

from examples.openresty import serve
from tests.lib import ljptest

CONF = """\
@USER@
worker_processes @WORKERS@;
daemon off;
master_process on;
error_log @PREFIX@/logs/error.log warn;
pid @PREFIX@/logs/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path @PREFIX@/tmp/body;
    proxy_temp_path @PREFIX@/tmp/proxy;
    fastcgi_temp_path @PREFIX@/tmp/fastcgi;
    uwsgi_temp_path @PREFIX@/tmp/uwsgi;
    scgi_temp_path @PREFIX@/tmp/scgi;
    lua_package_path "@APPDIR@/?.lua;;";
    server {
        listen 127.0.0.1:@PORT@ reuseport;
@LOCATIONS@
    }
}
"""


class LuaAppNginx(serve.Nginx):
    """LOCATIONS: the server's `location` lines; PROBE: a path that answers
    200 once nginx serves; APPDIR: where the Lua modules are."""
    LOCATIONS = ""
    PROBE = "/"
    APPDIR = ""

    def render(self):
        conf = CONF
        for k, v in (("USER", "user %s;" % self.user if self.user else ""),
                     ("WORKERS", str(self.workers)), ("PREFIX", self.prefix),
                     ("APPDIR", self.APPDIR), ("PORT", str(self.port)),
                     ("LOCATIONS", self.LOCATIONS.rstrip("\n"))):
            conf = conf.replace("@%s@" % k, v)
        return conf

    def answers(self):
        try:
            return self.get(self.PROBE, key=None)[0] == 200
        except OSError:
            return False


# What the VM reads at its start: a server "started without LUAJIT_PERF".
PERF_VARS = ("LUAJIT_PERF", "LUAJIT_PERF_DIR", "LUAJIT_PERF_REMOTE", "LUAJIT_PERF_MEMRATE")


def without_perf_env(ngx):
    """NGX (a serve.Nginx) with none of PERF_VARS in its environment."""
    for k in PERF_VARS:
        ngx.env.pop(k, None)
    return ngx


def start(ngx):
    """Starts NGX; a server that does not come up fails the test in one line."""
    try:
        ngx.start()
    except RuntimeError as e:
        ljptest.fail(str(e))


def start_workers(ngx):
    """Starts NGX (two workers) as start() does: (its workers, the master's
    and workers' pids, whether it has two workers, reported)."""
    start(ngx)
    master, workers = ngx.master, ngx.worker_pids()
    ok = ljptest.report(len(workers) == 2, "nginx master %d, workers %s" % (master, workers))
    return workers, [master] + workers, ok
