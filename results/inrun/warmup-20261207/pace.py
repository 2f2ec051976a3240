import sys, time, tempfile, torch
sys.path.insert(0, "/work/main")
from scripts.bench.inrun import Spectra, make_step, epoch, plain
import autoloader
ds = Spectra(4000, 60000)
home = tempfile.mkdtemp()
loader = autoloader.best_loader(ds, batch_size=64, device="cpu", out=home, generator=torch.Generator().manual_seed(0))
for i in range(3):
    a = epoch(plain(ds, {"batch_size": 64, "num_workers": 0}, i), make_step())[0]
    t = epoch(loader, make_step())[0]
    segs = [(r.config.num_workers, round(r.rate), r.batches) for r in loader.plan.readings]
    print(f"round {i}: plain w0 {a:.2f} s ({60000/a:.0f}/s), in-run {t:.2f} s ({60000/t:.0f}/s); pick {loader.plan.pick and loader.plan.pick.num_workers}", flush=True)
print(segs)
