"""The type hints hold: mypy --strict over the package and the example (Debian's python3-mypy)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

from harness import HERE

PKG = os.path.dirname(HERE)


class Types(unittest.TestCase):
    @unittest.skipUnless(importlib.util.find_spec("mypy") is not None, "mypy is not installed (python3-mypy)")
    def test_mypy_strict(self) -> None:
        cache = os.path.join(tempfile.gettempdir(), "queen-client-mypy-cache")
        r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, "queen_client",
                            os.path.join("examples", "exactly_once.py")], cwd=PKG, capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
