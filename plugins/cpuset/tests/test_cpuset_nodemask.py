"""Node lists, hex masks and the logical/physical node map (seed 002, sections 4 and 5)."""

from __future__ import annotations

import random

import pytest

from pbsplug_cpuset.nodemask import (
    ID_LIMIT,
    NodeMap,
    UnknownNodeError,
    decode_bits,
    decode_mask,
    encode_bits,
    encode_mask,
    format_list,
    ids_of,
    mask_of,
    parse_list,
    parse_ordered_list,
)

WIDTHS = [8, 256, 4096]


def random_ids(rng: random.Random, width: int) -> list[int]:
    """A sorted random subset of 0..width-1, sometimes empty or full, always with some runs."""
    kind = rng.choice(["empty", "full", "sparse", "dense"])
    if kind == "empty":
        return []
    if kind == "full":
        return list(range(width))
    share = 0.1 if kind == "sparse" else 0.7
    return [i for i in range(width) if rng.random() < share]


def scrambled_map(rng: random.Random, n: int) -> NodeMap:
    """A map like the seed's: physical id usually the node number, but with gaps and swaps."""
    physical = list(range(n))
    for i in range(0, n - 1, 7):  # swap some neighbours
        physical[i], physical[i + 1] = physical[i + 1], physical[i]
    for i in range(n - 1, n // 2, -1):  # and push the top half past a gap
        physical[i] += 3
    quarter = n // 4
    physical[:quarter] = rng.sample(physical[:quarter], quarter)  # and scramble the first quarter
    return NodeMap(physical)


# -- parse_list / parse_ordered_list ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("", []),
        ("\n", []),
        ("0", [0]),
        ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]),
        ("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]),
        (" 0-3 , 8 ,\t10-11 ", [0, 1, 2, 3, 8, 10, 11]),
        ("5-5", [5]),
        ("8,0-3,2", [0, 1, 2, 3, 8]),  # unsorted and overlapping: sorted, unique
        ("4095", [4095]),
    ],
)
def test_parse_list(text: str, ids: list[int]) -> None:
    assert parse_list(text) == ids


@pytest.mark.parametrize(
    "text", ["3-1", "a", "-1", "1,,2", ",", "1,", "1-", "0x3", "1 2", "1-2-3", "+1", "1_0", "٣"]
)
def test_parse_list_rejects_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match="is not a list of ids") as err:
        parse_list(text)
    assert repr(text) in str(err.value)


def test_parse_list_backwards_range_says_how_to_write_it() -> None:
    with pytest.raises(ValueError, match="runs backwards.*write 1-3"):
        parse_list("3-1")


def test_parse_list_refuses_absurd_ids_instead_of_building_them() -> None:
    with pytest.raises(ValueError, match="4294967295 is beyond the largest supported"):
        parse_list("0-4294967295")
    assert parse_list(f"{ID_LIMIT - 1}") == [ID_LIMIT - 1]


def test_parse_ordered_list_keeps_written_order_and_repeats() -> None:
    assert parse_ordered_list("0-2,9,5-6") == [0, 1, 2, 9, 5, 6]
    assert parse_ordered_list("1,1") == [1, 1]
    assert parse_ordered_list(" \n") == []
    assert parse_ordered_list("0-61,64-65,62-63")[60:] == [60, 61, 64, 65, 62, 63]


@pytest.mark.parametrize("text", ["3-1", "a", "-1", "1,,2"])
def test_parse_ordered_list_errors_like_parse_list(text: str) -> None:
    with pytest.raises(ValueError, match="is not a list of ids"):
        parse_ordered_list(text)


# -- format_list ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "text"),
    [
        ([], ""),
        ([0], "0"),
        ([0, 1], "0-1"),
        ([0, 1, 2, 3, 8], "0-3,8"),
        ([8, 3, 2, 1, 0, 3], "0-3,8"),
        ([0, 2, 4], "0,2,4"),
        (range(10, 20), "10-19"),
        ((i for i in [7, 5, 6]), "5-7"),
    ],
)
def test_format_list(ids, text: str) -> None:
    assert format_list(ids) == text


def test_format_list_rejects_negative_ids() -> None:
    with pytest.raises(ValueError, match="id -1 is negative"):
        format_list([3, -1])


