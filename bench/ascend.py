"""`python -m mindspore_bn_grad bench --ascend [--soc NAME] [--dtype D] [--json FILE]`: the Ascend C
kernel's performance model (bench/ascend_model.py) on the 53 BatchNorm layers of a ResNet-50
training step at batch 32, on every SoC line of op_def/ascend_soc_capabilities.yaml.

Per shape: the strategy the tiling picks, cores used and the largest core's share of the bytes,
GM bytes per element (ours, CANN ops-nn batch_norm_grad_v3's strategy as documented, the floor),
modeled time against the GM-bandwidth bound of the floor, the floor of the modeled time that no design
can beat (bench/ascend_floor.py; in multiples of the bound, and the pipe that sets it), the combine's
share of the modeled time, UB high-water mark, smallest activation burst. Then the step totals. A model,
not a measurement: tests/st and scripts/run_st.sh time the kernel on a board.
"""
import argparse
import json
import sys

from . import ascend_floor, ascend_model

BATCH = 32
# ResNet-50 (v1.5: stride on the 3x3 conv) BatchNorm layers: (channels, spatial side) -> layers.
RESNET50_BN = {(64, 112): 1, (64, 56): 6, (256, 56): 4, (128, 56): 1, (128, 28): 7, (512, 28): 5, (256, 28): 1,
               (256, 14): 11, (1024, 14): 7, (512, 14): 1, (512, 7): 5, (2048, 7): 4}
OPSNN_FULL_LOAD_ELEMS = 12000  # batch_norm_grad_v3 reads once when N x align(HW) <= this (issue 27's reading)


def resnet50_shapes(batch=BATCH):
    """[(shape, layers)] of the 53 BatchNorm layers, NCHW."""
    return [((batch, c, s, s), n) for (c, s), n in RESNET50_BN.items()]


OPSNN_CHANNEL_VECTORS = 5  # mean, rstd, gamma in; dgamma, dbeta out (its tiling's BNG_NEED_RESERVE_UB_PARAM_NUM)


