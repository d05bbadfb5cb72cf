"""Whether Vela 5.2 stages a MAC operation's weights in SRAM or lets the MAC array read them
where they live (flash or DRAM), after regor's weight-buffering proposal
(Scheduler::ProposeSlicedWeightBuffering), reduced to the cases our single-stripe operations
meet.

The weights are read once per output block of rows and columns (``refetches``). Left where they
live, each read costs the memory's bandwidth and first-byte latency (``unmoved``); staged, each
read costs SRAM's (``from_buffer``) after one DMA (``transfer``, regor's MemToMemCycles), which
runs under the previous operation for as many cycles as that one takes (``slack``). Vela stages
them when any of these holds:

    the first operation (no slack), its weights read more than once and their first
    16-channel slice quick to move (under a tenth of ``unmoved`` or 1,000 cycles);
    staging pays: ``from_buffer`` plus the part of the DMA not hidden under the previous
    operation is below ``unmoved``;
    more than two output blocks deep (Vela slices the weights in depth and buffers the slices);
    the first 16-channel slice moves under the previous operation and the weights are read
    more than once.

What this decides, per operation (cycles.py): staged weights cost the DMA from the weight
memory once and an SRAM read per block, and the output stage fetches each block's scales and
biases at SRAM's latency; weights left in place are read from the weight memory once per block,
scales and biases with that memory's latency (regor's ``10 * block depth * latency / 256`` per
block: 1,875 cycles for a 96-deep block in the U65's DRAM, 117 in SRAM).
The rule applies where Vela's feature maps and its staging SRAM differ (the U65's
Dedicated_Sram; regor's ``_spilling``). On the U55 (Shared_Sram) Vela 5.2 stages the weights of
digits_mobilenetv2's first operations and of a few later ones and leaves most in flash, by
parts of its proposal not modelled here (its sliced-buffering evaluation); there we keep every
operation's weights staged, as before: the U55's networks are bound by streaming the weights
from flash, which costs the same either way, and a staged operation's scale fetch is 1.25
cycles per channel and block against flash's 2.5. What the U55 does model is the wait where
Vela buffers (``shared_sram_wait``: regor's proposal, its same-or-better check for weights
read once, and the first operation's whole transfer).
Checked on digits_mobilenetv2 on u65-256 (`vela --verbose-schedule`): the expansion
convolutions after the 96- to 202-cycle residual ADDs keep their weights in DRAM ("Weight buffer
= 0 bytes (None)"), every other operation stages them, and the one after the 768-cycle ADD too.
"""

from __future__ import annotations

from math import ceil

from .blocks import SPLIT_DEPTH, Block, Query
from .config import NPUConfig
from .vela_access import OFFCHIP_WRITE_LATENCY, bandwidth, is_elementwise

STARTUP_DELAY_CYCLES = 1000  # regor: an initial transfer this short is worth buffering


def _read(config: NPUConfig, memory: str, nbytes: float) -> float:
    """regor's MinReadCycles: bytes over the memory's bandwidth plus its first-byte latency."""
    latency = config.sram_latency_cycles if memory == "sram" else config.dma_latency_cycles
    return nbytes / bandwidth(config, memory) + latency


def refetches(q: Query, block: Block) -> int:
    """How many times the MAC array reads the weights: once per output block of rows and
    columns (regor's weightsRefetch)."""
    (oh, ow, _), (bh, bw, _) = q.ofm, block.ofm
    return ceil(oh / bh) * ceil(ow / bw)


