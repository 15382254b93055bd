"""Modelled Cortex-M4 cycles of what qemu-m4 executes (`tinyprop bench --only cycles`).

A MODEL, NOT SILICON. QEMU counts instructions; this module turns the instructions it actually
executed into Cortex-M4 cycles with the instruction timings of the Cortex-M4 Technical Reference
Manual (the TRM: its instruction-set table, its load/store timing notes and its FPU table):

  - every instruction 1 cycle, except:
  - single loads (LDR, LDRB, LDRH, LDRSB, LDRSH, LDREX) and STREX 2; 1 when the instruction
    before is such a load (or STREX) whose destination is not an address register of this one
    (the TRM: the next LDR/STR loses a cycle, "more multiple LDRs can be pipelined together");
  - single stores STR/STRB/STRH: 1 with an immediate offset ("STR Rx,[Ry,#imm] is always one
    cycle"), else 2, 1 right after such a load; nothing pipelines after a store;
  - LDRD/STRD 3 and LDM/STM/PUSH/POP 1+N, never pipelined; a load or store whose address uses
    a register the instruction just before computed (not a load) one more cycle (no forwarding
    path to the address);
  - MUL, MLA, MLS, the long multiplies and every DSP multiply (SMLAD, SMULBB, ...) 1;
  - SDIV/UDIV 2-12 by the operands (early termination): DIVIDE cycles, the worst case, as the
    trace has no operands;
  - taken branches (B, BL, BX, BLX, CBZ/CBNZ, a conditional branch whose next executed block is
    not its fall-through, and writes to PC: POP/LDM with PC 1+N+P, LDR PC 2+P, TBB/TBH 2+P)
    1+P, P the pipeline refill (REFILL: the TRM gives 1 to 3 by the target's alignment and
    width); a branch not taken 1; IT 1 (its folding is not modelled);
  - FPU: VADD/VSUB/VMUL/VNMUL/VABS/VNEG/VCVT/VCMP/VMRS/VMSR and VMOV immediate or between FP
    registers 1, VMOV between one or two core registers and FP registers 2, VMLA/VMLS/VNMLA/
    VNMLS/VFMA... 3, VDIV/VSQRT 14, VLDR/VSTR 2 (3 for a double), VLDM/VSTM/VPUSH/VPOP 1+N words;
  - FLASH_WAIT wait states added to every pipeline refill (the fetch of a branch target); 0 by
    default, as on ST's parts whose ART accelerator hides the flash's wait states.

Not modelled: data-dependent divides, unaligned accesses, wait states of data reads (the trace
has no data addresses), LDR Rx,[PC,#imm]'s possible fetch contention, whether an instruction in
an IT block passed its condition (each is charged as executed), interrupts.

The instructions come from QEMU itself, no plugin needed: `-d in_asm,exec,nochain` logs each
translation block's instructions once when it is translated (in_asm) and a line each time a
block runs (exec; nochain, so no block runs without its line). A line followed by "Stopped
execution of TB chain" is a block that did not start (its instruction budget ran out first);
"cpu_io_recompile: rewound execution of TB to X" says the block ran only up to X (the device
access at X runs again as a block of its own). The log goes through a FIFO to a reader thread,
so a 16 M-instruction inference is parsed while it runs. The trace is cut into windows at each
call of tp_board_counter, the board's counter read: a window's instructions are what the board
measured between two reads (qemu-m4 counts instructions with -icount shift=0, one instruction a
nanosecond, and its counter ticks at 25 MHz: the board's figure is the trace's to the 40
instructions of a tick; `icount_consistent` checks it exactly).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
from array import array
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import TinypropError

REFILL = 2  # P: cycles of a pipeline refill (the TRM: 1 to 3)
DIVIDE = 12  # SDIV/UDIV: the TRM's 2-12, the worst case
FLASH_WAIT = 0  # wait states per refill (0: ST's ART accelerator)
COUNTER = "tp_board_counter"  # the board's counter read: the trace's window boundary
TICK = 40  # instructions per tick of qemu-m4's counter (25 MHz at one instruction a ns)
QEMU_TRACE = ("-d", "in_asm,exec,nochain")

# MLPerf Tiny inference v0.5/v1.x, closed division, VWW on the STM32L4R5 (Cortex-M4, 120 MHz):
# cycles = latency x clock (docs/benchmarks.md)
MLPERF_VWW = {"ST X-CUBE-AI 10.2 (v1.3)": 10.73e6, "Plumerai (v1.1)": 11.85e6,
              "TFLM + CMSIS-NN (v0.5)": 72.1e6}


@dataclass(frozen=True)
class Timing:
    """The model's parameters (module docstring)."""

    refill: int = REFILL
    divide: int = DIVIDE
    flash_wait: int = FLASH_WAIT


# ---- instructions -------------------------------------------------------------------------

CONDS = {"eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt",
         "gt", "le", "al"}
_PAR = {p + op for p in ("s", "q", "sh", "u", "uq", "uh")
        for op in ("add8", "add16", "sub8", "sub16", "asx", "sax")}
ALU = {"add", "adc", "addw", "adr", "and", "asr", "bfc", "bfi", "bic", "clz", "cmn", "cmp", "eor",
       "lsl", "lsr", "mov", "movw", "movt", "mvn", "neg", "orn", "orr", "rbit", "rev", "rev16",
       "revsh", "ror", "rrx", "rsb", "sbc", "sbfx", "sub", "subw", "teq", "tst", "ubfx", "uxtb",
       "uxth", "uxtb16", "sxtb", "sxth", "sxtb16", "sxtab", "sxtah", "sxtab16", "uxtab", "uxtah",
       "uxtab16", "ssat", "usat", "ssat16", "usat16", "pkhbt", "pkhtb", "sel", "qadd", "qsub",
       "qdadd", "qdsub", "nop", "mrs", "msr", "cpsid", "cpsie", "dmb", "dsb", "yield", "sev",
       "bkpt", "svc", "wfi", "wfe", "udf", *_PAR}
