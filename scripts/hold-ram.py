#!/usr/bin/env python3
"""Hold anonymous memory so that the rest of the machine sees less RAM.

Purpose: measure an engine on a model file bigger than the RAM left over (a 16 GB laptop
running a 20 GB model) on a machine with more RAM. The holder commits anonymous memory until
the kernel's MemAvailable (/proc/meminfo) reads the target, then keeps that amount fixed
while the engine runs. Whatever the engine reads from the file has to fit in what is left,
so the page cache can no longer keep the whole file and pages are read from disk again.

  scripts/hold-ram.py --leave 3.9G            # hold MemAvailable - 3.9 GiB
  scripts/hold-ram.py --hold 18G --for 600    # hold 18 GiB for ten minutes
  scripts/hold-ram.py --leave 3.9G --ready-file /tmp/held &  # scripts wait for the file

How it holds: mmap(MAP_ANONYMOUS|MAP_PRIVATE) chunks, one byte written per 4 KiB page so
every page is really allocated, mlock where allowed (it only matters with swap; a failure is
reported, not fatal). With --leave the first estimate is off because the kernel reclaims page
cache as the hold grows, so the holder re-reads MemAvailable after each step and adds or
releases chunks until it stays within --tolerance; then it prints one status line and
"ready", writes the ready-file, and from then on holds a fixed amount (it must not give RAM
back when the measured engine allocates; --follow keeps tracking the target instead).

It exits cleanly on SIGINT/SIGTERM or after --for seconds (counted from "ready"), removing
the ready-file. Targets that would leave less than 1 GiB available are refused (exit 2).
The holder makes itself the OOM killer's first choice (oom_score_adj 1000): when the
machine runs out of memory it dies and gives everything back rather than some other
process; a caller can check that it is still alive to know the measurement held.
Units: sizes take K, M, G, T suffixes (powers of 1024; GiB in all output).
"""
import argparse
import ctypes
import ctypes.util
import mmap
import os
import signal
import sys
import time

PAGE = mmap.PAGESIZE
GIB = 1 << 30
MIN_LEFT = 1 * GIB  # never leave less available than this


def parse_size(text):
    """'3.9G' -> bytes (powers of 1024); a bare number is bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = 1
    if t and t[-1] in units:
        mult = units[t[-1]]
        t = t[:-1]
    try:
        value = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: '{text}' (e.g. 3.9G, 512M)")
    if value < 0:
        raise argparse.ArgumentTypeError(f"negative size: '{text}'")
    return int(value * mult)


def mem_available():
    """MemAvailable from /proc/meminfo, bytes."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/meminfo has no MemAvailable")


def gib(n):
    return f"{n / GIB:.2f}"


