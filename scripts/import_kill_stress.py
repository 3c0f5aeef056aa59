#!/usr/bin/env python3
"""Stress `book import` against SIGKILL (the import_crash test's scheme, many more kills).

Imports a 12k-position synthetic book over a 2k one, kills the import at a random moment,
then opens the store (`book info --db`): it must open with the old book or the new one. A store
that does not open is counted (and its directory listing printed, sled's snapshot files
included), then rebuilt so the run goes on.

    scripts/import_kill_stress.py [KILLS=500] [WORK=target/killstress] [MODE=uniform|open]

MODE uniform draws the kill moment in [0, 1.1) x the import's duration, as the test does; open
draws it in [0, 2 x the time a bare `book info --db` takes), the window in which the import
opens the store (sled's recovery, snapshot write). BIN overrides the binary
(default target/release/bookfarm-coordinator). Run it at nice 19 on a shared machine.
"""
import os, random, shutil, signal, subprocess, sys, time

kills = int(sys.argv[1]) if len(sys.argv) > 1 else 500
work = sys.argv[2] if len(sys.argv) > 2 else "target/killstress"
mode = sys.argv[3] if len(sys.argv) > 3 else "uniform"
binary = os.environ.get("BIN", "target/release/bookfarm-coordinator")
seed = int(os.environ.get("SEED", random.randrange(1 << 62)))
rng = random.Random(seed)
env = dict(os.environ, RUST_LOG="error")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
db, old, new = (os.path.join(work, n) for n in ("db", "old.dat", "new.dat"))


def run(*args):
    return subprocess.run([binary, *args], env=env, capture_output=True, text=True)


def timed(*args):
    t0 = time.monotonic()
    r = run(*args)
    if r.returncode != 0:
        sys.exit(f"{args} failed: {r.stderr}")
    return time.monotonic() - t0, r.stdout


run("book", "synth", "--positions", "2000", "--seed", "1", "--plies", "20", old).check_returncode()
run("book", "synth", "--positions", "12000", "--seed", "2", "--plies", "20", new).check_returncode()


def info():
    return run("book", "info", "--db", db)


timed("book", "import", new, "--db", db)
want_new = info().stdout
timed("book", "import", old, "--db", db)
want_old = info().stdout
assert want_old != want_new
span, _ = timed("book", "import", new, "--db", db)
timed("book", "import", old, "--db", db)
open_span, _ = timed("book", "info", "--db", db)
top = 1.1 * span if mode == "uniform" else 2.0 * open_span
print(f"seed {seed} mode {mode}: import {span*1e3:.1f} ms, open {open_span*1e3:.1f} ms, "
      f"kill moments in [0, {top*1e3:.1f} ms)", flush=True)
counts = {"old": 0, "new": 0, "broken": 0, "generating_left": 0}
for i in range(kills):
    at = rng.uniform(0, top)
    child = subprocess.Popen([binary, "book", "import", new, "--db", db], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(at)
    child.send_signal(signal.SIGKILL)
    child.wait()
    left = sorted(os.listdir(db))
    if any(n.endswith(".generating") for n in left):
        counts["generating_left"] += 1
    r = info()
    if r.returncode == 0 and r.stdout == want_old:
        counts["old"] += 1
    elif r.returncode == 0 and r.stdout == want_new:
        counts["new"] += 1
        timed("book", "import", old, "--db", db)
    else:
        counts["broken"] += 1
        sizes = {n: os.path.getsize(os.path.join(db, n)) for n in left
                 if os.path.isfile(os.path.join(db, n))}
        print(f"kill {i} at {at*1e3:.2f} ms: store does not open: "
              f"{r.stderr.strip().splitlines()[-1:]} files {sizes}", flush=True)
        shutil.rmtree(db)
        timed("book", "import", old, "--db", db)
print(f"{kills} kills: {counts}", flush=True)