def transfer_cycles(config: NPUConfig, nbytes: float) -> float:
    """regor's MemToMemCycles for ``nbytes`` of weights, scales and biases from the weight
    memory to SRAM: the slower of the read (+ the DMA latency) and the write (+ the write
    latency). Vela's debug database ("weight_transfer_cycles", u65-256): 510, 517 and 524
    cycles for 128, 208 and 288 bytes (500 + bytes / 12)."""
    memory = config.weight_memory
    write_latency = OFFCHIP_WRITE_LATENCY.get(memory, config.dma_latency_cycles // 2)
    return max(
        nbytes / bandwidth(config, memory) + config.dma_latency_cycles,
        nbytes / config.sram_bandwidth + write_latency,
    )


def prefetch_stall(config: NPUConfig, nbytes: int, slack: float | None) -> float:
    """Cycles a staged operation waits for its weights' DMA where the previous operation
    (``slack``: the cycles of Vela's last operation before it) is shorter than the transfer;
    0 for the first operation (its weights are moved before the network starts) and where
    this module's rule does not apply (the U55, SRAM weights). Vela's debug database
    (u65-256, est_op_cycles_with_buffering = without + transfer - the previous operation's
    est_op_cycles_without_buffering, which its op cycles report): reduce_min_in_graph's last
    1x1 convolution 1,112 + 510 - 143 = 1,479 after the negating SUB, mean_axis2_in_graph's
    861 + 517 - 167 = 1,211 after the MEAN's MUL."""
    if config.weight_memory == "sram" or config.spill_memory == "none" or slack is None:
        return 0.0
    return max(0.0, transfer_cycles(config, nbytes) - slack)


def dma_hidden(config: NPUConfig, slack: float | None) -> bool:
    """Whether a staged operation's weight DMA runs under the previous operation, outside its
    own memory cycles (regor's buffered weights: the operation reads them from SRAM, and
    ``buffered_cycles`` charges the transfer's wait): where this module's rule applies and
    there is a previous operation. Vela's debug database (u65-256, sum_in_graph's SUM, a 1x1
    Conv2D of 8x8x8 to one channel after a 1,253-cycle convolution): 184 cycles, its
    compute, though its 48 weight bytes take 505 from DRAM."""
    return slack is not None and config.weight_memory != "sram" and config.spill_memory != "none"


def buffered_cycles(
    config: NPUConfig, cycles: float, nbytes: float, slack: float | None, estimate: float | None
) -> float:
    """A staged operation's cycles with its weights' DMA (regor's EstimatePerformance for a
    buffered weight tensor: max(full transfer - slack + the operation's own scheduler
    estimate, its cycles + the first transfer's unhidden part)); ``estimate``: the
    operation's cycles as the scheduler estimates them (regor's slackBufferingCycles, before
    the feature maps move to SRAM: the U65's maps in DRAM), None where only the stall is
    charged (weights sliced in depth, whose own slack is their last slice's). Vela's debug
    database (u65-256): prelu_in_graph's last 1x1 convolution 517 - 335 (the MAXIMUM's
    estimate) + 1,069 = 1,251 against its 623-cycle run; reduce_min_in_graph's
    510 - 143 + 1,112 = 1,479."""
    stall = prefetch_stall(config, nbytes, slack)
    offchip = config.weight_memory != "sram" and config.spill_memory != "none"
    if estimate is None or slack is None or not offchip:  # as prefetch_stall
        return cycles + stall
    return max(cycles + stall, transfer_cycles(config, nbytes) - slack + estimate)


def weights_staged(
    config: NPUConfig, q: Query, block: Block, nbytes: int, slack: float | None
) -> bool:
    """Whether Vela 5.2 moves ``nbytes`` of weights (and their scales and biases) to SRAM before
    the operation runs; ``slack``: the previous operation's cycles, None for the first."""
    memory = config.weight_memory
    if memory == "sram" or config.spill_memory == "none":
        return True  # see the module's note on the U55
    return _proposed(config, q, block, nbytes, slack)


def _proposed(config: NPUConfig, q: Query, block: Block, nbytes: int, slack: float | None) -> bool:
    """regor's pre-selection of a buffering method (ProposeSlicedWeightBuffering: the module
    docstring's four clauses)."""
    n = refetches(q, block)
    unmoved = _read(config, config.weight_memory, nbytes) * n
    from_buffer = _read(config, "sram", nbytes) * n
    if from_buffer >= unmoved:
        return False
    transfer = transfer_cycles(config, nbytes)
    depth = q.ofm[2]
    smallest = transfer * min(depth, SPLIT_DEPTH) / depth
    first = slack is None
    slack = slack or 0.0
    force_initial = (
        first and n > 1 and (smallest < unmoved / 10 or smallest <= STARTUP_DELAY_CYCLES)
    )
    hidden = from_buffer + max(transfer - slack, 0.0) < unmoved
    sliced = depth // min(block.ofm[2], depth) > 2
    return force_initial or hidden or sliced or (not first and smallest < slack and n > 1)


def shared_sram_wait(
    config: NPUConfig, q: Query, block: Block, nbytes: float, slack: float | None, own: float
) -> float:
    """On the U55 (Shared_Sram: weights in flash, staging in the feature maps' SRAM), the
    cycles a MAC operation waits for its weights where Vela 5.2 buffers them, else 0.
    regor proposes buffering as on the U65 (``_proposed``) and keeps it if it "looks the same
    or better": for weights read once (one block of rows and columns) only if the whole
    transfer plus the buffered read fits in the operation's own estimate (``own``: its cycles
    with the weights read from flash). A buffered operation then waits for the part of the
    transfer its previous operation does not cover (network_performance.cpp: npuCycles =
    max(full transfer - slack + its own, op cycles + first transfer - slack); ``slack``: the
    previous operation's cycles, None for the first, which waits for the whole transfer).
    Vela's debug database (`vela --enable-debug-db`, weight_transfer_cycles and op cycles):
    sum_wc's Conv2D on u55-256, 64 bytes (48 encoded and 16 of records) from flash, 128
    cycles: 177 + 128 - 92 (its transpose) = 213; on u55-128 199 + 128 - 92 = 235; sum_hw's on
    u55-128 196 + 128 - 96 = 228, not buffered on u55-256 (128 + 40 > 154);
    transpose_conv_s2_valid on u55-128 (the first operation, two blocks of rows and columns,
    736 bytes): 3,864 + 800."""
    if config.weight_memory == "sram" or config.spill_memory != "none":
        return 0.0  # the U65: weights_staged and buffered_cycles
    if not _proposed(config, q, block, int(nbytes), slack):
        return 0.0
    transfer = transfer_cycles(config, nbytes)
    if refetches(q, block) == 1 and transfer + _read(config, "sram", nbytes) > own:
        return 0.0  # regor keeps the weights in flash
    depth = q.ofm[2]
    if depth // min(block.ofm[2], depth) > 2:  # sliced in depth: the first slice's transfer
        transfer = transfer_cycles(config, nbytes * block.ofm[2] / depth)
    return max(0.0, transfer - (slack or 0.0))


def next_slack(op, cost: dict) -> float | None:
    """The cycles the next operation's weight DMA runs under (its ``exposed``): an elementwise
    operation's cycles (Vela's estimate for one), a MAC operation's scheduler estimate where
    Vela's weights and maps move off-chip (regor's est_op_cycles_without_buffering: the
    integer LSTM's input FCs on the U65 wait 550 = 887 + 553 - 890 cycles after the recurrent
    FC, Vela's debug database), None where the transfer hides (the U55)."""
    return cost.get("tail", cost["cycles"] if is_elementwise(op) else cost.get("estimate"))
