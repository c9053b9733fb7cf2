"""ljperf error paths: each is ONE line on stderr starting `ljperf`, a
non-zero exit status, never a traceback.

  test_errors.py help|perf-missing|cmd-not-found|not-patched|paranoid|empty|bad-args|
                 no-switch
"""

import os
import shutil
import subprocess
import sys
import time

from tests.lib import ljptest as t
from ljperf import remote as ljremote


def one_error(r, code, *needles, what=""):
    """R failed with CODE and exactly one stderr line containing NEEDLES."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    t.check("Traceback" not in r.stderr and "Traceback" not in r.stdout, what + ": no traceback")
    t.check(r.returncode == code, "%s: exit status %d (got %d)" % (what, code, r.returncode))
    t.check(len(lines) == 1 and lines[0].startswith("ljperf"),
            "%s: one error line: %s" % (what, " / ".join(lines)))
    for n in needles:
        t.check(n in r.stderr, "%s: says %r" % (what, n))


def case_help(s):
    for args in (["--help"], ["record", "--help"], ["report", "--help"]):
        r = s.ljperf(args)
        t.check(r.returncode == 0 and "usage:" in r.stdout and not r.stderr,
                "ljperf %s prints its usage" % " ".join(args))
    r = s.ljperf(["record", "--help"])
    for word in ("--duration", "-p PID", "-F HZ", "-o DIR", "perf_event_paranoid",
                 "LUAJIT_PERF_DIR"):
        t.check(word in r.stdout, "record --help mentions " + word)
    r = s.ljperf(["--help"])
    for word in ("Lua function", "JIT trace", "VM / runtime", "flamegraph.html"):
        t.check(word in r.stdout, "--help documents " + word)
    r = s.ljperf([])
    t.check(r.returncode == 2 and "usage:" in r.stderr, "no subcommand: usage, exit 2")


def case_perf_missing(s):
    empty = s.path("emptybin")
    os.mkdir(empty)
    env = s.env({"PATH": empty})
    out = s.path("out")
    r = s.ljperf(["record", "-o", out, "--", "/bin/true"], env=env)
    one_error(r, 1, "perf not found", "install linux-perf", what="record without perf")
    t.check(not os.path.exists(out), "no output directory made")
    os.mkdir(out)
    open(os.path.join(out, "perf.data"), "w").close()
    r = s.ljperf(["report", out], env=env)
    one_error(r, 1, "perf not found", what="report without perf")


def case_cmd_not_found(s):
    t.need_perf()
    out = s.path("out")
    r = s.ljperf(["record", "-o", out, "--", "no-such-command-ljperf"])
    one_error(r, 1, "command not found: no-such-command-ljperf", what="unknown command")
    t.check(not os.path.exists(out), "no output directory made")
    r = s.ljperf(["record", "-o", out, "--", "./no/such/file"])
    one_error(r, 1, "command not found: ./no/such/file", what="missing path")
    r = s.ljperf(["record", "-o", out, "--", s.dir])
    one_error(r, 1, "not an executable file", what="a directory")


def case_not_patched(s):
    t.need_perf()
    base = t.built("bin", "luajit-base")
    for name, cmd in (("sleep", ["/bin/sleep", "0.3"]),
                      ("luajit-base", [base, "-e", "local x = 0 for i = 1, 3e7 do x = x + i end"])):
        out = s.path("out-" + name)
        r = s.ljperf(["record", "-o", out, "--"] + cmd)
        one_error(r, 1, "does not use the ljperf-patched LuaJIT", "no jitdump appeared",
                  "exited with status 0", what=name)
        t.check(os.path.isfile(os.path.join(out, "perf.data")), name + ": perf.data kept")
    t.check(not os.path.exists(os.path.join(s.home, ".debug")), "nothing written to ~/.debug")


def unprivileged_prefix(s):
    """(prefix, python, ljperf): run as nobody when we are root
    (perf_event_paranoid does not apply to root). The Python of /root/.pyenv
    is out of nobody's reach: Debian's; so may be the clone (under /root): a
    copy of ljperf (its script and package) in the test's directory."""
    if os.geteuid() != 0:
        return [], sys.executable, t.ljperf_bin()
    py = "/usr/bin/python3"
    if not os.path.exists(py):
        t.fail("/usr/bin/python3 needed to run ljperf as nobody")
    os.chmod(s.dir, 0o755)
    app = s.path("app")
    shutil.copytree(os.path.join(t.ROOT, "ljperf"), os.path.join(app, "ljperf"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    os.makedirs(os.path.join(app, "tools", "ljperf"))
    script = os.path.join(app, "tools", "ljperf", "ljperf.py")
    shutil.copy(os.path.join(t.ROOT, "tools", "ljperf", "ljperf.py"), script)
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"], py, script


def case_paranoid(s):
    """kernel.perf_event_paranoid 3 (Debian's default). Simulated: ljperf reads
    the value from LJPERF_PARANOID_FILE, and a stand-in perf refuses the way a
    Debian kernel makes perf refuse at 3. Then the real perf with the value 3,
    on this (upstream) kernel, which treats 3 as 2: ljperf must not refuse."""
    t.need_perf()
    prefix, py, ljperf = unprivileged_prefix(s)
    value = s.path("paranoid")
    with open(value, "w") as f:
        f.write("3\n")
    fake = s.path("fakeperf")
    os.mkdir(fake)
    with open(os.path.join(fake, "perf"), "w") as f:
        f.write("#!/bin/sh\n"
                "echo 'Error:' >&2\n"
                "echo 'Access to performance monitoring and observability operations is "
                "limited.' >&2\n"
                "echo 'perf_event_paranoid setting is 3:' >&2\n"
                "exit 255\n")
    os.chmod(os.path.join(fake, "perf"), 0o755)
    open_dir = s.path("w")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)

    def run(path, out):
        cmd = prefix + [py, ljperf, "record", "-o", out, "--", "/bin/true"]
        env = s.env({"LJPERF_PARANOID_FILE": value, "PATH": path, "HOME": open_dir})
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        print("$ %s -> %d\n  | %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
        return r

    r = run(fake + ":" + os.environ.get("PATH", "/usr/bin:/bin"), os.path.join(open_dir, "a"))
    one_error(r, 1, "kernel.perf_event_paranoid is 3, ljperf needs <= 2",
              "sysctl kernel.perf_event_paranoid=2", what="paranoid 3, perf refusing")
    t.check(not os.path.exists(os.path.join(open_dir, "a")), "no output directory made")
    r = run(os.environ.get("PATH", "/usr/bin:/bin"), os.path.join(open_dir, "b"))
    one_error(r, 1, "does not use the ljperf-patched LuaJIT",
              what="paranoid 3, a kernel that allows it: recorded, then /bin/true is no LuaJIT")


def case_empty(s):
    """A patched luajit blocked in io.read(): attached for 1 s, no samples."""
    t.need_perf()
    luajit = t.built("bin", "luajit")
    p = s.start([luajit, "-e", "io.read()"], env=s.env({"LUAJIT_PERF": "1",
                                                        "LUAJIT_PERF_DIR": s.dir}),
                stdin=subprocess.PIPE)
    dump = s.path("jit-%d.dump" % p.pid)
    t.check(t.wait_for(lambda: os.path.exists(dump)), "the idle luajit writes its jitdump")
    time.sleep(0.3)
    out = s.path("out")
    r = s.ljperf(["record", "-p", str(p.pid), "--duration", "1", "-o", out])
    one_error(r, 1, "no samples", what="idle process")
    t.check(p.poll() is None, "the attached process still runs")
    p.stdin.close()
    p.wait(timeout=10)


def case_bad_args(s):
    out = s.path("out")
    r = s.ljperf(["record"])
    one_error(r, 2, "nothing to record", what="record without a command")
    r = s.ljperf(["record", "-p", "1", "--", "/bin/true"])
    one_error(r, 2, "either -p PID or a command", what="-p and a command")
    r = s.ljperf(["record", "--duration", "0", "--", "/bin/true"])
    one_error(r, 2, "--duration", what="--duration 0")
    r = s.ljperf(["record", "-F", "lots", "--", "/bin/true"])
    one_error(r, 2, "invalid int value", "see ljperf record --help", what="-F lots")
    r = s.ljperf(["report", s.path("nonexistent")])
    one_error(r, 1, "no such directory", what="report of nothing")
    os.mkdir(out)
    r = s.ljperf(["report", out])
    one_error(r, 1, "has no perf.data", what="report of an empty directory")
    open(os.path.join(out, "perf.data"), "w").close()
    r = s.ljperf(["record", "-o", out, "--", "/bin/true"])
    one_error(r, 1, "already holds a recording", what="record into a used directory")
    t.need_perf()
    r = s.ljperf(["record", "-p", "999999999", "--duration", "1"])
    one_error(r, 1, "no process with pid 999999999", what="-p of no process")


def timed(s, args):
    t0 = time.monotonic()
    r = s.ljperf(args)
    return r, time.monotonic() - t0


def case_no_switch(s):
    """-p of a process that can never switch recording on and writes no
    jitdump: not LuaJIT, or LUAJIT_PERF_REMOTE=0. One line within 1 s,
    before recording (no output directory), and the process is untouched."""
    t.need_perf()
    luajit = t.built("bin", "luajit")
    busy = "io.stdout:write('ready\\n') io.stdout:flush() while true do local t = {} end"
    for what, cmd, env, needles in (
            ("not LuaJIT", ["/bin/sleep", "30"], {},
             ["no ljperf control block in it (not the ljperf-patched LuaJIT)",
              "writes no jitdump (no /tmp/jit-%d.dump)"]),
            ("LUAJIT_PERF_REMOTE=0", [luajit, "-e", busy], {"LUAJIT_PERF_REMOTE": "0"},
             ["LUAJIT_PERF_REMOTE=0 in its environment"])):
        p = s.start(cmd, env=s.env(env), stdout=subprocess.PIPE)
        if cmd[0] == luajit:
            t.check(p.stdout.readline().strip() == b"ready", what + ": luajit runs")
        out = s.path("o-" + what.split()[0])
        start = timed(s, ["record", "--help"])[1]     # Python and ljperf starting
        r, took = timed(s, ["record", "-p", str(p.pid), "--duration", "5", "-o", out])
        one_error(r, 1, "cannot record Lua frames: pid %d" % p.pid,
                  *[n.replace("%d", str(p.pid)) for n in needles], what=what)
        t.check(took <= start + 1.0, "%s: answered within 1 s: %.2f s (of which %.2f s "
                "are ljperf's start-up on this machine now)" % (what, took, start))
        t.check(not os.path.exists(out), what + ": no output directory made")
        t.check(p.poll() is None, what + ": the process runs on")
        blocks = [ljremote.Block(p.pid, a).read() for a in ljremote.find_blocks(p.pid)]
        t.check(all(b["seq"] == 0 for b in blocks),
                what + ": no request written into it (%d control blocks)" % len(blocks))
        s.stop(p)


CASES = {
    "help": case_help,
    "perf-missing": case_perf_missing,
    "cmd-not-found": case_cmd_not_found,
    "not-patched": case_not_patched,
    "paranoid": case_paranoid,
    "empty": case_empty,
    "bad-args": case_bad_args,
    "no-switch": case_no_switch,
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: test_errors.py " + "|".join(CASES))
        sys.exit(2)

    def test():
        with t.Session() as s:
            CASES[sys.argv[1]](s)
    t.main(test)


if __name__ == "__main__":
    main()