NO_DEST = {"cmp", "cmn", "tst", "teq", "nop", "msr", "cpsid", "cpsie", "dmb", "dsb", "yield",
           "sev", "bkpt", "svc", "wfi", "wfe", "udf"}
MUL = {"mul", "mla", "mls", "smull", "umull", "smlal", "umlal", "umaal", "smlad", "smladx",
       "smlsd", "smlsdx", "smlald", "smlaldx", "smlsld", "smlsldx", "smuad", "smuadx", "smusd",
       "smusdx", "smmul", "smmulr", "smmla", "smmlar", "smmls", "smmlsr", "usad8", "usada8",
       *(f"smul{h}" for h in ("bb", "bt", "tb", "tt", "wb", "wt")),
       *(f"smla{h}" for h in ("bb", "bt", "tb", "tt", "wb", "wt")),
       *(f"smlal{h}" for h in ("bb", "bt", "tb", "tt"))}
TWO_DEST = {"smull", "umull", "smlal", "umlal", "umaal", "smlald", "smlaldx", "smlsld",
            "smlsldx", "smlalbb", "smlalbt", "smlaltb", "smlaltt"}
DIV = {"sdiv", "udiv"}
LOAD = {"ldr", "ldrb", "ldrh", "ldrsb", "ldrsh", "ldrt", "ldrbt", "ldrht", "ldrsbt", "ldrsht",
        "ldrex", "ldrexb", "ldrexh", "pld"}
STORE = {"str", "strb", "strh", "strt", "strbt", "strht"}
STREX = {"strex", "strexb", "strexh"}
DOUBLE = {"ldrd", "strd"}
MULTIPLE = {"ldm", "ldmia", "ldmdb", "ldmfd", "pop", "stm", "stmia", "stmdb", "stmea", "push"}
BRANCH = {"b", "bl", "blx", "bx", "cbz", "cbnz", "tbb", "tbh"}
FPU1 = {"vadd", "vsub", "vmul", "vnmul", "vabs", "vneg", "vcvt", "vcvtr", "vcmp", "vcmpe",
        "vmrs", "vmsr"}
FPU3 = {"vmla", "vmls", "vnmla", "vnmls", "vfma", "vfms", "vfnma", "vfnms"}
FPU14 = {"vdiv", "vsqrt"}
FPU_MEM = {"vldr", "vstr"}
FPU_MULTIPLE = {"vldm", "vldmia", "vldmdb", "vstm", "vstmia", "vstmdb", "vpush", "vpop"}
KNOWN = (ALU | MUL | DIV | LOAD | STORE | STREX | DOUBLE | MULTIPLE | BRANCH | FPU1 | FPU3 | FPU14
         | FPU_MEM | FPU_MULTIPLE | {"vmov", "isb"})
IT = re.compile(r"it[te]{0,3}$")
REG_ALIAS = {"sb": "r9", "sl": "r10", "fp": "r11", "ip": "r12"}
CLASSES = ("load", "store", "load/store multiple", "multiply", "divide", "branch", "fpu", "alu")


def _base(mnemonic: str) -> tuple[str, bool]:
    """(the instruction's name without condition, flag-setting 's' and width or type
    qualifiers, whether it has a condition)."""
    m = mnemonic.split(".")[0]
    if m in KNOWN or IT.match(m):
        return m, False
    for cand, cond in ((m[:-2], True), (m, False)):
        if cond and m[-2:] not in CONDS:
            continue
        if cand in KNOWN:
            return cand, cond
        if cand.endswith("s") and cand[:-1] in KNOWN:
            return cand[:-1], cond
    return m, False


def _operands(text: str) -> list[str]:
    """The operands, split at the commas outside brackets and braces."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _reg(token: str) -> str:
    t = token.strip().rstrip("!").split()[0] if token.strip() else ""
    return REG_ALIAS.get(t, t)


def _core_regs(text: str) -> set[str]:
    return {r for r in (_reg(t) for t in re.split(r"[\s,\[\]{}!]+", text))
            if re.fullmatch(r"r\d+|sp|lr|pc", r)}


def _reg_list(text: str) -> list[str]:
    """The registers of a {list} (ranges such as s0-s3 expanded)."""
    inside = text[text.index("{") + 1 : text.index("}")]
    regs = []
    for part in inside.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-")
            kind = lo[0]
            regs += [f"{kind}{i}" for i in range(int(lo[1:]), int(hi.strip()[1:]) + 1)]
        else:
            regs.append(_reg(part))
    return regs


@dataclass
class Insn:
    """One instruction, decoded for the model from QEMU's in_asm text."""

    pc: int
    size: int
    text: str
    name: str = ""
    klass: str = "alu"
    cycles: int = 1  # when it does not branch (or is no branch)
    taken: int = 0  # cycles when it branches (0: it never does)
    always_taken: bool = False
    load_dest: str | None = None  # a single load's (or STREX's) destination: pipelines
    single_mem: bool = False  # LDR/STR/STREX-like: can be pipelined after a load
    mem: bool = False  # any load or store
    addr_regs: frozenset = frozenset()
    writes: frozenset = frozenset()  # core registers a data-processing instruction writes


