"""The package as pip installs it: the in-tree backend's wheel holds the package, py.typed and its
metadata, and a Python with only that wheel's contents imports it. With pip present, ``pip install``
of the folder works with no package index."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

from harness import HERE

PKG = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(PKG, "_build"))
import backend  # noqa: E402


class Package(unittest.TestCase):
    def test_the_wheel_holds_the_package_and_imports(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            name = backend.build_wheel(d)
            self.assertEqual(name, "queen_client-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = set(z.namelist())
                for need in ("queen_client/__init__.py", "queen_client/aio.py", "queen_client/py.typed",
                             "queen_client-0.1.0.dist-info/METADATA", "queen_client-0.1.0.dist-info/RECORD"):
                    self.assertIn(need, names)
                self.assertFalse(any(n.startswith("tests/") for n in names))
                z.extractall(os.path.join(d, "site"))
            r = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                                "import queen_client; print(queen_client.__file__, queen_client.__version__)",
                                os.path.join(d, "site")], capture_output=True, text=True, cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith(os.path.join(d, "site", "queen_client")), r.stdout)

    @unittest.skipUnless(importlib.util.find_spec("pip") is not None, "pip is not installed")
    def test_pip_installs_the_folder_without_an_index(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                                os.path.join(d, "t"), PKG], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertTrue(os.path.exists(os.path.join(d, "t", "queen_client", "py.typed")))

    def test_pip_installs_the_folder_into_a_venv_as_the_readme_says(self) -> None:
        # The README's "pip install clients/python", run by a venv's own pip with no index: the
        # installed package imports from the venv's site-packages and carries its license and
        # repository, as a package index would show them.
        with tempfile.TemporaryDirectory() as d:
            venv = os.path.join(d, "venv")
            r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, "python3 -m venv (Debian: python3-venv)\n" + r.stdout + r.stderr)
            py = os.path.join(venv, "bin", "python")
            r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", PKG],
                               capture_output=True, text=True, timeout=300, cwd=d)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            r = subprocess.run([py, "-I", "-c", "import importlib.metadata as m, queen_client; "
                                "print(queen_client.__file__); md = m.metadata('queen-client'); "
                                "print(md['License']); print(md.get_all('Project-URL'))"],
                               capture_output=True, text=True, cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            where, license_, urls = r.stdout.splitlines()
            self.assertTrue(where.startswith(venv), where)
            self.assertEqual(license_, "Apache-2.0")
            self.assertIn("Repository, https://", urls)


if __name__ == "__main__":
    unittest.main()
