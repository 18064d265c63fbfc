"""The CPU kernel build: cache, concurrent first use, clear errors, no import side effects."""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Cold builds in these tests are about where and how the library is built, not how fast its code
# runs: at -O0 the compiler needs about a third of the time (the flags join the cache key, so these
# libraries never mix with the optimised ones).
FAST = "-O0"


def _py(code, env_extra=None, env_drop=(), timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in env_drop}
    env["MS_BN_GRAD_NATIVE_KERNELS"] = "off"  # the kernel build, not the import's registration (test_legacy_kernels)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=ROOT)


def test_import_has_no_side_effects(tmp_path):
    """With MS_BN_GRAD_NATIVE_KERNELS=off (which _py sets) the import reads, builds and imports nothing;
    the default's one side effect, the mint kernels' registration, is test_legacy_kernels'."""
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
    r = _py(code, {"MS_BN_GRAD_CACHE_DIR": str(cache), "MS_BN_GRAD_CXXFLAGS": FAST})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[2:] == ["True", "True"]
    libs = sorted(p.name for p in cache.glob("*.so"))
    assert len(libs) == 1 and r.stdout.split()[0].endswith(libs[0])
    # First use says what it does and how long it took, once; the cache is silent.
    assert r.stderr.count("mindspore_bn_grad: building the CPU kernel (") == 1, r.stderr
    assert re.search(r"mindspore_bn_grad: built the CPU kernel in \d+\.\d s: ", r.stderr), r.stderr
    manifest = json.loads((cache / (libs[0] + ".json")).read_text())
    assert os.path.isabs(manifest["compiler"]) and manifest["compiler_version"]
    r = _py(code, {"MS_BN_GRAD_CACHE_DIR": str(cache), "MS_BN_GRAD_CXXFLAGS": FAST})
    assert r.returncode == 0 and "mindspore_bn_grad:" not in r.stderr, r.stderr
    # Different flags are a different build; the first one stays valid.
    r = _py(code, {"MS_BN_GRAD_CACHE_DIR": str(cache), "MS_BN_GRAD_CXXFLAGS": FAST + " -DMS_BN_GRAD_TEST_FLAG=1"})
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
    env = dict(os.environ, MS_BN_GRAD_CACHE_DIR=str(cache), MS_BN_GRAD_CXXFLAGS=FAST,
               MS_BN_GRAD_NATIVE_KERNELS="off")  # the kernel library only, not the import's registration
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
    assert header.read_bytes() in key and str(header).encode() in key
    # and the op plugin's interface (csrc/op_plugin.cpp), where this release ships one
    # (2.8.0 and later; tests/ut/test_ms_compat.py checks which releases do)
    plugin = cpu_build.plugin_interface_header()
    if plugin is None:
        assert not any("MS_BN_GRAD_MS_PLUGIN_HEADER" in f for f in flags)
        return
    assert (Path(location) / "include").resolve() in plugin.parents
    assert f'-DMS_BN_GRAD_MS_PLUGIN_HEADER="{plugin}"' in flags
    assert key.endswith(plugin.read_bytes()) and str(plugin).encode() in key


def test_cache_key_follows_the_mindspore_header_path_and_content(tmp_path):
    from mindspore_bn_grad.cpu_kernel import build as cpu_build

    def key(root):
        flags, ms_key = cpu_build.mindspore_headers(root / "include")
        return cpu_build.build_key(cpu_build.flags() + flags, ms_key)

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


_DIRECT_CALL = """
    import numpy as np
    from mindspore_bn_grad.cpu_kernel import native
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
    gi, gw, gb = native.direct(x, x, np.ones(2, np.float32), None, None,
                                np.zeros(2, np.float32), np.ones(2, np.float32))
    print(native.lib()._name, gw.tolist(), gb.tolist())
"""


def _shipped_cache(tmp_path):
    """A copy of this run's built library and digest in a directory of its own, as an image ships it."""
    from mindspore_bn_grad.cpu_kernel import build as cpu_build
    lib = cpu_build.library_path()
    cache = tmp_path / "shipped"
    cache.mkdir(mode=0o700)
    for name in (lib.name, lib.name + cpu_build.DIGEST_SUFFIX):
        shutil.copy2(lib.parent / name, cache / name)
    return cache, lib.name


def test_cached_library_loads_without_a_compiler(tmp_path):
    """A valid cached library needs no compiler: not on PATH, not even MS_BN_GRAD_CXX naming a missing one."""
    cache, name = _shipped_cache(tmp_path)
    (tmp_path / "bin").mkdir()
    for named in ({}, {"MS_BN_GRAD_CXX": str(tmp_path / "no" / "g++")}):
        r = _py(_DIRECT_CALL, {"MS_BN_GRAD_CACHE_DIR": str(cache), "PATH": str(tmp_path / "bin"), **named},
                env_drop=("CXX", "MS_BN_GRAD_CXX"))
        assert r.returncode == 0, r.stderr
        assert r.stdout.split(maxsplit=1) == [str(cache / name), "[14.0, 126.0] [6.0, 22.0]\n"]
        assert "mindspore_bn_grad:" not in r.stderr  # loaded, not built


