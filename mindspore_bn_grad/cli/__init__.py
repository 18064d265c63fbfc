"""The commands of ``python -m mindspore_bn_grad`` (one module each; see __main__.py)."""
