"""A user's own op plugin kept working beside ours (MS_OP_PLUGIN_PATH names one library only).

The chain library is a few lines of C++ (``csrc/op_plugin_chain.cpp.in`` filled in
here) linked against both libraries, ours first. MindSpore asks it for the
registered primitives (the union of both lists, ours first) and looks each
primitive's function up in it; the dynamic linker searches the chain's own
symbols, then ours, then the user's, so a primitive both provide runs ours.
Built once per (user library, our library) pair, in the kernel cache, digest
checked like the kernel library.
"""
import hashlib
import os
import shlex
import subprocess
from pathlib import Path

from .build import (CSRC, KernelBuildError, LIB_STEM, _BuildLock, _private_dir, _sha256, _verified,
                    cache_dir, find_compiler, library_path, DIGEST_SUFFIX)

TEMPLATE = CSRC / "op_plugin_chain.cpp.in"


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def chain_library(user_path: str) -> str:
    """Path of a plugin library serving our primitives and those of ``user_path``."""
    user = os.path.realpath(user_path)
    if not os.path.isfile(user):
        raise KernelBuildError(f"mindspore_bn_grad: MS_OP_PLUGIN_PATH names {user_path!r}, which is "
                               "not a file; fix or unset it")
    ours = str(library_path())
    source = TEMPLATE.read_text(encoding="utf-8").replace("@OURS@", _c_string(ours)).replace(
        "@THEIRS@", _c_string(user))
    h = hashlib.sha256(source.encode())
    with open(user, "rb") as f:
        h.update(_sha256(f).encode())
    key = "chain_" + h.hexdigest()[:20]
    directory = _private_dir(cache_dir())
    lib = directory / f"{LIB_STEM}_{key}.so"
    if _verified(lib):
        return str(lib)
    with _BuildLock(directory, key):
        if not _verified(lib):
            _build(source, ours, user, directory, lib)
    return str(lib)


def _build(source, ours, user, directory: Path, lib: Path):
    src = directory / f".{lib.stem}.cpp"
    tmp = directory / f".{lib.stem}.tmp.so"
    src.write_text(source, encoding="utf-8")
    cmd = [find_compiler(), "-std=c++17", "-O2", "-fPIC", "-shared", str(src), "-o", str(tmp),
           "-Wl,--no-as-needed", ours, user, f"-Wl,-rpath,{os.path.dirname(user)}", "-ldl"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise KernelBuildError("mindspore_bn_grad: building the op plugin chain failed:\n  "
                                   + " ".join(shlex.quote(c) for c in cmd) + "\n" + proc.stderr[-4000:])
        os.chmod(tmp, 0o755)
        with open(tmp, "rb") as f:
            digest = _sha256(f)
        dig = lib.with_name(lib.name + DIGEST_SUFFIX)
        dig_tmp = directory / f".{lib.stem}.tmp{DIGEST_SUFFIX}"
        dig_tmp.write_text(digest + "\n", encoding="ascii")
        os.chmod(dig_tmp, 0o644)
        os.replace(tmp, lib)
        os.replace(dig_tmp, dig)
    finally:
        for t in (src, tmp):
            if t.exists():
                t.unlink()
