"""Benchmarks of mindspore-bn-grad (import package ``mindspore_bn_grad_bench``), kept out of the runtime package.

    kernel.py   the CPU kernel against MindSpore's built-in and PyTorch   (bench)
    double.py   the double backward                                    (bench --double)
    train.py    whole networks training, original vs converted         (bench --train)
    ascend.py   the Ascend C kernel's performance model, ResNet-50      (bench --ascend)
    ascend_model.py  that model's launcher (ascend_impl/perf_model)
    nets.py     the networks train.py trains

Run them through ``python -m mindspore_bn_grad bench`` (or bench/bench_cpu.py);
results go to bench/results/ of the checkout, or --out.
"""