def decode(pc: int, size: int, text: str, t: Timing) -> Insn:
    """`text` (QEMU's disassembly, e.g. "ldr r1, [r1, #4]") decoded; an instruction the model
    does not know is an error naming it."""
    mnemonic, _, rest = text.strip().partition(" ")
    name, cond = _base(mnemonic)
    ops = _operands(rest)
    ins = Insn(pc, size, text.strip(), name)
    refill = 1 + t.refill + t.flash_wait
    brackets = rest[rest.index("[") : rest.rindex("]") + 1] if "[" in rest else ""
    if IT.match(name):
        return ins
    if name not in KNOWN:
        raise TinypropError(f"cycle model: no timing for {text.strip()!r} at {pc:#x}; add "
                            "its TRM timing to tinyprop/bench/cycles.py")
    first = _reg(ops[0]) if ops else ""
    if name in LOAD | STORE | STREX:
        ins.klass = "load" if name in LOAD else "store"
        ins.mem = ins.single_mem = True
        ins.addr_regs = frozenset(_core_regs(brackets))
        if name in LOAD or name in STREX:
            ins.load_dest = first
            ins.cycles = 2
        else:  # a store: 1 with an immediate offset, else 2
            offset = brackets.strip("[]").split(",")[1:] if brackets else []
            register_offset = bool(offset and _core_regs(",".join(offset)))
            post_register = len(ops) > 2 and bool(_core_regs(ops[2]))
            ins.cycles = 2 if register_offset or post_register else 1
        if name == "ldr" and first == "pc":
            ins.klass, ins.taken, ins.always_taken = "branch", 1 + refill, True
            ins.single_mem, ins.load_dest = False, None
        return ins
    if name in DOUBLE:
        ins.klass = "load" if name == "ldrd" else "store"
        ins.mem, ins.cycles = True, 3
        ins.addr_regs = frozenset(_core_regs(brackets))
        return ins
    if name in MULTIPLE:
        regs = _reg_list(rest)
        ins.klass, ins.mem, ins.cycles = "load/store multiple", True, 1 + len(regs)
        ins.addr_regs = frozenset({"sp"} if name in ("push", "pop") else {_reg(ops[0])})
        if "pc" in regs:
            ins.klass, ins.taken, ins.always_taken = "branch", len(regs) + refill, not cond
        return ins
    if name in BRANCH:
        ins.klass = "branch"
        ins.taken = (1 if name in ("tbb", "tbh") else 0) + refill
        ins.always_taken = not cond and name not in ("cbz", "cbnz")
        if name in ("tbb", "tbh"):
            ins.mem, ins.addr_regs = True, frozenset(_core_regs(brackets))
        return ins
    if name in FPU_MEM:
        ins.klass, ins.mem = "fpu", True
        ins.cycles = 3 if first.startswith("d") else 2
        ins.addr_regs = frozenset(_core_regs(brackets))
        return ins
    if name in FPU_MULTIPLE:
        words = sum(2 if r.startswith("d") else 1 for r in _reg_list(rest))
        ins.klass, ins.mem, ins.cycles = "fpu", True, 1 + words
        ins.addr_regs = frozenset({"sp"} if name in ("vpush", "vpop") else {_reg(ops[0])})
        return ins
    if name == "vmov":
        core = [o for o in ops if _core_regs(o)]
        ins.klass = "fpu"
        ins.cycles = 2 if core and "[" not in rest else 1
        if core and _core_regs(ops[0]):
            ins.writes = frozenset(_core_regs(",".join(ops[:2]) if len(core) > 1 else ops[0]))
        return ins
    if name in FPU1 | FPU3 | FPU14:
        ins.klass = "fpu"
        ins.cycles = 1 if name in FPU1 else 3 if name in FPU3 else 14
        if name == "vmrs" and _core_regs(ops[0]):
            ins.writes = frozenset(_core_regs(ops[0]))
        return ins
    if name == "isb":
        ins.cycles = refill
        return ins
    ins.klass = "multiply" if name in MUL else "divide" if name in DIV else "alu"
    ins.cycles = t.divide if name in DIV else 1
    if name not in NO_DEST and ops:
        dest = {_reg(o) for o in (ops[:2] if name in TWO_DEST else ops[:1])}
        ins.writes = frozenset(dest)
        if "pc" in dest:
            ins.klass, ins.taken, ins.always_taken = "branch", refill, not cond
    return ins


def pair_cycles(prev: Insn, cur: Insn) -> int:
    """What `cur` gains or loses by following `prev` (the TRM's load/store timing notes)."""
    if not cur.mem:
        return 0
    if cur.addr_regs & prev.writes:
        return 1  # an address computed by the instruction just before: no forwarding path
    if cur.single_mem and prev.load_dest is not None and prev.load_dest not in cur.addr_regs:
        return -1 if cur.cycles > 1 else 0  # pipelined after a load
    return 0


# ---- the trace ----------------------------------------------------------------------------

_IN_LINE = re.compile(r"0x([0-9a-f]+):\s+([0-9a-f]{4}(?: [0-9a-f]{4})?)\s+(.*)$")


@dataclass
class Block:
    """A translation block's instructions as executed: (pc, size, text) each, and its
    function's symbol."""

    insns: list[tuple[int, int, str]]
    symbol: str


