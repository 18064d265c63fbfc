"""The MindSpore releases this package supports, and the differences between them that touch it.

Imported by the modules that need MindSpore (not by ``import mindspore_bn_grad``):
importing it checks the installed MindSpore and raises
``UnsupportedMindSporeError`` (an ``ImportError``) naming the supported range
for any other release. Every behaviour difference between the supported
releases is handled here, nowhere else.
"""
import re

# >= MINIMUM and < BELOW; setup.cfg install_requires states the same range
# (tests/ut/test_ms_compat.py checks that), the README lists the tested releases.
MINIMUM = (2, 7, 0)
BELOW = (2, 11)
SUPPORTED = "mindspore>=2.7.0,<2.11"


class UnsupportedMindSporeError(ImportError):
    """The installed MindSpore is outside the supported range."""


def release(version: str) -> tuple:
    """(major, minor, patch) of a MindSpore version string such as '2.10.0' or '2.7.0rc1'."""
    m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", str(version))
    if m is None:
        return None
    return tuple(int(g or 0) for g in m.groups())


def check_version(version: str) -> None:
    """Raises UnsupportedMindSporeError unless `version` is in the supported range."""
    rel = release(version)
    if rel is None or not MINIMUM <= rel < BELOW:
        raise UnsupportedMindSporeError(
            f"mindspore-bn-grad supports MindSpore >=2.7.0,<2.11 (2.7.0 to 2.10.x), found "
            f"MindSpore {version}; install a supported release: pip install '{SUPPORTED}'")


def _installed_version() -> str:
    import mindspore
    return mindspore.__version__


check_version(_installed_version())