class Holder:
    """The held chunks: each an anonymous private mapping with every page written."""

    def __init__(self, lock):
        self.chunks = []  # mmap objects, newest last
        self.held = 0  # bytes
        self.lock = lock
        self.lock_error = None  # first mlock failure, reported once
        self.locked = 0  # bytes
        libc_name = ctypes.util.find_library("c")
        self.libc = ctypes.CDLL(libc_name, use_errno=True) if libc_name else None

    def grow(self, size):
        size = max(PAGE, size // PAGE * PAGE)
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            # 2 MiB pages where the kernel has them: ~2x faster to commit (fewer faults);
            # what is held is the same.
            try:
                m.madvise(mmap.MADV_HUGEPAGE)
            except OSError:
                pass
        view = memoryview(m)
        view[::PAGE] = b"\x01" * (size // PAGE)  # one write per page: the page is allocated
        view.release()
        if self.lock:
            self._mlock(m, size)
        self.chunks.append(m)
        self.held += size

    def _mlock(self, m, size):
        if self.libc is None:
            self.lock_error = self.lock_error or "no libc found for mlock"
            return
        buf = ctypes.c_char.from_buffer(m)
        rc = self.libc.mlock(ctypes.c_void_p(ctypes.addressof(buf)), ctypes.c_size_t(size))
        err = ctypes.get_errno()
        del buf  # the mapping cannot be closed while ctypes holds an export of it
        if rc == 0:
            self.locked += size
        elif self.lock_error is None:
            self.lock_error = f"mlock failed: {os.strerror(err)} (see ulimit -l)"

    def shrink_one(self):
        """Release the newest chunk; returns its size (0 if none)."""
        if not self.chunks:
            return 0
        m = self.chunks.pop()
        size = len(m)
        m.close()  # munmap (also unlocks)
        self.held -= size
        self.locked = min(self.locked, self.held)
        return size

    def release_all(self):
        while self.shrink_one():
            pass


class Stop:
    """Set by SIGINT/SIGTERM; the main loop polls it."""

    def __init__(self):
        self.flag = False
        signal.signal(signal.SIGINT, self._set)
        signal.signal(signal.SIGTERM, self._set)

    def _set(self, signum, frame):
        self.flag = True


def make_oom_victim():
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass  # raising it needs no privilege; if it fails anyway, nothing depends on it


def status(holder, target_text):
    lock = ""
    if holder.lock:
        lock = f", mlocked {gib(holder.locked)} GiB" if not holder.lock_error else f", {holder.lock_error}"
    return (f"hold-ram: held {gib(holder.held)} GiB, MemAvailable {gib(mem_available())} GiB"
            f" ({target_text}{lock})")


def settle_leave(holder, target, tolerance, chunk, stop, deadline):
    """Grow/shrink until MemAvailable stays within target +- tolerance on two reads 0.5 s
    apart (the kernel's counters and the page cache's reclaim lag the allocation)."""
    in_band = 0
    while not stop.flag:
        if time.monotonic() > deadline:
            return False
        avail = mem_available()
        excess = avail - target
        if abs(excess) <= tolerance:
            in_band += 1
            if in_band >= 2:
                return True
            time.sleep(0.5)
            continue
        in_band = 0
        if excess > 0:
            # Grow by at most a chunk and by at most the excess; reclaiming page cache may
            # make MemAvailable fall by less than we add, which the next read corrects.
            step = min(chunk, excess)
            if avail - step < MIN_LEFT:
                step = avail - MIN_LEFT
            if step < PAGE:
                time.sleep(0.5)
                continue
            holder.grow(step)
        else:
            # Too little available (we overshot, or something else grew): give back the
            # newest chunk; the next pass re-grows in smaller steps if that was too much.
            if not holder.shrink_one():
                return None  # holding nothing and still below the target
            time.sleep(0.2)
        time.sleep(0.1)
    return False


def hold_fixed(holder, amount, chunk, stop):
    """Allocate `amount` bytes in chunks; refuse to go below MIN_LEFT available."""
    while holder.held < amount and not stop.flag:
        step = min(chunk, amount - holder.held)
        if mem_available() - step < MIN_LEFT:
            return False
        holder.grow(step)
    return True


def write_ready(path, holder):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"held_bytes {holder.held}\nmem_available_bytes {mem_available()}\npid {os.getpid()}\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        epilog="Exit codes: 0 clean exit, 1 target not reached in --settle-timeout, "
        "2 target refused (would leave < 1 GiB, or MemAvailable already below it).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--leave", type=parse_size, metavar="SIZE",
                      help="hold until MemAvailable is SIZE (e.g. 3.9G)")
    what.add_argument("--hold", type=parse_size, metavar="SIZE",
                      help="hold exactly SIZE (e.g. 18G)")
    ap.add_argument("--for", dest="seconds", type=float, default=None, metavar="SECONDS",
                    help="exit after this many seconds once ready (default: until SIGINT/SIGTERM)")
    ap.add_argument("--ready-file", metavar="PATH",
                    help="written (held bytes, MemAvailable, pid) when the target is reached; removed on exit")
    ap.add_argument("--tolerance", type=parse_size, default=parse_size("64M"), metavar="SIZE",
                    help="--leave: how close MemAvailable must stay to the target (default 64M)")
    ap.add_argument("--chunk", type=parse_size, default=parse_size("256M"), metavar="SIZE",
                    help="allocation step (default 256M)")
    ap.add_argument("--follow", action="store_true",
                    help="--leave: keep adjusting after ready (default: hold a fixed amount, so an "
                    "engine's own allocations do not get RAM back from the holder)")
    ap.add_argument("--no-mlock", action="store_true", help="do not try to mlock the held memory")
    ap.add_argument("--settle-timeout", type=float, default=180.0, metavar="SECONDS",
                    help="give up if --leave's target is not reached in this time (default 180)")
    ap.add_argument("--interval", type=float, default=0.0, metavar="SECONDS",
                    help="also print the status line every SECONDS while holding (default: never)")
    args = ap.parse_args()

    avail0 = mem_available()
    if args.leave is not None:
        target_text = f"target MemAvailable {gib(args.leave)} GiB"
        if args.leave < MIN_LEFT:
            print(f"hold-ram: refusing --leave {gib(args.leave)} GiB: would leave less than "
                  f"{gib(MIN_LEFT)} GiB available", file=sys.stderr)
            return 2
        if avail0 < args.leave:
            print(f"hold-ram: MemAvailable is already {gib(avail0)} GiB, below the target "
                  f"{gib(args.leave)} GiB: nothing to hold", file=sys.stderr)
            return 2
    else:
        target_text = f"target hold {gib(args.hold)} GiB"
        if avail0 - args.hold < MIN_LEFT:
            print(f"hold-ram: refusing --hold {gib(args.hold)} GiB: MemAvailable is "
                  f"{gib(avail0)} GiB, so it would leave less than {gib(MIN_LEFT)} GiB",
                  file=sys.stderr)
            return 2

    stop = Stop()
    make_oom_victim()
    holder = Holder(lock=not args.no_mlock)
    rc = 0
    try:
        if args.leave is not None:
            ok = settle_leave(holder, args.leave, args.tolerance, args.chunk, stop,
                              time.monotonic() + args.settle_timeout)
            if ok is None:
                print(f"hold-ram: MemAvailable fell below the target with nothing held "
                      f"({status(holder, target_text)})", file=sys.stderr)
                return 2
            if not ok and not stop.flag:
                print(f"hold-ram: target not reached in {args.settle_timeout:.0f} s "
                      f"({status(holder, target_text)})", file=sys.stderr)
                return 1
        else:
            if not hold_fixed(holder, args.hold, args.chunk, stop):
                print(f"hold-ram: stopped: the next chunk would leave less than {gib(MIN_LEFT)} GiB "
                      f"available ({status(holder, target_text)})", file=sys.stderr)
                return 2
        if stop.flag:
            return 0
        if holder.lock_error:
            print(f"hold-ram: note: {holder.lock_error}; the memory is held anyway "
                  "(without swap it cannot be paged out)", file=sys.stderr)
        print(status(holder, target_text), flush=True)
        write_ready(args.ready_file, holder)
        print("ready", flush=True)

        ready_at = time.monotonic()
        last_status = ready_at
        while not stop.flag:
            now = time.monotonic()
            if args.seconds is not None and now - ready_at >= args.seconds:
                break
            if args.follow and args.leave is not None:
                settle_leave(holder, args.leave, args.tolerance, args.chunk, stop, now + 5.0)
            if args.interval > 0 and now - last_status >= args.interval:
                print(status(holder, target_text), flush=True)
                last_status = now
            time.sleep(0.2)
        print(f"hold-ram: releasing {gib(holder.held)} GiB", flush=True)
    finally:
        holder.release_all()
        if args.ready_file:
            try:
                os.unlink(args.ready_file)
            except FileNotFoundError:
                pass
    return rc


if __name__ == "__main__":
    sys.exit(main())
