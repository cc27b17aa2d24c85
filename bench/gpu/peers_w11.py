#!/usr/bin/env python3
"""W11 peers on the GPU: PyTorch eager and torch.compile(dynamic=True) on the box counts smelt used.

Usage: peers_w11.py SMELT_W11.json OUT.json [OUT.txt]

Reads bench_w11_gpu's JSON (its rows and the box count of every call), runs the same pipeline in
PyTorch on the same counts and distributions (boxes x1,y1 in [0,1000), w,h in [4,64); scores
standard normal logits): sigmoid -> threshold 0.5 -> nonzero -> gather -> clip to [0,1024], scale
-> NMS (IoU 0.5, at most 300 kept) -> TopK(min(n,100)) -> gather. NMS is torchvision.ops.nms when
torchvision imports with CUDA ops, else a torch implementation (IoU matrix and a greedy pass); the
table says which. Timing as smelt's: host clock around call + torch.cuda.synchronize(), 8 warm-up
calls, then one call per remaining count (each count new), median and max. torch.compile's
recompilations after warm-up are the graphs torch._dynamo compiled meanwhile (its unique_graphs counter). Writes OUT.json with every
row (smelt's included) and a text table (OUT.txt and stdout).
"""
import json
import statistics
import sys
import time

import torch


def torch_nms(boxes, scores, iou):
    """Greedy NMS in torch (boxes as x1,y1,x2,y2): the IoU matrix, then one pass in score order."""
    order = torch.argsort(scores, descending=True, stable=True)
    b = boxes[order]
    x1, y1, x2, y2 = b.unbind(1)
    area = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
    ix1 = torch.maximum(x1[:, None], x1[None, :])
    iy1 = torch.maximum(y1[:, None], y1[None, :])
    ix2 = torch.minimum(x2[:, None], x2[None, :])
    iy2 = torch.minimum(y2[:, None], y2[None, :])
    inter = (ix2 - ix1).clamp(min=0) * (iy2 - iy1).clamp(min=0)
    over = inter / (area[:, None] + area[None, :] - inter) > iou
    over_host = over.cpu()
    n = b.shape[0]
    removed = torch.zeros(n, dtype=torch.bool)
    keep = []
    for i in range(n):
        if removed[i]:
            continue
        keep.append(i)
        removed |= over_host[i]
    return order[torch.tensor(keep, dtype=torch.long, device=boxes.device)]


def pick_nms():
    try:
        import torchvision
        t = torch.rand(4, 4, device="cuda")
        t[:, 2:] += t[:, :2]
        torchvision.ops.nms(t, torch.rand(4, device="cuda"), 0.5)
        return torchvision.ops.nms, "torchvision.ops.nms " + torchvision.__version__
    except Exception as e:  # noqa: BLE001 - any failure means: use the torch implementation
        return torch_nms, "torch implementation (torchvision unavailable: %s)" % type(e).__name__


def make_w11(nms):
    def w11(boxes, scores):
        prob = torch.sigmoid(scores)
        idx = torch.nonzero(prob > 0.5).squeeze(1)
        kb = boxes[idx]
        ks = prob[idx]
        unit = kb.clamp(0.0, 1024.0) * (1.0 / 1024.0)
        keep = nms(unit, ks, 0.5)[:300]
        s2 = ks[keep]
        k = min(int(s2.shape[0]), 100)
        top_v, top_i = torch.topk(s2, k)
        return top_v, unit[keep[top_i]]
    return w11


def inputs(n, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    xy = torch.rand(n, 2, device="cuda", generator=g) * 1000.0
    wh = 4.0 + torch.rand(n, 2, device="cuda", generator=g) * 60.0
    boxes = torch.cat([xy, xy + wh], 1)
    scores = torch.randn(n, device="cuda", generator=g)
    return boxes, scores


def measure(name, fn, sets, warmup, recompiles=None):
    first = None
    torch.cuda.reset_peak_memory_stats()
    for i in range(warmup):
        t0 = time.perf_counter()
        out = fn(*sets[i])
        torch.cuda.synchronize()
        if i == 0:
            first = (time.perf_counter() - t0) * 1e6
    for o in out:
        assert o.is_cuda, "an output is not on the GPU"
    before = recompiles() if recompiles else 0
    times = []
    for s in sets[warmup:]:
        assert s[0].is_cuda and s[1].is_cuda
        t0 = time.perf_counter()
        fn(*s)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    row = {"impl": name, "median_us": statistics.median(times), "max_us": max(times), "first_call_us": first,
           "peak_mib": torch.cuda.max_memory_allocated() / 2**20}
    if recompiles:
        row["traces_after_warmup"] = recompiles() - before
    return row


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    smelt = json.load(open(sys.argv[1]))
    counts, warmup = smelt["counts"], smelt["warmup"]
    assert torch.cuda.is_available(), "peers_w11.py needs a CUDA GPU"
    sets = [inputs(n, 100 + i) for i, n in enumerate(counts)]
    nms, nms_name = pick_nms()
    w11 = make_w11(nms)
    rows = list(smelt["rows"])
    rows.append(measure("torch eager (NMS: %s)" % nms_name, w11, sets, warmup))
    torch._dynamo.reset()
    compiled = torch.compile(w11, dynamic=True)
    from torch._dynamo.utils import counters

    def recompiles():
        return counters["stats"].get("unique_graphs", 0)

    rows.append(measure("torch.compile(dynamic=True) (NMS: %s)" % nms_name, compiled, sets, warmup, recompiles))
    out = {"work": "W11", "device": torch.cuda.get_device_name(), "torch": torch.__version__, "counts": counts,
           "rows": rows}
    json.dump(out, open(sys.argv[2], "w"), indent=1)
    lines = ["W11 on %s (torch %s): a new box count (2,000-20,000) on each of %d timed calls, after %d warm-up calls"
             % (out["device"], out["torch"], len(counts) - warmup, warmup),
             "%-58s %12s %12s %14s %8s %9s %s" % ("implementation", "median us", "max us", "first call us", "traces",
                                                   "peak MiB", "d2h per call")]
    for r in rows:
        d2h = ("%.1f copies, %.0f B" % (r["d2h_copies_per_call"], r["d2h_bytes_per_call"])
               if "d2h_copies_per_call" in r else "")
        lines.append("%-58s %12.1f %12.1f %14.1f %8s %9.1f %s" % (r["impl"][:58], r["median_us"], r["max_us"],
                                                                  r["first_call_us"], r.get("traces_after_warmup", ""),
                                                                  r["peak_mib"], d2h))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if len(sys.argv) > 3:
        open(sys.argv[3], "w").write(text)


if __name__ == "__main__":
    main()
