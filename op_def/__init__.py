"""Package data: the operator prototype YAML files (mindspore_bn_grad.op_def)."""
