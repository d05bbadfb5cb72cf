"""How a split kernel's work is cut into the chunks that the driver's thread and its worker
claim one at a time from the two ends (runtime/threads.py ``split_chunks``): the chunk size,
the makespan two threads reach with it, and a kernel's work for the wait limit."""

from __future__ import annotations

from partita.backends.llvm.kinds import Kind

# chunks of a split int8 convolution or depthwise kernel (chunk_size): claimed one at a time, so
# a late worker holds up one chunk, not half the kernel
SPLIT_CHUNKS = 8
# a chunk claim's cost, as a share of the kernel (chunk_size: finer chunks for an even split)
CLAIM_SHARE = 0.01
# timed chunk sizes (timed_chunk_size): a claim's cost (a compare-and-swap on the line both
# threads claim from: 0.1-0.3 us by the hand-off trace here), the most chunks, and a split
# int8 product's multiply-adds per second on one thread by tier (MobileNetV2's products here,
# session 27: they only turn a kernel's multiply-adds into a rough time)
CLAIM_S = 0.3e-6
MAX_CHUNKS = 64
SPLIT_RATE = {"amx": 600, "vnni": 270, "avxvnni": 160, "avx2": 65, "plain": 90}


def chunk_size(total: int, chunks: int = SPLIT_CHUNKS, multiple: int = 1, work: int = 0,
               isa: str | None = None) -> int:
    """Units per chunk for about ``chunks`` chunks of [0, ``total``) (split_chunks), a
    multiple of ``multiple`` (a depthwise kernel's row pairs): of the sizes up to that one,
    the one whose chunks two equally fast threads, claiming from both ends, finish first
    (``makespan``), each claim costing CLAIM_SHARE of the kernel. An odd count of equal chunks
    leaves one thread a chunk more: 56 rows in 7 chunks of 8 end after 32 rows' time, in 14 of
    4 after 28 (MobileNetV2's 56 x 56 depthwise rows; its 98 AMX pixel blocks in 8 chunks of
    13: 52 blocks' time, in 14 of 7: 49).

    With the kernel's multiply-adds ``work`` and its ``isa``, the prices are times instead
    (``timed_chunk_size``): finer chunks where the kernel is long."""
    if work and isa in SPLIT_RATE:
        return timed_chunk_size(total, multiple, work / SPLIT_RATE[isa] / 1e9)
    size = max(1, -(-total // chunks))
    size = -(-size // multiple) * multiple
    best, choice = None, size
    for s in range(size, 0, -multiple):
        if -(-total // s) > 2 * chunks:
            break
        count = -(-total // s)
        cost = makespan(total, s) + CLAIM_SHARE * total * -(-count // 2)
        if best is None or cost < best - 1e-9:
            best, choice = cost, s
    return choice


def timed_chunk_size(total: int, multiple: int, seconds: float) -> int:
    """chunk_size for a kernel of about ``seconds`` on one thread: the size (a multiple of
    ``multiple``, at most MAX_CHUNKS chunks) that minimizes the busier thread's units
    (``makespan``) plus its claims (CLAIM_S each) plus half a chunk, the wait one thread
    expects at the end for the other's last chunk: the two never start together nor run
    equally fast, so the last chunk ends unevenly (MobileNetV2's 7 x 7 products on avx2, 8
    chunks of ~40 us: the driver's wait at the end 26 us by median, session 27). A long
    kernel goes in finer chunks; a short one keeps few (each claim a cross-core atomic)."""
    unit = seconds / max(1, total)
    best, choice = None, max(multiple, -(-total // multiple) * multiple)
    for s in range(multiple, choice + 1, multiple):
        count = -(-total // s)
        if count > MAX_CHUNKS:
            continue
        cost = (makespan(total, s) + 0.5 * s) * unit + CLAIM_S * -(-count // 2)
        if best is None or cost < best - 1e-12:
            best, choice = cost, s
    return choice


def makespan(total: int, size: int) -> int:
    """Units the busier of two equally fast threads runs when they claim chunks of ``size``
    (the last one shorter) one at a time, one from the front and one from the back."""
    sizes = [size] * (total // size) + ([total % size] if total % size else [])
    i, j, front, back = 0, len(sizes) - 1, 0, 0
    while i <= j:
        if front <= back:
            front, i = front + sizes[i], i + 1
        else:
            back, j = back + sizes[j], j - 1
    return max(front, back)


def split_work(k) -> int:
    """A split kernel's multiply-adds (or elements), for its wait limit."""
    p = k.params
    if all(key in p for key in ("M", "N", "K")):
        return int(p["M"]) * int(p["N"]) * int(p["K"])
    if k.kind == Kind.FCONV:
        return int(p["images"] * p["size"] * p["G"] * p["M"] * p["Kg"])
    if "OC" in p:
        depth = p.get("C", 1) if k.kind == Kind.VCONV else 1
        return int(p["OH"] * p["OW"] * p["OC"] * p.get("KH", 1) * p.get("KW", 1) * depth)
    return 0
