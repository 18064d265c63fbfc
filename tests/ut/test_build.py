"""The CPU kernel build: cache, concurrent first use, clear errors, no import side effects."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _py(code, env_extra=None, env_drop=(), timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in env_drop}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=ROOT)


def test_import_has_no_side_effects(tmp_path):
    r = _py("""
        import sys, mindspore_bn_grad
        assert mindspore_bn_grad.__version__
        heavy = [m for m in ("mindspore", "yaml", "numpy") if m in sys.modules]
        print("heavy:", heavy)
    """, {"MS_BN_GRAD_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    assert "heavy: []" in r.stdout
    assert not (tmp_path / "cache").exists()


def test_build_is_cached_in_the_configured_dir(tmp_path):
    cache = tmp_path / "cache"
    code = """
        import time
        from mindspore_bn_grad.cpu_kernel import build as cpu_build
        t = time.time(); a = cpu_build.library_path(); t1 = time.time() - t
        t = time.time(); b = cpu_build.library_path(); t2 = time.time() - t
        print(a, b, a == b, t2 < 1.0)
    """
    r = _py(code, {"MS_BN_GRAD_CACHE_DIR": str(cache)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[2:] == ["True", "True"]
    libs = sorted(p.name for p in cache.glob("*.so"))
    assert len(libs) == 1 and r.stdout.split()[0].endswith(libs[0])
    # Different flags are a different build; the first one stays valid.
    r = _py(code, {"MS_BN_GRAD_CACHE_DIR": str(cache), "MS_BN_GRAD_CXXFLAGS": "-DMS_BN_GRAD_TEST_FLAG=1"})
    assert r.returncode == 0, r.stderr
    assert len(list(cache.glob("*.so"))) == 2
    assert not list(cache.glob(".*.so")), "temporary files left behind"


def test_concurrent_first_build(tmp_path):
    """Two processes building into an empty cache at once both succeed with one valid library."""
    cache = tmp_path / "cache"
    code = """
        import numpy as np
        from mindspore_bn_grad.cpu_kernel import native
        x = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
        gi, gw, gb = native.direct(x, x, np.ones(2, np.float32), None, None,
                                    np.zeros(2, np.float32), np.ones(2, np.float32))
        print(gw.tolist(), gb.tolist())
    """
    env = dict(os.environ, MS_BN_GRAD_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.strip() == "[14.0, 126.0] [6.0, 22.0]"
    assert len(list(cache.glob("*.so"))) == 1
    assert not list(cache.glob(".*.so"))


def test_missing_compiler_is_a_clear_error(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    r = _py(f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        from mindspore_bn_grad.cpu_kernel import build as cpu_build
        try:
            cpu_build.library_path()
        except cpu_build.KernelBuildError as e:
            print("ERR", e)
    """, {"MS_BN_GRAD_CACHE_DIR": str(tmp_path / "c"), "PATH": str(empty)},
        env_drop=("CXX", "MS_BN_GRAD_CXX"))
    assert r.returncode == 0, r.stderr
    assert "ERR BatchNormBackward: no C++ compiler found" in r.stdout
    assert "MS_BN_GRAD_CXX" in r.stdout


def test_compile_failure_shows_the_command_and_compiler_output(tmp_path):
    r = _py("""
        from mindspore_bn_grad.cpu_kernel import build as cpu_build
        try:
            cpu_build.library_path()
        except cpu_build.KernelBuildError as e:
            print("ERR", e)
    """, {"MS_BN_GRAD_CACHE_DIR": str(tmp_path / "c"), "MS_BN_GRAD_CXXFLAGS": "--no-such-flag-xyz"})
    assert "ERR BatchNormBackward: building the CPU kernel failed" in r.stdout
    assert "--no-such-flag-xyz" in r.stdout


def test_unwritable_cache_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = _py("""
        from mindspore_bn_grad.cpu_kernel import build as cpu_build
        try:
            cpu_build.library_path()
        except cpu_build.KernelBuildError as e:
            print("ERR", e)
    """, {"MS_BN_GRAD_CACHE_DIR": str(blocker / "sub")})
    assert "ERR BatchNormBackward: cannot write the kernel cache directory" in r.stdout
    assert "MS_BN_GRAD_CACHE_DIR" in r.stdout


def test_attributes_reach_the_kernel_intact():
    """Built against the installed MindSpore's AotExtra header (Attr<T> from ms_aot_compat.h):
    bool, float, int vector and string attributes arrive."""
    from _harness import check, make_arrays
    a = make_arrays((2, 3, 4), data_format="NHWC")
    check("pynative", a, {}, training=False, eps=0.75, output_mask=(True, False, True), data_format="NHWC")


