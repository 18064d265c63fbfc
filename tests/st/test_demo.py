"""The demo end to end with fewer epochs, in its own process (GRAPH mode, as shipped)."""
import re
import subprocess
import sys

import pytest

pytest.importorskip("sklearn")


def test_demo_two_epochs():
    out = subprocess.run([sys.executable, "-m", "mindspore_bn_grad", "demo", "--epochs", "2"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"rc={out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    lines = out.stdout.splitlines()
    epochs = [line for line in lines if line.startswith("epoch ")]
    assert len(epochs) == 2 and all("loss" in e and "ms/step" in e for e in epochs), out.stdout
    acc = float(re.search(r"^test accuracy: ([0-9.]+)$", out.stdout, re.M).group(1))
    assert acc >= 0.90, out.stdout
    parity = [line for line in lines if line.startswith("gradient parity")]
    assert len(parity) == 1 and parity[0].endswith(" OK"), out.stdout