@dataclass
class Trace:
    """The execution of a QEMU run: `seq` the blocks executed, in order (indices into
    `blocks`); `marks` the positions in seq where a call of the window function begins and
    `callers` the symbol of the block that called it."""

    blocks: list[Block] = field(default_factory=list)
    seq: array = field(default_factory=lambda: array("i"))
    marks: list[int] = field(default_factory=list)
    callers: list[str] = field(default_factory=list)

    def instructions(self) -> np.ndarray:
        """Instructions executed per position of seq."""
        n = np.array([len(b.insns) for b in self.blocks], np.int64)
        return n[np.frombuffer(self.seq, np.int32)]


def _drop_last(tr: Trace) -> None:
    tr.seq.pop()
    if tr.marks and tr.marks[-1] == len(tr.seq):
        tr.marks.pop()
        tr.callers.pop()


def read_trace(lines, mark_pc: int) -> Trace:
    """A Trace from QEMU's `-d in_asm,exec,nochain` log lines (any iterable of str), cut at
    every execution of the block that starts at `mark_pc`."""
    tr = Trace()
    seq, blocks = tr.seq, tr.blocks
    by_ptr: dict[str, int] = {}
    prefix: dict[tuple[int, int], int] = {}
    pending: Block | None = None
    reading: Block | None = None
    for line in lines:
        if line.startswith("Trace "):
            parts = line.split(" ", 4)
            pc = int(parts[3][10:18], 16)
            if pending is not None and pending.insns and pending.insns[0][0] == pc:
                blocks.append(pending)
                by_ptr[parts[2]] = len(blocks) - 1
                pending = None
            b = by_ptr.get(parts[2])
            if b is None or blocks[b].insns[0][0] != pc:
                raise TinypropError(f"cycle trace: block {parts[2]} at {pc:#x} ran before "
                                    "its instructions were logged")
            if pc == mark_pc:
                tr.marks.append(len(seq))
                tr.callers.append(blocks[seq[-1]].symbol if seq else "")
            seq.append(b)
        elif reading is not None:
            m = _IN_LINE.match(line)
            if m:
                reading.insns.append((int(m.group(1), 16), 2 if len(m.group(2)) == 4 else 4,
                                      m.group(3)))
            else:
                pending, reading = reading, None
        elif line.startswith("IN:"):
            reading = Block([], line[3:].strip())
        elif line.startswith("Stopped execution"):
            _drop_last(tr)  # the block before did not start
        elif line.startswith("cpu_io_recompile"):
            stop = int(line.rsplit(" ", 1)[1], 16)  # it ran only up to here
            b = seq[-1]
            kept = [i for i in blocks[b].insns if i[0] < stop]
            if not kept:
                _drop_last(tr)
                continue
            key = (b, stop)
            if key not in prefix:
                blocks.append(Block(kept, blocks[b].symbol))
                prefix[key] = len(blocks) - 1
            seq[-1] = prefix[key]
    return tr


@dataclass
class Windows:
    """Per window between two counter reads: instructions and modelled cycles (and the
    cycles per instruction class), the caller of the read that opens it."""

    instructions: np.ndarray
    cycles: np.ndarray
    refills: np.ndarray  # taken branches: cycles at another P are cycles + (P - refill) x these
    classes: np.ndarray  # (windows, CLASSES)
    callers: list[str]
    starts: np.ndarray  # each window's first instruction's index in the whole run


@dataclass
class Costs:
    """Per position of a trace's seq: modelled cycles, pipeline refills, cycles per instruction
    class and instructions (zero for a left-out function's blocks)."""

    cycles: np.ndarray
    refills: np.ndarray
    classes: np.ndarray
    instructions: np.ndarray


def costs(tr: Trace, t: Timing = Timing(),
          leave_out: Callable[[str], bool] | None = None) -> Costs:
    """The model applied to every executed block of `tr` from its first counter read on (a
    taken branch is charged to the block it ends, by the block that ran next)."""
    seq = np.frombuffer(tr.seq, np.int32).astype(np.int64)
    if len(tr.marks) < 2:
        raise TinypropError("cycle trace: fewer than two counter reads")
    used = np.unique(seq[tr.marks[0]:])
    nb = len(tr.blocks)
    internal = np.zeros(nb)
    klass = np.zeros((nb, len(CLASSES)))
    taken_c = np.zeros(nb)
    fall_c = np.zeros(nb)
    always = np.zeros(nb, bool)
    isb = np.zeros(nb)
    first_pc = np.zeros(nb, np.int64)
    fall_pc = np.zeros(nb, np.int64)
    count = np.array([len(b.insns) for b in tr.blocks], np.int64)
    decoded: dict[int, list[Insn]] = {}
    for b in used:
        blk = tr.blocks[b]
        ins = [decode(pc, size, text, t) for pc, size, text in blk.insns]
        decoded[b] = ins
        isb[b] = sum(i.name == "isb" for i in ins)
        first_pc[b] = ins[0].pc
        fall_pc[b] = ins[-1].pc + ins[-1].size
        for k, i in enumerate(ins):
            c = i.cycles + (pair_cycles(ins[k - 1], i) if k else 0)
            if k < len(ins) - 1 or not i.taken:
                internal[b] += c
                klass[b, CLASSES.index(i.klass)] += c
        last = ins[-1]
        if last.taken:  # decided by the next block executed
            taken_c[b], fall_c[b] = last.taken, last.cycles
            always[b] = last.always_taken
            pre = pair_cycles(ins[-2], last) if len(ins) > 1 else 0
            internal[b] += pre
            klass[b, CLASSES.index(last.klass)] += pre
    out = np.array([leave_out is not None and leave_out(b.symbol) for b in tr.blocks], bool)
    cost = internal[seq].copy()
    per_class = klass[seq].copy()
    nxt = seq[1:]
    cur = seq[:-1]
    took = (taken_c[cur] > 0) & (always[cur] | (first_pc[nxt] != fall_pc[cur]))
    branch = np.where(took, taken_c[cur], fall_c[cur])
    refills = isb[seq]
    refills[:-1] += took
    codes = cur * nb + nxt
    uniq, inv = np.unique(codes, return_inverse=True)
    adj = np.zeros(len(uniq))
    adj_class = np.zeros(len(uniq), np.int64)  # the class of the instruction it applies to
    for k, code in enumerate(uniq):
        a, b = divmod(int(code), nb)
        if a in decoded and b in decoded:
            adj[k] = pair_cycles(decoded[a][-1], decoded[b][0])
            adj_class[k] = CLASSES.index(decoded[b][0].klass)
    edge_adj = adj[inv]
    cost[:-1] += branch + edge_adj
    per_class[:-1, CLASSES.index("branch")] += branch
    np.add.at(per_class, (np.arange(len(cur)), adj_class[inv]), edge_adj)
    n_ins = count[seq].astype(np.float64)
    drop = out[seq]
    cost[drop] = 0
    refills[drop] = 0
    per_class[drop] = 0
    n_ins[drop] = 0
    return Costs(cost, refills, per_class, n_ins)


