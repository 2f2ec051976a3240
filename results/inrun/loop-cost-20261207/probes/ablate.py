import time, statistics, sys, torch
from torch.utils.data import DataLoader
from scripts.bench.loop_cost import Indices, Fixed, plain, in_run_us, per_batch_us
from autoloader.inrun import loader as L
from autoloader.inrun.made import MadeTimes, StampedSamples
from autoloader.inrun.order import Feed, draw_epoch
from autoloader.search.space import LoaderConfig
c = LoaderConfig.make(batch_size=64, num_workers=2, pin_memory=False, prefetch_factor=2, persistent_workers=True)
N = 4500
ds = Indices(64 * N)
def parts(made_on, feed_on):
    p = plain(ds, c)
    made = MadeTimes(N) if made_on else None
    kw = dict(num_workers=2, prefetch_factor=2, persistent_workers=True, generator=torch.Generator().manual_seed(0))
    samples = StampedSamples(ds, made) if made_on else ds
    if feed_on:
        f = Feed(N, made=made)
        d = DataLoader(samples, batch_sampler=f, **kw)
        drawn, _ = draw_epoch(p._index_sampler, p.generator)
        f.open(drawn, 0, limit=N)
    else:
        d = DataLoader(samples, batch_size=64, shuffle=True, **kw)
    return per_batch_us(d)[0]
orig = L.MadeTimes
arms = {"plain": lambda: per_batch_us(plain(ds, c))[0], "feed": lambda: parts(False, True),
        "feed+stamped": lambda: parts(True, True), "inrun": lambda: in_run_us(ds, c)[0]}
arms["plain"]()
res = {k: [] for k in arms}
for r in range(int(sys.argv[1])):
    order = list(arms) if r % 2 == 0 else list(reversed(arms))
    for k in order:
        res[k].append(arms[k]())
for k, v in res.items(): print(k, [round(x) for x in v], "median", round(statistics.median(v)))
