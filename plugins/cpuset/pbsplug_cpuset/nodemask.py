"""Node and CPU sets in the two forms the kernel and the seed use, and the logical/physical map.

The kernel writes sets as lists ("0-3,8", cpusets and sysfs) and as hexadecimal masks
(``cpumap``, and the free-node mask that the seed's MOM reports to its scheduler). Inside,
a set is a Python ``int`` used as a bitset, bit i for id i: a 4096-node mask is one integer,
and union, intersection and "is there room in this octant" are single operations on it.

A node has two numbers (seed 002): its logical number, the compact id 0..n-1 the OS and
cpusets use, and its physical id (an SGI "nasid"), which is usually but not always the same
and which the hardware's octants are cut by. ``NodeMap`` translates between them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress
from operator import itemgetter

__all__ = [
    "ID_LIMIT",
    "NodeMap",
    "UnknownNodeError",
    "decode_bits",
    "decode_mask",
    "encode_bits",
    "encode_mask",
    "format_list",
    "ids_of",
    "mask_of",
    "parse_list",
    "parse_ordered_list",
]

# ASCII only: int() would also take "٣" or "1_0", and no kernel file holds those.
_LIST_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?", re.ASCII)
_HEX = re.compile(r"[0-9a-fA-F]+", re.ASCII)
_CPUMASK_WORD = re.compile(r"[0-9a-fA-F]{8}", re.ASCII)
_ONES = re.compile("1+")
_DIGIT_TO_FLAG = bytes.maketrans(b"01", b"\x00\x01")

# Far above any real machine (Linux allows at most 8192 CPUs and 1024 nodes), low enough that
# a typo such as "0-4294967295" fails at once instead of building a 4-gigabit set.
ID_LIMIT = 1 << 20


class UnknownNodeError(KeyError, ValueError):
    """A node number that the map does not hold: a lookup miss (``KeyError``) caused by a
    bad input (``ValueError``), so callers may catch either."""

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0]) if self.args else ""


def _ranges(text: str) -> Iterator[tuple[int, int]]:
    """The (first, last) pairs of a list string, in written order."""
    body = text.strip()
    if not body:
        return
    for item in body.split(","):
        match = _LIST_ITEM.fullmatch(item.strip())
        if match is None:
            raise ValueError(
                f"{text!r} is not a list of ids: {item.strip()!r} is not N or N-M "
                "(expected e.g. '0-3,8,10-11')"
            )
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        if last >= ID_LIMIT:
            raise ValueError(
                f"{text!r}: id {last} is beyond the largest supported id ({ID_LIMIT - 1})"
            )
        if last < first:
            raise ValueError(
                f"{text!r} is not a list of ids: range {item.strip()!r} runs backwards "
                f"(write {last}-{first})"
            )
        yield first, last


def parse_ordered_list(text: str) -> list[int]:
    """The ids of a list string in written order, repeats kept.

    For lists whose order carries meaning, such as a node map ("0-61,64-65,62-63": the i-th id
    written belongs to logical node i). Raises ValueError like ``parse_list``.
    """
    ids: list[int] = []
    for first, last in _ranges(text):
        ids.extend(range(first, last + 1))
    return ids


def parse_list(text: str) -> list[int]:
    """The ids of a kernel list string ("0-3,8,10-11"), sorted and unique; "" is no ids.

    Whitespace around the list and its items (such as the newline ending a sysfs file) is
    ignored. The kernel's stride form ("0-7:2/4") is not accepted: sysfs never writes it.
    """
    mask = 0
    for first, last in _ranges(text):
        mask |= (1 << (last + 1)) - (1 << first)  # a whole range in one operation
    return ids_of(mask)


def format_list(ids: Iterable[int]) -> str:
    """The shortest kernel list string for ``ids`` ("0-3,8"); no ids gives ""."""
    return _format_runs(_lsb_first(mask_of(ids)))


def _lsb_first(mask: int) -> str:
    """The bits of ``mask`` as "0"/"1" characters, bit 0 first ("" for 0)."""
    return bin(mask)[:1:-1] if mask else ""


def _format_runs(bits: str) -> str:
    # Each run of "1"s is one item; the regex engine finds them without a Python-level loop.
    items = []
    for run in _ONES.finditer(bits):
        first, last = run.start(), run.end() - 1
        items.append(str(first) if first == last else f"{first}-{last}")
    return ",".join(items)


def mask_of(ids: Iterable[int]) -> int:
    """The bitset with bit i set for each id i (repeats allowed); ValueError on a negative id."""
    members = ids if isinstance(ids, (list, tuple, range, set, frozenset)) else list(ids)
    if not members:
        return 0
    low, high = min(members), max(members)
    if low < 0:
        raise ValueError(f"id {low} is negative: node and CPU ids start at 0")
    if high >= ID_LIMIT:
        raise ValueError(f"id {high} is beyond the largest supported id ({ID_LIMIT - 1})")
    # Mark a binary string, then one int(): linear, where OR-ing 4096 shifted big ints one by
    # one would be quadratic.
    digits = bytearray(b"0") * (high + 1)
    for i in members:
        digits[i] = 0x31  # "1"
    return int(digits[::-1], 2)


def _check_mask(mask: int) -> None:
    if mask < 0:
        raise ValueError(f"mask {mask} is negative: a bitset has no sign")


def ids_of(mask: int) -> list[int]:
    """The set bits of ``mask``, lowest first."""
    _check_mask(mask)
    digits = _lsb_first(mask).encode("ascii")
    return list(compress(range(len(digits)), digits.translate(_DIGIT_TO_FLAG)))


def _check_width(width: int) -> None:
    if width < 1:
        raise ValueError(f"mask width {width} must be at least 1 bit")


def encode_bits(mask: int, width: int) -> str:
    """``mask`` as exactly ceil(width/4) lowercase hex digits, most significant first, no 0x."""
    _check_width(width)
    _check_mask(mask)
    if mask.bit_length() > width:
        raise ValueError(
            f"id {mask.bit_length() - 1} does not fit a {width}-bit mask (ids are 0..{width - 1})"
        )
    return format(mask, f"0{(width + 3) // 4}x")


def encode_mask(ids: Iterable[int], width: int) -> str:
    """The hex mask with bit i set for each id i: width 8, ids {0, 1} gives "03"."""
    return encode_bits(mask_of(ids), width)


def decode_bits(text: str, width: int | None = None) -> int:
    """The bitset written as hex: plain ("03"), with 0x, or as a Linux cpumask of comma-separated
    32-bit words ("ff,0000000f", every word but the first 8 digits). With ``width``, a set bit
    at or above it is an error."""
    body = text.strip()
    if body[:2] in ("0x", "0X"):
        body = body[2:]
    words = body.split(",")
    if not all(_HEX.fullmatch(w) for w in words) or not all(
        _CPUMASK_WORD.fullmatch(w) for w in words[1:]
    ):
        raise ValueError(
            f"{text!r} is not a hex mask (expected hex digits such as '03', optionally 0x, "
            "or 32-bit words separated by commas such as '00000000,0000000f')"
        )
    mask = int("".join(words), 16)
    if width is not None:
        _check_width(width)
        if mask.bit_length() > width:
            raise ValueError(
                f"mask {text!r} sets bit {mask.bit_length() - 1}, beyond its width of {width} bits "
                f"(ids 0..{width - 1})"
            )
    return mask


def decode_mask(text: str, width: int | None = None) -> list[int]:
    """The ids set in a hex mask; the inverse of ``encode_mask`` (see ``decode_bits``)."""
    return ids_of(decode_bits(text, width))


class NodeMap:
    """Logical node numbers (0..n-1) to physical ids and back.

    ``physical[i]`` is the physical id of logical node i. Physical ids may have gaps and any
    order; each appears once.
    """

    __slots__ = ("_physical", "_logical", "_identity", "_known", "_gather_physical",
                 "_gather_logical")

    def __init__(self, physical: Sequence[int]) -> None:
        if isinstance(physical, str):  # a str is a Sequence, of characters
            raise TypeError("NodeMap takes a sequence of ids; use NodeMap.parse for a list string")
        if not physical:
            raise ValueError("a node map needs at least one node")
        logical: dict[int, int] = {}
        for i, p in enumerate(physical):
            if p < 0:
                raise ValueError(f"physical id {p} (logical node {i}) is negative")
            if p in logical:
                raise ValueError(
                    f"physical id {p} is given to both logical node {logical[p]} and {i}: "
                    "each physical id names one node"
                )
            logical[p] = i
        self._physical: tuple[int, ...] = tuple(physical)
        self._logical = logical
        self._identity = all(p == i for i, p in enumerate(self._physical))
        self._known = mask_of(self._physical)
        # Translation is a permutation of bit strings: itemgetter picks, in C, the logical bit
        # for each physical position (index n is a "0" appended for the gaps) and back.
        n = len(self._physical)
        self._gather_physical = itemgetter(*(logical.get(p, n) for p in range(self.width)))
        self._gather_logical = itemgetter(*self._physical)

    @classmethod
    def identity(cls, n: int) -> NodeMap:
        """The map of a machine whose physical ids equal its node numbers."""
        return cls(range(n))

    @classmethod
    def parse(cls, text: str) -> NodeMap:
        """From a list string in logical order: "0-61,64-65,62-63" makes node 62 physical 64."""
        return cls(parse_ordered_list(text))

    def format(self) -> str:
        """The list string ``parse`` reads, shortest form, in logical order."""
        items: list[str] = []
        phys = self._physical
        start = 0
        for i in range(1, len(phys) + 1):
            if i == len(phys) or phys[i] != phys[i - 1] + 1:
                first, last = phys[start], phys[i - 1]
                items.append(str(first) if first == last else f"{first}-{last}")
                start = i
        return ",".join(items)

    @property
    def physical(self) -> tuple[int, ...]:
        """The physical id of each logical node, in logical order."""
        return self._physical

    @property
    def width(self) -> int:
        """Bits a physical mask needs: the highest physical id + 1."""
        return max(self._physical) + 1

    def __len__(self) -> int:
        return len(self._physical)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NodeMap) and self._physical == other._physical

    def __hash__(self) -> int:
        return hash(self._physical)

    def __repr__(self) -> str:
        return f"NodeMap.parse({self.format()!r})"

    def physical_of(self, logical: int) -> int:
        """The physical id of logical node ``logical``."""
        if 0 <= logical < len(self._physical):
            return self._physical[logical]
        raise UnknownNodeError(
            f"logical node {logical} does not exist: this map has nodes 0..{len(self) - 1}"
        )

    def logical_of(self, physical: int) -> int:
        """The logical number of the node with physical id ``physical``."""
        try:
            return self._logical[physical]
        except KeyError:
            raise UnknownNodeError(
                f"no node has physical id {physical} (physical ids: {self.format()})"
            ) from None

    def to_physical(self, logical_ids: Iterable[int]) -> list[int]:
        """The physical ids of some logical nodes, sorted and unique."""
        return ids_of(self.mask_to_physical(mask_of(logical_ids)))

    def to_logical(self, physical_ids: Iterable[int]) -> list[int]:
        """The logical numbers of some physical ids, sorted and unique."""
        return ids_of(self.mask_to_logical(mask_of(physical_ids)))

    def mask_to_physical(self, mask: int) -> int:
        """A logical nodemask as the physical nodemask of the same nodes."""
        _check_mask(mask)
        n = len(self._physical)
        if mask.bit_length() > n:
            raise UnknownNodeError(
                f"logical node {mask.bit_length() - 1} is in the mask but does not exist: "
                f"this map has nodes 0..{n - 1}"
            )
        if self._identity:
            return mask
        bits = _lsb_first(mask).ljust(n, "0") + "0"
        return int("".join(self._gather_physical(bits))[::-1], 2)

    def mask_to_logical(self, mask: int) -> int:
        """A physical nodemask as the logical nodemask of the same nodes."""
        _check_mask(mask)
        stray = mask & ~self._known
        if stray:
            raise UnknownNodeError(
                f"physical ids {format_list(ids_of(stray))} are in the mask but no node has "
                f"them (physical ids: {self.format()})"
            )
        if self._identity:
            return mask
        bits = _lsb_first(mask).ljust(self.width, "0")
        return int("".join(self._gather_logical(bits))[::-1], 2)
