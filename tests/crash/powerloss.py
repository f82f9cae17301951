"""The power-loss model's other half: put a data directory back as a power
loss would have left it, from what tests/shim/powerloss.c recorded.

The shim, preloaded into ordod (LD_PRELOAD=build/libpowerloss.so, with
ORDO_POWERLOSS_DATA the data directory and ORDO_POWERLOSS_SHADOW an empty
directory), writes into the shadow each file's contents as of its last
fsync()/fdatasync() and each directory's entries as of its last fsync(),
before the call returns (so before any reply that depends on it). After a
SIGKILL, rebuild() replaces the data directory with exactly that: every
directory with the entries it last synced (one never synced is empty),
every file with the contents it last synced (one never synced is empty),
and empties the shadow for the next start, whose shim copies the rebuilt
directory as its durable state.
"""
import os
import shutil

SHIM_NAME = "libpowerloss.so"


def env(shim, data_dir, shadow_dir):
    """The environment that preloads the shim for data_dir (a copy of ours)."""
    os.makedirs(shadow_dir, exist_ok=True)
    e = dict(os.environ)
    e["LD_PRELOAD"] = shim
    # Under ASan the runtime wants to come first; the shim is never
    # instrumented, so the order does not matter (as for clockstep).
    e["ASAN_OPTIONS"] = e.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    e["ORDO_POWERLOSS_DATA"] = os.path.abspath(data_dir)
    e["ORDO_POWERLOSS_SHADOW"] = os.path.abspath(shadow_dir)
    return e


def _build(shadow_dir, key, dest, stats):
    os.mkdir(dest)
    listing = os.path.join(shadow_dir, key + ".list")
    if not os.path.exists(listing):
        return  # never synced: its entries are gone
    with open(listing, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            kind, ekey, name = line.rstrip("\n").split(" ", 2)
            path = os.path.join(dest, name)
            if kind == "d":
                _build(shadow_dir, ekey, path, stats)
                continue
            src = os.path.join(shadow_dir, ekey)
            if os.path.exists(src):
                shutil.copyfile(src, path)
                stats["files"] += 1
            else:
                open(path, "wb").close()  # named durably, contents never synced
                stats["empty"] += 1


def rebuild(data_dir, shadow_dir):
    """Replace data_dir by its durable state; empty shadow_dir. Returns
    counts {"files", "empty"} (files restored, files whose contents were
    never synced)."""
    stats = {"files": 0, "empty": 0}
    with open(os.path.join(shadow_dir, "root")) as f:
        root = f.read().strip()
    tmp = data_dir.rstrip("/") + ".powerloss"
    shutil.rmtree(tmp, ignore_errors=True)
    _build(shadow_dir, root, tmp, stats)
    shutil.rmtree(data_dir)
    os.rename(tmp, data_dir)
    shutil.rmtree(shadow_dir)
    os.mkdir(shadow_dir)
    return stats
