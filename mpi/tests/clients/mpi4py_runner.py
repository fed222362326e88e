"""Runs mpi4py's own test suite (its test/main.py) on one rank and records each test's outcome.

    python mpi4py_runner.py TESTDIR OUTDIR SECONDS [main.py options: -e REGEX, --xfile FILE, ...]

Started on every rank by a launcher (nemesis-run, mpiexec.mpich); the harness in
mpi/tests/mpi4py.rs reads what it writes. OUTDIR/rank<R>.txt gets one line per event, written
and flushed as it happens, so that a hang or a crash leaves the tests that finished:

    start <seq> <test id>
    <outcome> <seq> <test id> | <last line of the error>    outcome: pass fail error skip xfail xpass
    end

A test that has a `start` line and no outcome was running when the job ended. A test that runs
longer than SECONDS ends this process with every thread's Python stack on stderr (faulthandler),
and so the job: the harness calls it a hang. Errors outside a test (setUpClass, setUpModule) are
recorded under unittest's name for them, `setUpClass (module.Class)`.
"""

import faulthandler
import os
import sys
import unittest

_log = None
outdir = None


def log(line):
    global _log
    if _log is None:
        from mpi4py import MPI

        rank = MPI.COMM_WORLD.Get_rank()
        _log = open(os.path.join(outdir, f"rank{rank}.txt"), "a", encoding="utf-8")
    _log.write(line + "\n")
    _log.flush()


def last_line(err):
    if isinstance(err, str):
        text = err
    else:
        text = "".join(str(err[1]).splitlines()[-1:]) or err[0].__name__
    return " ".join(text.split())[:200]


class Recording(unittest.TextTestResult):
    seq = 0

    def startTest(self, test):
        Recording.seq += 1
        self._outcome_seen = False
        log(f"start {Recording.seq} {test.id()}")
        faulthandler.dump_traceback_later(limit, exit=True)
        super().startTest(test)

    def stopTest(self, test):
        faulthandler.cancel_dump_traceback_later()
        super().stopTest(test)

    def _record(self, outcome, test, message=""):
        # Class and module fixtures fail outside startTest: no sequence number of their own.
        seq = Recording.seq if isinstance(test, unittest.TestCase) else 0
        log(f"{outcome} {seq} {test.id()} | {message}")

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record("pass", test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record("fail", test, last_line(err))

    def addError(self, test, err):
        super().addError(test, err)
        self._record("error", test, last_line(err))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record("skip", test, last_line(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record("xfail", test)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record("xpass", test)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._record("fail" if failed else "error", test, last_line(err))


class Runner(unittest.TextTestRunner):
    resultclass = Recording


# Only as the program: the suite's mpi4py.futures and mpi4py.util.pool workers (spawned processes)
# import the parent's main module under another name (`__worker__`) to find its functions, and
# must not run the suite themselves.
if __name__ == "__main__":
    testdir, outdir, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
    sys.argv = [os.path.join(testdir, "main.py"), *sys.argv[4:]]
    sys.path.insert(0, testdir)
    sys.dont_write_bytecode = True

    import main  # noqa: E402  (mpi4py's test runner, from TESTDIR)

    try:
        main.main(module=None, testRunner=Runner)
    finally:
        log("end")
        _log.close()
