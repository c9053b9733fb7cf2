#!/usr/bin/env python3
"""Identity: the same requests to examples/openresty give byte-identical
responses (status, body, headers but Date) from

  nginx            build/bin/nginx, LUAJIT_PERF unset
  nginx+perf       build/bin/nginx, LUAJIT_PERF=1
  nginx-base       build/bin/nginx-base (unpatched luajit2)
  stock            Debian's /usr/sbin/nginx + libnginx-mod-http-lua
  stock+dropin     the same with LD_LIBRARY_PATH=build/lib/luajit2 and
                   LUAJIT_PERF=1 (the patched luajit2 as a drop-in)

Each runs from its own temporary prefix on loopback and is stopped after.
Requests: items (cached and fetched from the backend), /slow (ngx.sleep),
a missing and a wrong API key (401), unknown paths (404), in order, twice.
"""

import argparse
import os
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from examples.openresty import serve
from tests.lib import ljptest

REQUESTS = ([("/api/items/%d" % i, 1 + i % 16) for i in range(1, 41)] +
            [("/api/items/%d/slow" % i, 3) for i in (4, 7, 64, 1000)] +
            [("/api/items/5", None), ("/api/items/5", 999), ("/api/nope", 2),
             ("/api/items/12/x", 2), ("/other", None)])


def responses(ngx):
    out = []
    for _ in range(2):
        for path, key in REQUESTS:
            if key == 999:          # a well-formed key with a wrong checksum
                req = urllib.request.Request(ngx.url + path,
                                             headers={"X-Api-Key": "key-999-00000000"})
                try:
                    with urllib.request.urlopen(req, timeout=5) as r:
                        st, h, b = r.status, dict(r.headers), r.read()
                except urllib.error.HTTPError as e:
                    st, h, b = e.code, dict(e.headers), e.read()
            else:
                st, h, b = ngx.get(path, key=key)
            h.pop("Date", None)
            out.append((path, key, st, sorted(h.items()), b))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nginx", required=True)
    p.add_argument("--nginx-base", required=True)
    p.add_argument("--dropin", required=True, help="build/lib/luajit2")
    o = p.parse_args()
    if not os.path.exists(serve.STOCK_NGINX) or not all(map(os.path.exists,
                                                           serve.STOCK_MODULES)):
        ljptest.fail("Debian's nginx and libnginx-mod-http-lua are not installed "
                     "(.ci/openresty-packages)")
    runs = [("nginx", dict(binary=o.nginx)),
            ("nginx+perf", dict(binary=o.nginx, env={"LUAJIT_PERF": "1"})),
            ("nginx-base", dict(binary=o.nginx_base)),
            ("stock", dict(stock=True)),
            ("stock+dropin", dict(stock=True, env={"LUAJIT_PERF": "1",
                                                   "LD_LIBRARY_PATH": o.dropin}))]
    results = {}
    for name, kw in runs:
        kw.setdefault("env", {})
        kw["env"].setdefault("LUAJIT_PERF", "")
        ngx = serve.Nginx(workers=2, **kw)
        pids = []
        try:
            ngx.start()
            pids = [ngx.master] + ngx.worker_pids()
            if name == "stock+dropin":
                maps = open("/proc/%d/maps" % pids[-1]).read()
                if os.path.join(o.dropin, "libluajit-5.1.so.2") not in maps:
                    ljptest.fail("stock nginx did not load the drop-in library")
            results[name] = responses(ngx)
        finally:
            ngx.stop()
            ljptest.remove_tmp_files(pids)
    ref = results["nginx-base"]
    codes = sorted({r[2] for r in ref})
    ok = ljptest.report(codes == [200, 401, 404],
                        "reference (nginx-base): %d responses, statuses %s" % (len(ref), codes))
    for name, res in results.items():
        diff = [(a, b) for a, b in zip(ref, res) if a != b]
        msg = "%s: %d responses identical to nginx-base" % (name, len(res))
        if diff:
            a, b = diff[0]
            msg = "%s: %d of %d differ; first %s key %s: %r vs %r" % (
                name, len(diff), len(res), a[0], a[1], a[2:], b[2:])
        ok = ljptest.report(not diff and len(res) == len(ref), msg) and ok
    return ok


if __name__ == "__main__":
    ljptest.main(main)