def test_library_exports_no_process_wide_unique_symbols():
    """Two builds of the library in one process (other flags, another version) must not share
    state: a GNU "unique" symbol (a static local of an inline function, like the thread pool)
    binds across libraries even when they are loaded RTLD_LOCAL."""
    nm = __import__("shutil").which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    from mindspore_bn_grad.cpu_kernel import build as cpu_build
    out = subprocess.run([nm, "-DC", "--defined-only", str(cpu_build.library_path())],
                         capture_output=True, text=True, check=True).stdout
    # (the standard library's own, e.g. constant digit tables, are harmless)
    unique = [line for line in out.splitlines() if line.split()[1:2] == ["u"] and "bn_grad" in line]
    assert unique == []


def _fake_mindspore(root, header_text=None):
    """A stand-in `mindspore` package under root (put first on PYTHONPATH), with its own aot header."""
    pkg = root / "mindspore"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('the kernel build must not import mindspore')\n")
    if header_text is not None:
        header = pkg / "include" / "mindspore" / "ccsrc" / "utils" / "custom_aot_extra.h"
        header.parent.mkdir(parents=True)
        header.write_text(header_text)
    return pkg


def test_kernel_is_built_against_the_installed_mindspore_header(tmp_path):
    """The build includes the header of the MindSpore that Python finds, not a copy of ours."""
    _fake_mindspore(tmp_path / "site", "#include <the_installed_header_was_compiled.h>\n")
    code = """
        from mindspore_bn_grad.cpu_kernel import build as cpu_build
        try:
            cpu_build.library_path()
        except cpu_build.KernelBuildError as e:
            print("ERR", e)
    """
    r = _py(code, {"MS_BN_GRAD_CACHE_DIR": str(tmp_path / "c"), "PYTHONPATH": str(tmp_path / "site")})
    assert "ERR BatchNormBackward: building the CPU kernel failed" in r.stdout, r.stdout + r.stderr
    assert "the_installed_header_was_compiled.h: No such file" in r.stdout
    assert str((tmp_path / "site" / "mindspore" / "include").resolve()) in r.stdout


def test_missing_mindspore_header_is_a_clear_error(tmp_path):
    _fake_mindspore(tmp_path / "site")
    r = _py("""
        from mindspore_bn_grad.cpu_kernel import build as cpu_build
        try:
            cpu_build.library_path()
        except cpu_build.KernelBuildError as e:
            print("ERR", e)
    """, {"MS_BN_GRAD_CACHE_DIR": str(tmp_path / "c"), "PYTHONPATH": str(tmp_path / "site")})
    assert "ERR BatchNormBackward: the CPU kernel is built against the installed MindSpore's " \
           "mindspore/ccsrc/utils/custom_aot_extra.h, not found" in r.stdout, r.stdout + r.stderr


def test_default_header_is_the_installed_mindspore_one():
    import importlib.util
    from pathlib import Path
    from mindspore_bn_grad.cpu_kernel import build as cpu_build
    (location,) = importlib.util.find_spec("mindspore").submodule_search_locations
    header = (Path(location) / "include" / cpu_build.MS_AOT_HEADER).resolve()
    flags, key = cpu_build.mindspore_headers()
    assert f'-DMS_BN_GRAD_MS_AOT_HEADER="{header}"' in flags
    assert key.endswith(header.read_bytes()) and str(header).encode() in key


def test_cache_key_follows_the_mindspore_header_path_and_content(tmp_path):
    from mindspore_bn_grad.cpu_kernel import build as cpu_build

    def key(root):
        flags, ms_key = cpu_build.mindspore_headers(root / "include")
        return cpu_build.build_key("g++", cpu_build.flags() + flags, ms_key)

    a = _fake_mindspore(tmp_path / "a", "// AotExtra as in one release\n")
    b = _fake_mindspore(tmp_path / "b", "// AotExtra as in one release\n")
    first = key(a)
    assert key(a) == first
    assert key(b) != first  # same content, another installation
    (a / "include" / cpu_build.MS_AOT_HEADER).write_text("// AotExtra as in another release\n")
    assert key(a) != first


def test_library_loads_without_mindspore():
    """The kernel library does not depend on MindSpore's own libraries (see ms_aot_compat.h)."""
    r = _py("""
        import sys
        from mindspore_bn_grad.cpu_kernel import native
        native.lib()
        print("mindspore imported:", "mindspore" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert "mindspore imported: False" in r.stdout
