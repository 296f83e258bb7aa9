"""The package's build backend (PEP 517), standard library only, so ``pip install clients/python`` needs
nothing from a package index: a wheel is the package's files plus its metadata, zipped."""
from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "queen_client"


def _project() -> dict[str, Any]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _dist() -> tuple[str, str]:
    p = _project()
    return p["name"].replace("-", "_"), p["version"]


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p['description']}", f"Requires-Python: {p['requires-python']}"]
    if "license" in p:
        lines.append(f"License: {p['license']['text']}")
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    lines += [f"Project-URL: {k}, {v}" for k, v in p.get("urls", {}).items()]
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return "\n".join(lines + ["Description-Content-Type: text/markdown", "", readme])


def _package_files() -> list[str]:
    d = os.path.join(ROOT, PACKAGE)
    return sorted(f"{PACKAGE}/{n}" for n in os.listdir(d) if n.endswith(".py") or n == "py.typed")


def _wheel(wheel_directory: str, files: dict[str, bytes]) -> str:
    name, version = _dist()
    info = f"{name}-{version}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata().encode("utf-8")
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: queen_client _build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = io.StringIO()
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{path},sha256={digest},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    files[f"{info}/RECORD"] = record.getvalue().encode("utf-8")
    basename = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, basename), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return basename


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    files = {}
    for rel in _package_files():
        with open(os.path.join(ROOT, rel), "rb") as f:
            files[rel] = f.read()
    return _wheel(wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    # a .pth naming the source folder: edits take effect without reinstalling
    return _wheel(wheel_directory, {f"{PACKAGE}.pth": (ROOT + "\n").encode("utf-8")})


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    name, version = _dist()
    base = f"{name}-{version}"
    with tarfile.open(os.path.join(sdist_directory, f"{base}.tar.gz"), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_build/backend.py"] + _package_files():
            t.add(os.path.join(ROOT, rel), f"{base}/{rel}")
        pkg_info = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return f"{base}.tar.gz"