def model(tr: Trace, t: Timing = Timing(),
          leave_out: Callable[[str], bool] | None = None, c: Costs | None = None) -> Windows:
    """Modelled cycles of each window of `tr`; the blocks of a function `leave_out` names
    (by symbol) count neither instructions nor cycles. `c`: costs(tr, t, leave_out) already
    computed."""
    c = costs(tr, t, leave_out) if c is None else c
    n_ins = c.instructions
    starts = np.concatenate([[0], np.cumsum(n_ins)])[tr.marks]
    bounds = np.asarray(tr.marks)
    ins_w = np.add.reduceat(n_ins, bounds)[:-1]
    cyc_w = np.add.reduceat(c.cycles, bounds)[:-1]
    ref_w = np.add.reduceat(c.refills, bounds)[:-1]
    cls_w = np.add.reduceat(c.classes, bounds, axis=0)[:-1]
    return Windows(ins_w.astype(np.int64), cyc_w, ref_w.astype(np.int64), cls_w,
                   tr.callers[:-1], starts[:-1])


def functions(tr: Trace, c: Costs, first: int, last: int, top: int = 20) -> list[dict]:
    """Instructions and modelled cycles per function (the symbol of each executed block) over
    windows first..last-1 of `tr`, the `top` costliest first: where a window's cycles go."""
    seq = np.frombuffer(tr.seq, np.int32).astype(np.int64)
    lo, hi = tr.marks[first], tr.marks[last]
    names = sorted({b.symbol for b in tr.blocks})
    index = {n: i for i, n in enumerate(names)}
    sym = np.array([index[b.symbol] for b in tr.blocks], np.int64)[seq[lo:hi]]
    cyc = np.bincount(sym, c.cycles[lo:hi], len(names))
    ins = np.bincount(sym, c.instructions[lo:hi], len(names))
    order = [i for i in np.argsort(-cyc, kind="stable") if ins[i] > 0][:top]
    return [{"function": names[i], "instructions": int(ins[i]), "cycles": int(cyc[i])}
            for i in order]


def icount_consistent(windows: Windows, board: Sequence[int], which: Sequence[int]) -> bool:
    """Whether the board's counter figures (`board`, of windows `which`, one run without
    sleeps) are exactly what its 25 MHz counter shows for the trace's instructions: some
    offset b in 0..TICK-1 makes every figure TICK x (ticks at the window's end - ticks at its
    start), ticks = floor((instruction index + b) / TICK)."""
    lo = windows.starts[list(which)]
    hi = lo + windows.instructions[list(which)]
    return any(all(TICK * ((h + b) // TICK - (s + b) // TICK) == c
                   for s, h, c in zip(lo, hi, board, strict=True))
               for b in range(TICK))


def symbol_address(elf: Path, name: str) -> int:
    """The address of function `name` in `elf` (Thumb bit cleared)."""
    out = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16) & ~1
    raise TinypropError(f"{elf}: no symbol {name}; the cycle trace cuts its windows there")


@contextmanager
def traced(elf: Path, mark: str = COUNTER):
    """Yields (the QEMU arguments that log the trace into a FIFO, a function returning the
    Trace once the run has ended); a thread reads the FIFO while QEMU runs."""
    mark_pc = symbol_address(elf, mark)
    with tempfile.TemporaryDirectory() as tmp:
        fifo = Path(tmp) / "trace.fifo"
        os.mkfifo(fifo)
        result: dict = {}

        def reader() -> None:
            try:
                with open(fifo, errors="replace", buffering=1 << 20) as f:
                    result["trace"] = read_trace(f, mark_pc)
            except Exception as e:  # noqa: BLE001 - handed to the caller
                result["error"] = e

        th = threading.Thread(target=reader, daemon=True)
        th.start()

        def finish() -> Trace:
            th.join(600)
            if "error" in result:
                raise result["error"]
            if "trace" not in result:
                raise TinypropError("cycle trace: QEMU's log did not end")
            return result["trace"]

        try:
            yield (*QEMU_TRACE, "-D", str(fifo)), finish
        finally:
            if th.is_alive():  # QEMU never opened the log: let the reader end
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
                th.join(10)


# ---- validation: the microbenchmarks (firmware/apps/cyclebench) ---------------------------

CYCLEBENCH = "firmware/apps/cyclebench/cyclebench.c"


def _loop(t: Timing) -> int:
    return 1 + 1 + t.refill + t.flash_wait  # subs; bne taken


