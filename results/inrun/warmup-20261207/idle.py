import sys, time, torch
sys.path.insert(0, "/work/main")
from scripts.bench.inrun import Spectra, make_step, epoch, plain
from torch.utils.data import DataLoader
ds = Spectra(4000, 60000)
def idle_workers():
    dl = DataLoader(ds, batch_size=64, num_workers=2, persistent_workers=True)
    it = iter(dl); next(it); next(it)
    return dl, it
for i in range(2):
    a = epoch(plain(ds, {"batch_size": 64, "num_workers": 0}, i), make_step())[0]
    keep = idle_workers()
    c = epoch(plain(ds, {"batch_size": 64, "num_workers": 0}, i), make_step())[0]
    del keep
    import gc; gc.collect()
    print(f"plain w0 {a:.2f} s; with idle w2 alive {c:.2f} s", flush=True)