@pytest.mark.parametrize("width", WIDTHS)
def test_format_list_and_parse_list_round_trip(width: int) -> None:
    rng = random.Random(width)
    for _ in range(20):
        ids = random_ids(rng, width)
        text = format_list(ids)
        assert parse_list(text) == ids
        assert format_list(parse_list(text)) == text


# -- mask_of / ids_of -------------------------------------------------------------------------


def test_mask_of_and_ids_of() -> None:
    assert mask_of([]) == 0
    assert mask_of([0]) == 1
    assert mask_of([0, 1, 3]) == 0b1011
    assert mask_of([3, 3, 0]) == 0b1001
    assert mask_of(iter([4095])) == 1 << 4095
    assert mask_of({2, 5}) == 0b100100
    assert ids_of(0) == []
    assert ids_of(0b1011) == [0, 1, 3]
    assert ids_of(1 << 4095) == [4095]
    assert ids_of((1 << 4096) - 1) == list(range(4096))


def test_mask_of_errors() -> None:
    with pytest.raises(ValueError, match="id -2 is negative"):
        mask_of([1, -2])
    with pytest.raises(ValueError, match=f"id {ID_LIMIT} is beyond"):
        mask_of([ID_LIMIT])


def test_ids_of_rejects_a_negative_mask() -> None:
    with pytest.raises(ValueError, match="mask -1 is negative"):
        ids_of(-1)


@pytest.mark.parametrize("width", WIDTHS)
def test_mask_of_and_ids_of_round_trip(width: int) -> None:
    rng = random.Random(width + 1)
    for _ in range(20):
        ids = random_ids(rng, width)
        assert ids_of(mask_of(ids)) == ids
        assert mask_of(ids) == sum(1 << i for i in ids)


# -- encode_mask / decode_mask ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "width", "text"),
    [
        ({0, 1}, 8, "03"),
        ([], 8, "00"),
        (range(8), 8, "ff"),
        ([7], 8, "80"),
        ([0], 1, "1"),
        ([4], 5, "10"),  # ceil(5 / 4) = 2 digits
        ([10, 11], 12, "c00"),
        ([0], 256, "0" * 63 + "1"),
        ([255], 256, "8" + "0" * 63),
        (range(4096), 4096, "f" * 1024),
    ],
)
def test_encode_mask(ids, width: int, text: str) -> None:
    assert encode_mask(ids, width) == text
    assert decode_mask(text, width) == sorted(set(ids))


def test_encode_mask_errors() -> None:
    with pytest.raises(ValueError, match="id 8 does not fit a 8-bit mask"):
        encode_mask([0, 8], 8)
    with pytest.raises(ValueError, match="id -1 is negative"):
        encode_mask([-1], 8)
    with pytest.raises(ValueError, match="width 0 must be at least 1"):
        encode_mask([], 0)


def test_encode_bits() -> None:
    assert encode_bits(0b11, 8) == "03"
    assert encode_bits(0, 256) == "0" * 64
    with pytest.raises(ValueError, match="mask -3 is negative"):
        encode_bits(-3, 8)
    with pytest.raises(ValueError, match="id 8 does not fit"):
        encode_bits(1 << 8, 8)


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("03", [0, 1]),
        ("0x03", [0, 1]),
        ("0X3", [0, 1]),
        ("FF", list(range(8))),
        ("ff\n", list(range(8))),
        ("0", []),
        ("00000000,0000000f", [0, 1, 2, 3]),  # cpumask words
        ("1,00000000", [32]),
        ("ff,ffffffff", list(range(40))),  # a 40-CPU machine's cpumap
        ("0x80000000,00000000", [63]),
    ],
)
def test_decode_mask(text: str, ids: list[int]) -> None:
    assert decode_mask(text) == ids
    assert decode_bits(text) == mask_of(ids)


@pytest.mark.parametrize(
    "text", ["", "0x", "xyz", "0x-1", "-1", "+1", "1_0", "0 1", "1,1", ",00000000", "1,", "g"]
)
def test_decode_mask_rejects_non_hex(text: str) -> None:
    with pytest.raises(ValueError, match="is not a hex mask") as err:
        decode_mask(text)
    assert repr(text) in str(err.value)