# Per benchmark: its loop body and the cycles of one iteration by the TRM's timings, worked
# out by hand (not by the model): loads 2 and 1 pipelined, STR #imm 1, STR register offset 2
# (1 after a load), an address computed just before +1, LDRD/STRD 3, LDM/STM/PUSH/POP 1+N,
# multiplies 1, divides DIVIDE, branches 1 not taken and 1+P taken, FPU per its table.
MICRO: dict[str, tuple[str, Callable[[Timing], int]]] = {
    "ldr_chain": ("8 x ldr r1,[r1] (each address the load before)", lambda t: 8 * 2),
    "ldr_independent": ("8 x ldr rN,[r1,#k]", lambda t: 2 + 7 * 1),
    "ldr_str_imm": ("4 x (ldr r2,[r1,#4]; str r2,[r1,#8])", lambda t: 4 * (2 + 1)),
    "ldr_str_reg": ("4 x (ldr r2,[r1,#4]; str r2,[r1,r3])", lambda t: 4 * (2 + 1)),
    "str_imm": ("8 x str r2,[r1,#8]", lambda t: 8 * 1),
    "str_reg": ("8 x str r2,[r1,r3]", lambda t: 8 * 2),
    "str_ldr": ("4 x (str r2,[r1,#8]; ldr r3,[r1,#4])", lambda t: 4 * (1 + 2)),
    "alu_address": ("4 x (add r2,r1,#4; ldr r3,[r2])", lambda t: 4 * (1 + 2 + 1)),
    "ldrb_ldrh": ("4 x (ldrb r2,[r1,#4]; ldrsh r3,[r1,#6])", lambda t: 2 + 7 * 1),
    "ldrd_strd": ("2 x (ldrd r2,r3,[r1,#8]; strd r2,r3,[r1,#16])", lambda t: 2 * (3 + 3)),
    "ldm_stm_4": ("2 x (ldm r1,{r2-r5}; stm r1,{r2-r5})", lambda t: 2 * (5 + 5)),
    "push_pop_4": ("2 x (push {r2-r5}; pop {r2-r5})", lambda t: 2 * (5 + 5)),
    "smlad": ("8 x smlad", lambda t: 8 * 1),
    "multiply": ("2 x (mul; mla; smull; smlal)", lambda t: 2 * 4),
    "divide": ("4 x sdiv", lambda t: 4 * t.divide),
    "branch_not_taken": ("4 x (cmp; bne not taken)", lambda t: 4 * (1 + 1)),
    "branch_taken": ("4 x b to the next instruction", lambda t: 4 * (1 + t.refill + t.flash_wait)),
    "call_return": ("bl; bx lr; b", lambda t: 3 * (1 + t.refill + t.flash_wait)),
    "cbz_cbnz": ("cbz not taken; nop; cbnz taken over a nop",
                 lambda t: 1 + 1 + (1 + t.refill + t.flash_wait)),
    "it": ("4 x (it eq; addeq)", lambda t: 4 * (1 + 1)),
    "vadd_vmul": ("4 x (vadd.f32; vmul.f32)", lambda t: 4 * (1 + 1)),
    "vmla": ("4 x vmla.f32", lambda t: 4 * 3),
    "vdiv_vsqrt": ("vdiv.f32; vsqrt.f32", lambda t: 14 + 14),
    "vldr_vstr": ("4 x (vldr s0; vstr s0)", lambda t: 4 * (2 + 2)),
    "vldm_vstm_4": ("vldm r1,{s0-s3}; vstm r1,{s0-s3}", lambda t: (1 + 4) + (1 + 4)),
    "vmov_core": ("4 x (vmov s0,r2; vmov r3,s0)", lambda t: 4 * (2 + 2)),
}


def build_cyclebench(board: str = "qemu-m4") -> Path:
    from ..device.firmware import build_firmware
    from ..paths import REPO_ROOT

    return build_firmware(board, str(REPO_ROOT / CYCLEBENCH),
                          {"APP_ENTRY": "tp_cyclebench_main"})


def validate(board: str = "qemu-m4", t: Timing = Timing()) -> dict:
    """The microbenchmarks on `board` under the trace: per benchmark the modelled cycles and
    instructions of one iteration (the 2N run less the N run, over N) beside the TRM's figure,
    and whether the board's counter agrees exactly with the trace's instruction counts."""
    from ..device.runners import start_qemu

    elf = build_cyclebench(board)
    with tempfile.TemporaryDirectory() as tmp, traced(elf) as (args, finish):
        with start_qemu(elf, workdir=Path(tmp), board=board, extra_args=args) as q, \
                q.connect(timeout=120) as port:
            lines = []
            while True:
                line = port.readline().decode(errors="replace").strip()
                if not line:
                    raise TinypropError("cyclebench: the board stopped answering")
                if line.startswith("end "):
                    break
                lines.append(line.split())
            status = q.wait(60)
        trace = finish()
    if status != 0 or len(lines) != len(MICRO):
        raise TinypropError(f"cyclebench: exit status {status}, {len(lines)} benchmarks of "
                            f"{len(MICRO)}")
    w = model(trace, t)
    if len(w.cycles) < 4 * len(lines) - 1:
        raise TinypropError(f"cyclebench: {len(w.cycles)} counter windows for {len(lines)} "
                            "benchmarks (4 reads each)")
    rows, board_costs, which = [], [], []
    for k, (name, n, cost_n, cost_2n) in enumerate(lines):
        body, trm = MICRO[name]
        a, b = 4 * k, 4 * k + 2
        n = int(n)
        rows.append({"name": name, "body": body, "trm": trm(t) + _loop(t),
                     "model": float(w.cycles[b] - w.cycles[a]) / n,
                     "instructions": float(w.instructions[b] - w.instructions[a]) / n})
        board_costs += [int(cost_n), int(cost_2n)]
        which += [a, b]
    return {"board": board, "timing": t.__dict__, "loop": "subs; bne (taken): 2+P cycles",
            "rows": rows, "trace_instructions": [int(w.instructions[i]) for i in which],
            "board_instructions": board_costs,
            "icount_exact": icount_consistent(w, board_costs, which)}


