"""Epoch 2 (after settling): plain DataLoader with kept workers, the in-run loader (its pick's loader no
longer marking), and the same with the marking kept (the code before), interleaved."""
import time, statistics, sys, gc
from scripts.bench.loop_cost import Indices, Fixed, plain
from autoloader.inrun.loader import InRunLoader
from autoloader.search.space import LoaderConfig
from autoloader.search.paired import paired_ratio
W = int(sys.argv[2]); N = int(sys.argv[3]) if len(sys.argv) > 3 else 4800
c = LoaderConfig.make(batch_size=64, num_workers=W, pin_memory=False, prefetch_factor=2 if W else None, persistent_workers=bool(W))
ds = Indices(64 * N)
class Marking(InRunLoader):
    def _kept_loader(self, seed):
        made = self._alive[self.plan.pick].batch_sampler.made if self._kept is None and self.plan.pick in self._alive else None
        kept = super()._kept_loader(seed)
        if made is not None:
            kept.batch_sampler.made = made
        return kept
def second(loader):
    sum(1 for _ in loader)
    t0 = time.perf_counter(); p0 = time.process_time()
    n = sum(1 for _ in loader)
    return (time.perf_counter() - t0) / n * 1e6, (time.process_time() - p0) / n * 1e6
def arm(k):
    if k == "plain":
        d = plain(ds, c); r = second(d); del d
    else:
        l = (InRunLoader if k == "inrun" else Marking)(plain(ds, c), Fixed(c)); r = second(l)
        assert l.final is not None and (l._kept.batch_sampler.made is None) == (k == "inrun"); l.close()
    gc.collect(); return r
keys = ["plain", "inrun", "marking"]
res = {k: [] for k in keys}
for r in range(int(sys.argv[1])):
    for k in (keys if r % 2 == 0 else keys[::-1]):
        res[k].append(arm(k))
    print(r, {k: [round(x) for x in v[-1]] for k, v in res.items()}, flush=True)
for k, v in res.items():
    print(f"{k:8s} epoch 2 wall {statistics.median(x[0] for x in v):6.1f}  main CPU {statistics.median(x[1] for x in v):6.1f} us/batch")
for k in ("inrun", "marking"):
    print(f"{k}/plain wall", paired_ratio([(a[0], b[0]) for a, b in zip(res[k], res["plain"])]))
print("inrun/marking wall", paired_ratio([(a[0], b[0]) for a, b in zip(res["inrun"], res["marking"])]))