def test_decode_mask_refuses_bits_beyond_the_width() -> None:
    assert decode_mask("0f", 4) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="'1f' sets bit 4, beyond its width of 4 bits"):
        decode_mask("1f", 4)
    with pytest.raises(ValueError, match="width 0"):
        decode_bits("0", 0)


@pytest.mark.parametrize("width", WIDTHS)
def test_encode_and_decode_round_trip(width: int) -> None:
    rng = random.Random(width + 2)
    for _ in range(20):
        ids = random_ids(rng, width)
        text = encode_mask(ids, width)
        assert len(text) == (width + 3) // 4
        assert text == text.lower()
        assert decode_mask(text, width) == ids
        assert decode_mask("0x" + text.upper(), width) == ids
        assert encode_mask(decode_mask(text, width), width) == text
        if width % 32 == 0:  # the same bits as the kernel prints a cpumask
            words = ",".join(text[i : i + 8] for i in range(0, len(text), 8))
            assert decode_mask(words, width) == ids


# -- NodeMap ---------------------------------------------------------------------------------


def test_identity_map() -> None:
    nodes = NodeMap.identity(4)
    assert len(nodes) == 4
    assert nodes.width == 4
    assert nodes.physical == (0, 1, 2, 3)
    assert [nodes.physical_of(i) for i in range(4)] == [0, 1, 2, 3]
    assert [nodes.logical_of(i) for i in range(4)] == [0, 1, 2, 3]
    assert nodes.mask_to_physical(0b1010) == 0b1010
    assert nodes.mask_to_logical(0b1010) == 0b1010
    assert nodes == NodeMap([0, 1, 2, 3])
    assert nodes.format() == "0-3"


def test_parse_keeps_the_written_order() -> None:
    nodes = NodeMap.parse("0-61,64-65,62-63")
    assert len(nodes) == 66
    assert nodes.width == 66
    assert nodes.physical_of(61) == 61
    assert nodes.physical_of(62) == 64
    assert nodes.physical_of(65) == 63
    assert nodes.logical_of(64) == 62
    assert nodes.logical_of(62) == 64
    assert nodes.format() == "0-61,64-65,62-63"
    assert NodeMap.parse(nodes.format()) == nodes
    assert repr(nodes) == "NodeMap.parse('0-61,64-65,62-63')"
    assert hash(nodes) == hash(NodeMap.parse("0-61,64-65,62-63"))
    assert nodes != NodeMap.identity(66)


def test_map_with_gaps() -> None:
    nodes = NodeMap([0, 2, 8, 3])
    assert nodes.width == 9
    assert len(nodes) == 4
    assert nodes.to_physical([1, 2]) == [2, 8]
    assert nodes.to_physical([3, 0, 3]) == [0, 3]
    assert nodes.to_logical([8, 3]) == [2, 3]
    assert nodes.to_logical([]) == []
    assert nodes.mask_to_physical(0b0110) == (1 << 2) | (1 << 8)
    assert nodes.mask_to_logical((1 << 8) | 1) == 0b0101
    assert nodes.mask_to_physical(0) == 0
    assert nodes.mask_to_logical(0) == 0


