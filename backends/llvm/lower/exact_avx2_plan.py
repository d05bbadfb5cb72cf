"""The exact AVX2 int8 kernels' weight packings (vector_plan.vector_kernel chooses the route;
emit/int8/exact_avx2.py runs them). The "sign" kernel needs none: it reads the plain packing
and signs the weights by the activations at run time (|x| <= 128 against |w| <= 127 keeps
every VPMADDUBSW pair sum within int16). Where a weight is -128 the other routes take over:

- ``ubsw_split``: VPMADDUBSW on a main part whose every weight pair is safe for unsigned
  activations, plus a sparse second product for the unsafe pairs' remainders;
- ``nibble_split``: VPMADDUBSW on the weights' high and low nibbles, int16 sums widened every
  few k-steps.
"""

from __future__ import annotations

import numpy as np


def pair_safe(w: np.ndarray) -> np.ndarray:
    """Per weight pair (the last axis, 2): whether VPMADDUBSW sums it without saturating for
    every unsigned activation pair (0..255): the positive weights' sum at most 128 and the
    negative ones' at least -128 (255 * 128 = 32640 fits in int16; 255 * 129 does not)."""
    w = w.astype(np.int32)
    return (np.clip(w, 0, None).sum(-1) <= 128) & (np.clip(w, None, 0).sum(-1) >= -128)


def ubsw_split(packed: np.ndarray, width: int) -> tuple[np.ndarray, dict]:
    """[KK][C/4][OCp][4] int8 weights as a main part whose every byte pair is safe for
    VPMADDUBSW (pair_safe) and the remainder: an unsafe pair (w1, w2) keeps trunc(w / 2)
    and leaves w - trunc(w / 2) (both halves at most 64 in magnitude: safe). The remainder is
    kept sparse, per panel of ``width`` channels (_panels) and k-step (one 4-deep slice of
    one tap): ``k`` the k-steps with any nonzero remainder (int32, panel by panel), ``off``
    each panel's first entry (int32, panels + 1), ``w`` each entry's remainders
    [width][4] int8 (a narrower last panel padded with zeros), ``density`` the fraction of
    (panel, k-step)s with an entry."""
    kk, c4, ocp, _ = packed.shape
    pairs = packed.reshape(kk, c4, ocp, 2, 2)
    safe = pair_safe(pairs)[..., None]
    main = np.where(safe, pairs, np.fix(pairs / 2).astype(np.int8)).astype(np.int8)
    rest = (pairs.astype(np.int16) - main).astype(np.int8).reshape(kk * c4, ocp, 4)
    main = main.reshape(packed.shape)
    ks, offs, ws = [], [0], []
    for g in range(0, ocp, width):
        part = rest[:, g : g + width]
        used = np.flatnonzero(part.any(axis=(1, 2)))
        entry = np.zeros((used.size, width, 4), np.int8)
        entry[:, : part.shape[1]] = part[used]
        ks.append(used.astype(np.int32))
        ws.append(entry.reshape(-1))
        offs.append(offs[-1] + used.size)
    total = kk * c4 * len(ks)
    return main, {"k": np.concatenate(ks), "off": np.array(offs, np.int32),
                  "w": np.concatenate(ws), "density": offs[-1] / max(total, 1)}


def nibble_split(packed: np.ndarray) -> tuple[np.ndarray, int]:
    """[KK][C/4][OCp][4] int8 weights w as w = 16 h + l with h = (w + 8) >> 4 in -8..8 and
    l in -8..7, packed [KK][C/4][OCp/16][2][16][4] (per 16-channel vector, h's 64 bytes then
    l's; _panels of that takes vectors): VPMADDUBSW sums a pair of either exactly (at most
    255 * 16 = 4080 in magnitude), and int16 accumulators take that many k-steps' pair sums
    before they can overflow; returns the packing and that many steps (at least 8; more
    where the layer's largest pair sums allow), after which the kernel widens them (VPMADDWD
    by 16 and 1)."""
    w = packed.astype(np.int16)
    h = (w + 8) >> 4
    kk, c4, ocp, _ = packed.shape
    parts = np.stack([h, w - 16 * h], axis=2).astype(np.int8)  # [KK][C/4][2][OCp][4]
    pairs = parts.reshape(kk, c4, 2, ocp, 2, 2).astype(np.int32)
    pos = int(np.clip(pairs, 0, None).sum(-1).max(initial=0))
    neg = int(-np.clip(pairs, None, 0).sum(-1).min(initial=0))
    steps = min(32767 // (255 * max(pos, 1)), 32768 // (255 * max(neg, 1)), 64)
    parts = parts.reshape(kk, c4, 2, ocp // 16, 64).transpose(0, 1, 3, 2, 4)
    return parts.reshape(kk, c4, ocp // 16, 128), steps
