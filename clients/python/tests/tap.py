"""Runs the tests in this folder (unittest) and prints TAP, as scripts/test.sh counts it:
``python3 clients/python/tests/tap.py [pattern]``."""
from __future__ import annotations

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))


class TapResult(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.t0 = 0.0

    def startTest(self, test: unittest.TestCase) -> None:
        super().startTest(test)
        self.t0 = time.monotonic()

    def _line(self, ok: bool, test: unittest.TestCase, why: str = "") -> None:
        self.n += 1
        name = test.id().split(".", 1)[-1]
        print(f"{'ok' if ok else 'not ok'} {self.n} - {name} ({time.monotonic() - self.t0:.2f}s)", flush=True)
        for line in why.rstrip().splitlines():
            print(f"# {line}", flush=True)

    def addSuccess(self, test: unittest.TestCase) -> None:
        super().addSuccess(test)
        self._line(True, test)

    def addFailure(self, test: unittest.TestCase, err: object) -> None:
        super().addFailure(test, err)  # type: ignore[arg-type]
        self._line(False, test, self.failures[-1][1])

    def addError(self, test: unittest.TestCase, err: object) -> None:
        super().addError(test, err)  # type: ignore[arg-type]
        if isinstance(test, unittest.TestCase):
            self._line(False, test, self.errors[-1][1])
        else:  # a module or class fixture
            self.n += 1
            print(f"not ok {self.n} - {test}", flush=True)
            for line in self.errors[-1][1].rstrip().splitlines():
                print(f"# {line}", flush=True)

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase, err: object) -> None:
        # A failed subtest fails its test: without this line it would leave no trace in the TAP.
        super().addSubTest(test, subtest, err)  # type: ignore[arg-type]
        if err is not None:
            self._line(False, subtest, (self.failures + self.errors)[-1][1])

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        super().addSkip(test, reason)
        self.n += 1
        print(f"ok {self.n} - {test.id()} # SKIP {reason}", flush=True)


def main() -> int:
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    if len(sys.argv) > 1:
        flat: list[unittest.TestCase] = []

        def walk(s: unittest.TestSuite) -> None:
            for t in s:
                if isinstance(t, unittest.TestSuite):
                    walk(t)
                else:
                    flat.append(t)
        walk(suite)
        suite = unittest.TestSuite(t for t in flat if sys.argv[1] in t.id())
    result = TapResult()
    suite.run(result)
    print(f"1..{result.n}")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
