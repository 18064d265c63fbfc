"""The CPU kernel library: its build and cache (build.py), its loading and direct calls (native.py),
and the two ways MindSpore can run it as its own BatchNormExt / BatchNormGradExt (the native route):
the op plugin (plugin.py) and the CPU kernel factory (factory.py)."""


def native_kernels_active() -> bool:
    """True when MindSpore runs our kernels as its BatchNormExt / BatchNormGradExt, by either mechanism
    (each proves it with its self-test on first call)."""
    from . import factory, plugin
    return plugin.status() or factory.status()