@pytest.mark.parametrize(
    ("physical", "message"),
    [
        ([0, 1, 1], "physical id 1 is given to both logical node 1 and 2"),
        ([0, -3], r"physical id -3 \(logical node 1\) is negative"),
        ([], "at least one node"),
        (range(0), "at least one node"),
    ],
)
def test_map_constructor_errors(physical, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NodeMap(physical)


def test_map_constructor_wants_ids_not_a_string() -> None:
    with pytest.raises(TypeError, match="NodeMap.parse"):
        NodeMap("0-3")  # type: ignore[arg-type]


def test_map_parse_errors() -> None:
    with pytest.raises(ValueError, match="is not a list of ids"):
        NodeMap.parse("0-3,x")
    with pytest.raises(ValueError, match="physical id 2 is given to both"):
        NodeMap.parse("0-3,2")


def test_unknown_nodes_are_both_key_and_value_errors_with_a_plain_message() -> None:
    nodes = NodeMap([0, 2])
    for call in (
        lambda: nodes.physical_of(2),
        lambda: nodes.physical_of(-1),
        lambda: nodes.logical_of(1),
        lambda: nodes.to_physical([5]),
        lambda: nodes.to_logical([1]),
    ):
        with pytest.raises(KeyError):
            call()
        with pytest.raises(ValueError):
            call()
    with pytest.raises(UnknownNodeError) as err:
        nodes.physical_of(2)
    assert str(err.value) == "logical node 2 does not exist: this map has nodes 0..1"
    with pytest.raises(UnknownNodeError) as err:
        nodes.logical_of(1)
    assert str(err.value) == "no node has physical id 1 (physical ids: 0,2)"


def test_mask_translation_errors() -> None:
    nodes = NodeMap([0, 2, 8])
    with pytest.raises(UnknownNodeError, match="logical node 3 is in the mask but does not"):
        nodes.mask_to_physical(0b1001)
    with pytest.raises(UnknownNodeError, match="physical ids 1,3-4 are in the mask but no"):
        nodes.mask_to_logical(0b11011)
    with pytest.raises(UnknownNodeError, match="physical ids 9 are in the mask"):
        nodes.mask_to_logical(1 << 9)
    with pytest.raises(ValueError, match="mask -1 is negative"):
        nodes.mask_to_physical(-1)
    with pytest.raises(ValueError, match="mask -1 is negative"):
        nodes.mask_to_logical(-1)
    identity = NodeMap.identity(4)  # the fast path checks too
    with pytest.raises(UnknownNodeError, match="logical node 4"):
        identity.mask_to_physical(1 << 4)
    with pytest.raises(UnknownNodeError, match="physical ids 4"):
        identity.mask_to_logical(1 << 4)
    with pytest.raises(ValueError, match="mask -2 is negative"):
        identity.mask_to_physical(-2)


def test_single_node_map() -> None:
    nodes = NodeMap([3])
    assert nodes.width == 4
    assert nodes.mask_to_physical(1) == 1 << 3
    assert nodes.mask_to_logical(1 << 3) == 1


@pytest.mark.parametrize("width", WIDTHS)
def test_logical_physical_round_trips(width: int) -> None:
    rng = random.Random(width + 3)
    nodes = scrambled_map(rng, width)
    assert len(nodes) == width
    assert nodes.width > width  # the gap pushed ids past n
    assert nodes.physical != tuple(range(width))
    for logical in range(width):
        assert nodes.logical_of(nodes.physical_of(logical)) == logical
    for _ in range(20):
        logical_ids = random_ids(rng, width)
        physical_ids = nodes.to_physical(logical_ids)
        assert physical_ids == sorted(nodes.physical_of(i) for i in logical_ids)
        assert nodes.to_logical(physical_ids) == logical_ids
        mask = mask_of(logical_ids)
        physical_mask = nodes.mask_to_physical(mask)
        assert ids_of(physical_mask) == physical_ids
        assert nodes.mask_to_logical(physical_mask) == mask
        # and through the hex strings MOM and the scheduler exchange
        text = encode_bits(mask, width)
        back = decode_bits(encode_bits(nodes.mask_to_physical(decode_bits(text)), nodes.width))
        assert encode_bits(nodes.mask_to_logical(back), width) == text


def test_seed_octant_check_on_a_256_node_machine() -> None:
    """Section 5: MOM reports free logical nodes as 256-bit hex; the scheduler looks for room
    in the 64-bit physical octants."""
    physical = list(range(256))
    physical[10], physical[70] = 70, 10  # the nasid of node 10 is 70 and of node 70 is 10
    nodes = NodeMap(physical)
    free_logical = [n for n in range(64) if n != 5] + [70]  # all of octant 0 but one
    report = encode_mask(free_logical, 256)
    assert len(report) == 64
    free = nodes.mask_to_physical(decode_bits(report, 256))
    octant = (1 << 64) - 1
    # logical 10 is physical 70 (octant 1); logical 70 is physical 10 (octant 0)
    assert ids_of(free & octant) == [n for n in range(64) if n != 5]
    assert ids_of((free >> 64) & octant) == [70 - 64]
    assert nodes.to_logical(ids_of(free & octant)) == sorted(
        [n for n in range(64) if n not in (5, 10)] + [70]
    )
