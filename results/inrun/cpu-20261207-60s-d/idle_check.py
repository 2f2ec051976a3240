# Whether two idle kept workers (a persistent w2 loader, as the in-run loader keeps the best's after a
# switch) slow a plain w0 epoch of the worked example: 4 rounds, the order alternated, ~15 s epochs.
#   .venv/bin/python results/inrun/cpu-20261207-60s-d/idle_check.py   (output: idle_check.txt)
import sys, time, math, random
sys.path.insert(0, '.')   # run from the repository's root
import torch
from torch.utils.data import DataLoader
from scripts.bench.inrun import Spectra, make_step, epoch

ds = Spectra(4000, 110000)
def plain(seed):
    return DataLoader(ds, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(seed))
res = {"alone": [], "idle_w2": []}
epoch(plain(0), make_step())  # warm
for r in range(4):
    order = ["alone", "idle_w2"] if r % 2 == 0 else ["idle_w2", "alone"]
    for name in order:
        keep = None
        if name == "idle_w2":
            keep = DataLoader(ds, batch_size=64, shuffle=True, num_workers=2, persistent_workers=True)
            it = iter(keep)
            for _ in range(20): next(it)
        wall = epoch(plain(r), make_step())[0]
        res[name].append(wall)
        del keep
        print(r, name, round(wall, 2), flush=True)
ratios = [a / b for a, b in zip(res["idle_w2"], res["alone"])]
print("idle/alone", [round(x, 3) for x in ratios], math.exp(sum(map(math.log, ratios)) / len(ratios)))