def opsnn_bytes_per_element(shape, dtype):
    """GM bytes per element of the ops-nn strategy: 3 accesses of x / dy / dx when full-loaded, else 5 (x and dy
    read twice), plus its five per-channel vectors once (its partial sums in the two-pass case are not counted)."""
    eb = ascend_model.DTYPES[dtype][1]
    n, c, hw = shape[0], shape[1], 1
    for d in shape[2:]:
        hw *= d
    per_block = 32 // eb
    aligned = -(-hw // per_block) * per_block
    accesses = 3 if n * aligned <= OPSNN_FULL_LOAD_ELEMS else 5
    return accesses * eb + OPSNN_CHANNEL_VECTORS * c * eb / (n * c * hw)


def row(r, layers):
    """The JSON row of one (soc, shape, dtype)."""
    floor = ascend_floor.floor(r.soc, r.shape, r.dtype)
    return {
        "soc": r.soc, "shape": list(r.shape), "dtype": r.dtype, "layers": layers, "strategy": r.strategy,
        "gm_bytes_per_element": round(r.gm_bytes_per_element, 4),
        "cores_used": r.tiling.used_cores,
        "max_core_share": round(r.max_core_share, 5),
        "modeled_us": round(r.modeled_us, 3),
        "bound_us": round(r.bound_us, 3),
        "activation_accesses": round(r.activation_accesses, 4),
        "requested_accesses": round(r.requested_accesses, 4), "l2_hit_bytes": r.l2_hit_bytes,
        "l2_rounds": bool(r.tiling.l2_rounds),
        "opsnn_bytes_per_element": round(opsnn_bytes_per_element(r.shape, r.dtype), 4),
        "floor_bytes_per_element": 3 * r.elem_bytes,
        "gm_bytes": r.gm_bytes, "elements": r.elements, "ub_high_water": r.ub_high_water,
        "min_burst_bytes": r.min_burst, "sync_alls": max(c.sync_alls for c in r.cores),
        "busy_us": {p: round(r.busy_us(p), 3) for p in ("s", "v", "mte2", "mte3")},
        "combine_us": round(r.combine_us, 3), "combine_share": round(r.combine_share, 4),
        "floor_us": round(floor["us"], 3), "floor_pipe": floor["pipe"],
        "floor_pipes_us": {p: round(t, 3) for p, t in floor["pipes_us"].items()},
    }


def model_all(socs, dtypes, shapes, lib=None):
    lib = lib or ascend_model.build()
    return [row(ascend_model.run(lib, soc, shape, dtype), layers)
            for soc in socs for dtype in dtypes for shape, layers in shapes]


def totals(rows):
    """Per (soc, dtype): the step's GM bytes (ours, ops-nn, floor) and modeled / bound / floor time."""
    out = {}
    for r in rows:
        t = out.setdefault((r["soc"], r["dtype"]), {"soc": r["soc"], "dtype": r["dtype"], "layers": 0, "gm_bytes": 0,
                                                    "opsnn_bytes": 0, "floor_bytes": 0, "modeled_us": 0.0,
                                                    "bound_us": 0.0, "floor_us": 0.0})
        n = r["layers"]
        t["layers"] += n
        t["gm_bytes"] += n * r["gm_bytes"]
        t["opsnn_bytes"] += n * r["opsnn_bytes_per_element"] * r["elements"]
        t["floor_bytes"] += n * r["floor_bytes_per_element"] * r["elements"]
        t["modeled_us"] += n * r["modeled_us"]
        t["bound_us"] += n * r["bound_us"]
        t["floor_us"] += n * r["floor_us"]
    return list(out.values())


def print_table(rows, out=sys.stdout):
    head = (f"{'shape':<20}{'n':>3} {'strategy':<12}{'cores':>5}{'share':>7}{'B/el':>7}{'ops-nn':>7}{'floor':>6}"
            f"{'model us':>10}{'bound us':>10}{'x bound':>8}{'floor x':>8}{'by':>5}{'comb%':>6}{'UB KiB':>7}{'burst':>6}")
    last = None
    for r in rows:
        if (r["soc"], r["dtype"]) != last:
            last = (r["soc"], r["dtype"])
            print(f"\n{r['soc']} {r['dtype']}", file=out)
            print(head, file=out)
        ratio = r["modeled_us"] / r["bound_us"] if r["bound_us"] else 0.0
        floor = r["floor_us"] / r["bound_us"] if r["bound_us"] else 0.0
        print(f"{str(tuple(r['shape'])):<20}{r['layers']:>3} {r['strategy']:<12}{r['cores_used']:>5}"
              f"{r['max_core_share']:>7.3f}{r['gm_bytes_per_element']:>7.2f}{r['opsnn_bytes_per_element']:>7.2f}"
              f"{r['floor_bytes_per_element']:>6}{r['modeled_us']:>10.1f}{r['bound_us']:>10.1f}{ratio:>8.2f}"
              f"{floor:>8.2f}{r['floor_pipe']:>5}"
              f"{100 * r['combine_share']:>6.1f}"
              f"{r['ub_high_water'] / 1024:>7.1f}{r['min_burst_bytes']:>6}", file=out)
    print("\nResNet-50 step (53 layers, batch 32): GM bytes ours / ops-nn / floor, modeled / bound / floor time",
          file=out)
    for t in totals(rows):
        print(f"  {t['soc']:<13}{t['dtype']:<9}{t['gm_bytes'] / 1e9:7.2f} / {t['opsnn_bytes'] / 1e9:5.2f} / "
              f"{t['floor_bytes'] / 1e9:5.2f} GB   {t['modeled_us']:9.1f} / {t['bound_us']:8.1f} / "
              f"{t['floor_us']:8.1f} us", file=out)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m mindspore_bn_grad bench --ascend", description=__doc__.splitlines()[0])
    socs = list(ascend_model.capabilities())
    p.add_argument("--soc", choices=socs, action="append", help="SoC line (repeatable; default: all)")
    p.add_argument("--dtype", choices=["float32", "float16"], action="append", help="default: both")
    p.add_argument("--json", metavar="FILE", help="write the rows and totals as JSON")
    args = p.parse_args(argv)
    try:
        rows = model_all(args.soc or socs, args.dtype or ["float32", "float16"], resnet50_shapes())
    except (RuntimeError, OSError) as e:
        print(f"bench --ascend: {e}", file=sys.stderr)
        return 2
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "totals": totals(rows)}, f, indent=1)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
