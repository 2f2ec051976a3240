import time, statistics, sys, gc, torch
from torch.utils.data import DataLoader
from scripts.bench.loop_cost import Indices, Fixed, plain
from autoloader.inrun.loader import InRunLoader
from autoloader.inrun.made import MadeTimes, StampedSamples
from autoloader.inrun.order import Feed, draw_epoch
from autoloader.probe.load import cpu_mark
from autoloader.search.space import LoaderConfig
c = LoaderConfig.make(batch_size=64, num_workers=2, pin_memory=False, prefetch_factor=2, persistent_workers=True)
N = 4500
ds = Indices(64 * N)
def measure(loader, setup=None):
    m0 = cpu_mark(); t0 = time.perf_counter()
    n = sum(1 for _ in loader)
    m1 = cpu_mark(); t1 = time.perf_counter()
    return (t1 - t0) / n * 1e6, (m1[2] - m0[2]) / n * 1e6
def parts(made_on):
    p = plain(ds, c)
    made = MadeTimes(N) if made_on else None
    f = Feed(N, made=made)
    d = DataLoader(StampedSamples(ds, made) if made_on else ds, batch_sampler=f, num_workers=2, prefetch_factor=2,
                   persistent_workers=True, generator=torch.Generator().manual_seed(0))
    drawn, _ = draw_epoch(p._index_sampler, p.generator); f.open(drawn, 0, limit=N)
    r = measure(d); del d; gc.collect(); return r
def pl():
    d = plain(ds, c); r = measure(d); del d; gc.collect(); return r
def ir():
    l = InRunLoader(plain(ds, c), Fixed(c)); r = measure(l); l.close(); return r
arms = {"plain": pl, "feed": lambda: parts(False), "feed+stamped": lambda: parts(True), "inrun": ir}
pl()
res = {k: [] for k in arms}
for r in range(int(sys.argv[1])):
    for k in (list(arms) if r % 2 == 0 else list(reversed(arms))):
        res[k].append(arms[k]())
for k, v in res.items():
    print(f"{k:14s} wall us/batch median {statistics.median(x[0] for x in v):7.0f}   tree CPU us/batch median {statistics.median(x[1] for x in v):7.0f}   cpu {[round(x[1]) for x in v]}")