# ---- the figures: a VWW inference and a training step -------------------------------------

HOOKS = ("on_part", COUNTER)  # kerneltest's profile hook and the counter it reads


def _harness_elf(board: str, blob: bytes) -> Path:
    from ..device.firmware import build_firmware, write_blob_header

    return build_firmware(board, "kerneltest", {"BLOB": str(write_blob_header(blob))})


def _per_mac(n: float, macs: int) -> float | None:
    return round(n / macs, 2) if macs else None


def _at_refills(cycles: float, refills: int, t: Timing) -> dict[int, int]:
    """The cycles at each pipeline refill P the TRM allows (1 to 3): the model is linear in P."""
    return {p: int(cycles + (p - t.refill) * refills) for p in (1, 2, 3)}


def vww_cycles(graph, x: np.ndarray, target: str = "cortex-m4", board: str = "qemu-m4",
               t: Timing = Timing()) -> dict:
    """One inference of `graph` (VWW) with `target`'s kernels under the trace, the cases of
    kernels.vww_cases with the build's kernels only: instructions and modelled cycles of the
    whole model and per layer type (each group of ops less the one-RESHAPE model of its
    output), per multiply-accumulate; the board's own instruction count of each case beside
    the trace's (they differ by less than a counter tick)."""
    from ..compile.patch import op_macs
    from .kernels import (
        CMSIS_NN_CYCLES,
        CMSIS_NN_TAKEN_BRANCHES,
        FLAG_OPT_ONLY,
        LAYER_TYPES,
        _layer_type,
        run_cases,
        vww_cases,
    )

    cases, groups, whole = vww_cases(graph, x, target, FLAG_OPT_ONLY)
    elf = _harness_elf(board, whole)
    with traced(elf) as (args, finish):
        run = run_cases(cases, board, builtin=whole, qemu_args=args)
    tr = finish()
    pc = costs(tr, t)
    w = model(tr, t, c=pc)
    results = sorted(run.results, key=lambda r: r.case)
    if any(r.status for r in results) or len(w.cycles) != 2 * len(results) - 1:
        raise TinypropError(f"cycle trace: {len(results)} inferences, {len(w.cycles)} counter "
                            f"windows, statuses {[r.status for r in results]}")
    ins, cyc = w.instructions[0::2], w.cycles[0::2]
    gap = max(abs(int(i) - r.cost_opt) for i, r in zip(ins, results, strict=True))
    macs = sum(op_macs(graph, op) for op in graph.ops)
    out: dict = {"board": board, "target": target, "timing": t.__dict__,
                 "whole": {"instructions": int(ins[0]), "cycles": int(cyc[0]), "macs": macs,
                           "board_instructions": results[0].cost_opt,
                           "taken_branches": int(w.refills[0]),
                           "cycles_at_refill": _at_refills(cyc[0], w.refills[0], t),
                           "cmsis_nn_cycles": CMSIS_NN_CYCLES["total"],
                           "cmsis_nn_cycles_at_refill": _at_refills(
                               CMSIS_NN_CYCLES["total"], CMSIS_NN_TAKEN_BRANCHES, Timing())},
                 "types": {name: {"instructions": 0, "cycles": 0, "macs": 0,
                                  "cmsis_nn_cycles": CMSIS_NN_CYCLES[name]}
                           for name in LAYER_TYPES},
                 "classes": dict(zip(CLASSES, (int(c) for c in w.classes[0]), strict=True)),
                 "functions": functions(tr, pc, 0, 1),
                 "trace_vs_board_max_difference": gap, "counter_tick": TICK}
    for k, (first, last) in enumerate(groups):
        row = out["types"][_layer_type(graph, graph.ops[first])]
        row["instructions"] += int(ins[1 + 2 * k] - ins[2 + 2 * k])
        row["cycles"] += int(cyc[1 + 2 * k] - cyc[2 + 2 * k])
        row["macs"] += sum(op_macs(graph, o) for o in graph.ops[first : last + 1])
    for row in (*out["types"].values(), out["whole"]):
        # a layer type the model lacks (ResNet-8: no depthwise) has no instructions
        row["cycles_per_instruction"] = (round(row["cycles"] / row["instructions"], 3)
                                         if row["instructions"] else None)
        row["instructions_per_mac"] = _per_mac(row["instructions"], row["macs"])
        row["cycles_per_mac"] = _per_mac(row["cycles"], row["macs"])
        row["cmsis_nn_cycles_per_mac"] = _per_mac(row["cmsis_nn_cycles"], row["macs"])
    return out


