import time, statistics, sys, gc, torch, os
from torch.utils.data import DataLoader
from scripts.bench.loop_cost import Indices, Fixed, plain
from autoloader.inrun.loader import InRunLoader
from autoloader.inrun.made import MadeTimes, StampedSamples
from autoloader.inrun.order import Feed, draw_epoch
from autoloader.search.space import LoaderConfig
W = int(sys.argv[2]) if len(sys.argv) > 2 else 2
c = LoaderConfig.make(batch_size=64, num_workers=W, pin_memory=False, prefetch_factor=2, persistent_workers=True)
N = 4800
ds = Indices(64 * N)
def run(make, close):
    gc.collect()
    o0 = os.times(); t0 = time.perf_counter()
    d = make()
    n = sum(1 for _ in d)
    t1 = time.perf_counter(); o1 = os.times()
    close(d); del d; gc.collect()
    o2 = os.times()
    return ((t1 - t0) / n * 1e6, (o1.user + o1.system - o0.user - o0.system) / n * 1e6,
            (o2.children_user + o2.children_system - o0.children_user - o0.children_system) / n * 1e6)
def parts(made_on, stamped=True):
    p = plain(ds, c)
    made = MadeTimes(N) if made_on else None
    f = Feed(N, made=made)
    d = DataLoader(StampedSamples(ds, made) if (made_on and stamped) else ds, batch_sampler=f, num_workers=W, prefetch_factor=2,
                   persistent_workers=True, generator=torch.Generator().manual_seed(0))
    drawn, _ = draw_epoch(p._index_sampler, p.generator); f.open(drawn, 0, limit=N)
    return d
def noop(d): pass
arms = {"plain": lambda: run(lambda: plain(ds, c), noop),
        "feed": lambda: run(lambda: parts(False), noop),
        "feed+stamped": lambda: run(lambda: parts(True), noop),
        "inrun": lambda: run(lambda: InRunLoader(plain(ds, c), Fixed(c)), lambda l: l.close())}
arms["plain"]()
res = {k: [] for k in arms}
for r in range(int(sys.argv[1])):
    for k in (list(arms) if r % 2 == 0 else list(reversed(arms))):
        res[k].append(arms[k]())
        print(r, k, [round(x) for x in res[k][-1]], flush=True)
for k, v in res.items():
    print(f"{k:14s} wall {statistics.median(x[0] for x in v):6.0f}  main CPU {statistics.median(x[1] for x in v):5.0f}  workers CPU {statistics.median(x[2] for x in v):5.0f}  us/batch (medians)")
