"""The native-route session: every test marked ``native_route``, in a pytest process of its own
with MindSpore's CPU op plugin enabled (MS_BN_GRAD_OP_PLUGIN=1) and the kernel-factory route off.

MindSpore reads its op plugin once per process, and the package leaves it off by default
(docs/native_route.md), so these tests cannot run in the default session; this test runs them
and fails with their report when any of them fails or none ran. On a release without MindSpore's
op plugin interface (2.7.x) they must all be skipped, saying so."""
import os
import re
import subprocess
import sys
from pathlib import Path

from mindspore_bn_grad.cpu_kernel import build

ROOT = Path(__file__).resolve().parents[2]


def _files_with_native_route_tests():
    """The test files that mention the marker (collecting only them saves the sub-session collecting
    the whole suite); a file that marks a test otherwise would be missed, so the count below must hold."""
    here = Path(__file__).resolve()
    return [str(p) for p in sorted((ROOT / "tests" / "ut").rglob("test_*.py"))
            if p != here and "native_route" in p.read_text()]


def test_native_route_session_passes(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MS_OP_PLUGIN_PATH",)}
    env["MS_BN_GRAD_OP_PLUGIN"] = "1"
    env["MS_BN_GRAD_NATIVE_KERNELS"] = "off"  # the op plugin's session: converted cells take its route
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "native_route", "-q", "-p", "no:cacheprovider",
                           "-o", "addopts=", "-rfEs", *_files_with_native_route_tests()],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=3000)
    tail = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    if build.plugin_interface_header() is None:  # a release without the mechanism: all skipped, saying why
        skipped = re.search(r"(\d+) skipped", proc.stdout.splitlines()[-1])
        assert skipped and int(skipped.group(1)) >= 40 and "passed" not in proc.stdout.splitlines()[-1], tail
        assert "has no CPU op plugin interface" in proc.stdout, tail
        return
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) >= 40, tail
    assert "skipped" not in proc.stdout.splitlines()[-1], tail