def step_cycles(blob: bytes, xs: np.ndarray, ys: np.ndarray, board: str = "qemu-m4",
                t: Timing = Timing()) -> dict:
    """Training steps of `blob` (compiled into the harness, the build's kernels, one step a
    sample) under the trace: the last step's instructions and modelled cycles, the profile
    hook's own (on_part and the counter reads it makes) left out; the board's figure (its
    step less the hook calls' measured cost) beside it."""
    from .kernels import (
        FLAG_BUILTIN,
        FLAG_OUTPUTS,
        FLAG_TRAIN,
        Case,
        StepProfile,
        run_cases,
        train_inputs,
    )

    case = Case(None, train_inputs(xs, ys), FLAG_TRAIN | FLAG_OUTPUTS | FLAG_BUILTIN)
    elf = _harness_elf(board, blob)
    with traced(elf) as (args, finish):
        run = run_cases([case], board, builtin=blob, qemu_args=args)
    if any(r.status for r in run.results):
        raise TinypropError(f"cycle trace: a training step failed: "
                            f"{[r.status for r in run.results]}")
    tr = finish()
    pc = costs(tr, t, leave_out=lambda symbol: symbol in HOOKS)
    w = model(tr, t, c=pc)
    # the harness's own reads: per step t0, t1 (around the step), then two around 64 hook calls
    own = [k for k, c in enumerate(w.callers) if c != "on_part"]
    if len(own) < 4 * len(run.results) - 1:
        raise TinypropError(f"cycle trace: {len(own)} harness counter reads for "
                            f"{len(run.results)} steps")
    a, b = own[4 * (len(run.results) - 1)], own[4 * (len(run.results) - 1) + 1]
    p = StepProfile.of(run.results[-1])
    ins, cyc, ref = (int(w.instructions[a:b].sum()), int(w.cycles[a:b].sum()),
                     int(w.refills[a:b].sum()))
    return {"board": board, "timing": t.__dict__, "instructions": ins, "cycles": cyc,
            "cycles_per_instruction": round(cyc / ins, 3), "taken_branches": ref,
            "cycles_at_refill": _at_refills(cyc, ref, t),
            "classes": dict(zip(CLASSES, (int(c) for c in w.classes[a:b].sum(axis=0)),
                                strict=True)),
            "board_instructions": int(p.cost - p.hook_calls * p.hook_cost),
            "hook_calls": p.hook_calls, "functions": functions(tr, pc, a, b)}


def report(fig: dict) -> list[str]:
    """The cycles section's figures as printed lines: the validation table, the inference per
    layer type, the training step and the MLPerf Tiny anchors."""
    v, inf, step = fig["validation"], fig["inference"], fig["step"]
    t = v["timing"]
    lines = [f"model: Cortex-M4 TRM timings, P={t['refill']}, SDIV/UDIV {t['divide']}, flash "
             f"wait states {t['flash_wait']} (a model, not silicon)",
             f"validation ({v['loop']}), cycles an iteration:",
             f"  {'benchmark':<18} {'TRM':>5} {'model':>7} {'instr':>6}  body"]
    for r in v["rows"]:
        lines.append(f"  {r['name']:<18} {r['trm']:>5} {r['model']:7.2f} "
                     f"{r['instructions']:6.2f}  {r['body']}")
    lines.append(f"  trace instructions = board counter exactly (40-instruction tick): "
                 f"{v['icount_exact']}")
    lines.append(f"inference ({inf['target']} kernels on {inf['board']}):")
    lines.append(f"  {'layer type':<20} {'MACs':>10} {'instructions':>13} {'cycles':>12} "
                 f"{'CPI':>6} {'instr/MAC':>9} {'cyc/MAC':>8} {'CMSIS-NN cycles':>16} "
                 f"{'cyc/MAC':>8}")
    for name, row in (*inf["types"].items(), ("whole", inf["whole"])):
        lines.append(f"  {name:<20} {row['macs']:>10,} {row['instructions']:>13,} "
                     f"{row['cycles']:>12,} {row['cycles_per_instruction'] or 0:6.3f} "
                     f"{row['instructions_per_mac'] or 0:9.2f} {row['cycles_per_mac'] or 0:8.2f} "
                     f"{row['cmsis_nn_cycles']:>16,} {row['cmsis_nn_cycles_per_mac'] or 0:8.2f}")
    w = inf["whole"]
    lines.append("  whole at P=1, 2, 3: " + ", ".join(
        f"{c / 1e6:.2f} M" for c in w["cycles_at_refill"].values()) + " (CMSIS-NN " + ", ".join(
        f"{c / 1e6:.2f} M" for c in w["cmsis_nn_cycles_at_refill"].values()) + ")")
    lines.append(f"step ({fig['step_scheme']}): {step['instructions']:,} instructions, "
                 f"{step['cycles']:,} cycles (CPI {step['cycles_per_instruction']}), "
                 f"{step['cycles'] / w['cycles']:.2f} inferences; board counter "
                 f"{step['board_instructions']:,} instructions less {step['hook_calls']:,} "
                 "profile hook calls")
    for what, part in (("inference", inf), ("step", step)):
        lines.append(f"  where the {what}'s cycles go (function: M cycles, M instructions):")
        lines += [f"    {f['function']:<44} {f['cycles'] / 1e6:6.2f} {f['instructions'] / 1e6:6.2f}"
                  for f in part.get("functions", [])[:12]]
    lines.append(f"CMSIS-NN through the same model: {w['cmsis_nn_cycles'] / 1e6:.2f} M cycles; "
                 f"ours {w['cycles'] / w['cmsis_nn_cycles']:.2f}x")
    lines.append("MLPerf Tiny VWW on the STM32L4R5 (Cortex-M4, 120 MHz), cycles:")
    for name, c in MLPERF_VWW.items():
        lines.append(f"  {name:<28} {c / 1e6:6.2f} M ({c / w['macs']:.2f}/MAC); ours "
                     f"{w['cycles'] / c:.2f}x")
    return lines