def test_named_missing_compiler_fails_when_a_build_is_needed(tmp_path):
    missing = str(tmp_path / "no" / "g++")
    r = _py(_DIRECT_CALL, {"MS_BN_GRAD_CACHE_DIR": str(tmp_path / "empty"), "MS_BN_GRAD_CXX": missing})
    assert r.returncode != 0
    assert f"BatchNormBackward: no C++ compiler found at MS_BN_GRAD_CXX={missing!r}" in r.stderr


_FAKE_CXX = """#!/bin/sh
# Records each call (start, end, arguments), takes a while, writes its -o file.
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
echo "start $$ $(date +%s.%N) $*" >> "$FAKE_CXX_LOG"
case "$*" in *"$FAKE_CXX_FAIL"*) echo "fake compiler: cannot compile this" >&2; exit 3;; esac
sleep 0.7
: > "$out"
echo "end $$ $(date +%s.%N)" >> "$FAKE_CXX_LOG"
"""


def _fake_build(tmp_path, fail="never-matches"):
    cxx = tmp_path / "fake-c++"
    cxx.write_text(_FAKE_CXX)
    cxx.chmod(0o755)
    log = tmp_path / "calls.log"
    r = _py("""
        from mindspore_bn_grad.cpu_kernel import build as cpu_build
        try:
            print("LIB", cpu_build.library_path())
        except cpu_build.KernelBuildError as e:
            print("ERR", e)
    """, {"MS_BN_GRAD_CACHE_DIR": str(tmp_path / "c"), "MS_BN_GRAD_CXX": str(cxx),
          "FAKE_CXX_LOG": str(log), "FAKE_CXX_FAIL": fail})
    return r, log.read_text().splitlines() if log.exists() else []


def test_build_compiles_each_file_in_its_own_process_in_parallel_then_links(tmp_path):
    from mindspore_bn_grad.cpu_kernel import build as cpu_build
    units = [s.name for s in cpu_build.sources() if s.suffix == ".cpp"]
    r, calls = _fake_build(tmp_path)
    assert r.stdout.startswith("LIB "), r.stdout + r.stderr
    starts = [c.split(" ", 3) for c in calls if c.startswith("start ") and not c.endswith(" --version")]
    compiles = [args for _, _, _, args in starts if " -c " in args]
    assert sorted(os.path.basename(a.split(" -c ")[1].split()[0]) for a in compiles) == sorted(units)
    links = [args for _, _, _, args in starts if " -c " not in args]
    assert len(links) == 1 and "-shared" in links[0] and links[0].count(".o ") == len(units)
    assert starts[-1][3] == links[0]  # linked after every compile
    # How many ran at once: as many as this process may use CPUs (one per file at most).
    events = sorted([(float(c.split()[2]), 1) for c in calls if c.startswith("start ")
                     and not c.endswith(" --version")]
                    + [(float(c.split()[2]), -1) for c in calls if c.startswith("end ")])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == min(cpu_build.usable_cpus(), len(units))
    jobs = min(cpu_build.usable_cpus(), len(units))
    assert f"building the CPU kernel ({len(units)} C++ files, {jobs} at a time" in r.stderr


def test_one_failing_file_fails_the_build_with_its_command_and_output(tmp_path):
    r, calls = _fake_build(tmp_path, fail="bn_sync_cpu.cpp")
    assert "ERR BatchNormBackward: building the CPU kernel failed:" in r.stdout, r.stdout + r.stderr
    assert "bn_sync_cpu.cpp" in r.stdout and "fake compiler: cannot compile this" in r.stdout
    assert not any(" -c " not in c for c in calls if c.startswith("start ")), "linked after a failure"
    assert not list((tmp_path / "c").glob(".*")), "temporary files left behind"
    assert "built the CPU kernel in" not in r.stderr


def test_unbalanced_quote_in_cxxflags_names_the_variable(monkeypatch):
    from mindspore_bn_grad.cpu_kernel import build as cpu_build
    monkeypatch.setenv("MS_BN_GRAD_CXXFLAGS", '-DFOO="')
    with pytest.raises(cpu_build.KernelBuildError,
                       match=r"MS_BN_GRAD_CXXFLAGS expected compiler flags in shell syntax, got '-DFOO=\"' "
                             r"\(No closing quotation\)"):
        cpu_build.flags()
