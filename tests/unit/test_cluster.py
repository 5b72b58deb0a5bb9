"""Cluster specs, placement shapes and the placement slowdown S(G) (spec qoop-themis.md B.3, B.11).

Expected values come from the papers (testbed P:384, simulator footnote P:386 / T:1186, crude
slowdowns T:1103) or are computed here by hand from the Pollux profiles, never from the code.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from arbiter.cluster import Cluster, ClusterSpecError, load_cluster, parse_cluster, shipped_specs
from arbiter.datasets import data_root
from arbiter.placement import Locality, LocalityModel, ProfileModel, placement_of

DATA = data_root()
PROFILES = DATA / "pollux" / "profiles"

GPU_ID = re.compile(r"^(?P<machine>[^/]+)/s(?P<slot>\d+)/g(?P<k>\d+)$")


@pytest.fixture(scope="module")
def testbed() -> Cluster:
    return load_cluster("themis-testbed")


@pytest.fixture(scope="module")
def sim256() -> Cluster:
    return load_cluster("themis-sim-256")


def machine_sizes(cluster: Cluster) -> Counter[int]:
    """How many machines of each GPU count the cluster has."""
    return Counter(m.num_gpus for m in cluster.machines)


# --- Shipped specs -------------------------------------------------------------------------


def test_shipped_spec_names() -> None:
    """B.11 / D.25: the testbed and both readings of the simulator cluster are shipped."""
    assert {"themis-testbed", "themis-sim-168", "themis-sim-256"} <= set(shipped_specs())


def test_testbed_has_64_gpus_on_20_machines(testbed: Cluster) -> None:
    """P:384 / T:1176: 64 GPUs on 20 Azure machines, 8 x NC12 (2 K80) + 12 x NC24 (4 K80)."""
    assert testbed.num_gpus == 64
    assert len(testbed.machines) == 20
    assert machine_sizes(testbed) == Counter({2: 8, 4: 12})
    assert {g.gpu_type for g in testbed.gpus} == {"k80"}


def test_sim_168_is_the_footnote_cluster() -> None:
    """P:386 / T:1186 footnote: 16 x 8-GPU + 6 x 4-GPU + 16 x 1-GPU machines = 168 GPUs."""
    cluster = load_cluster("themis-sim-168")
    assert cluster.num_gpus == 168
    assert machine_sizes(cluster) == Counter({8: 16, 4: 6, 1: 16})


def test_sim_256_reaches_the_stated_total(sim256: Cluster) -> None:
    """D.25: the body's '256-GPU' cluster, read as 16 x 8 + 28 x 4 + 16 x 1 = 256 GPUs."""
    assert sim256.num_gpus == 256
    assert machine_sizes(sim256) == Counter({8: 16, 4: 28, 1: 16})


@pytest.mark.parametrize("name", ["themis-testbed", "themis-sim-168", "themis-sim-256"])
def test_gpu_ids_are_stable_and_unique(name: str) -> None:
    """Stable ids '<machine>/s<slot>/g<k>' name the same GPU across restarts; no duplicates."""
    first, second = load_cluster(name), load_cluster(name)
    ids = [g.id for g in first.gpus]
    assert len(ids) == len(set(ids)) == first.num_gpus
    assert ids == [g.id for g in second.gpus]
    for g in first.gpus:
        match = GPU_ID.match(g.id)
        assert match, g.id
        assert match["machine"] == g.machine
        assert g.slot == f"{g.machine}/s{match['slot']}"
        assert g.id in first
        assert first.gpu(g.id) == g


# --- Loading YAML ----------------------------------------------------------------------------

GOOD_YAML = """\
name: tiny
racks:
  - name: rack-a
    machines:
      - {prefix: small, count: 2, slots: 1, gpus_per_slot: 2, gpu_type: k80}
      - {name: big, slots: 4, gpus_per_slot: 2, gpu_type: v100}
  - name: rack-b
    machines:
      - {name: solo, gpus_per_slot: 1}
"""


def test_load_cluster_from_yaml_file(tmp_path: Path) -> None:
    """Module docstring: 'prefix'+'count' expands to <prefix>-00, -01; 'name' is one machine."""
    path = tmp_path / "tiny.yaml"
    path.write_text(GOOD_YAML)
    cluster = load_cluster(path)
    assert cluster.name == "tiny"
    assert [m.name for m in cluster.machines] == ["small-00", "small-01", "big", "solo"]
    assert cluster.num_gpus == 2 + 2 + 8 + 1
    assert cluster.racks == ("rack-a", "rack-b")
    assert cluster.gpu("big/s3/g1").gpu_type == "v100"
    assert cluster.gpu("solo/s0/g0").rack == "rack-b"
    assert cluster.unknown(["big/s4/g0", "solo/s0/g0"]) == ["big/s4/g0"]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("racks: [{name: r, machines: [{name: m, gpus_per_slot: 1}]}]", "name"),
        ("name: c\nracks: [{name: r, machines: [{name: m, gpus_per_slot: 0}]}]", "gpus_per_slot"),
        (
            "name: c\nracks: [{name: r, machines: [{name: m, slots: -1, gpus_per_slot: 1}]}]",
            "slots",
        ),
        ("name: c\nracks: [{name: r, machines: [{name: m, gpuz: 4, gpus_per_slot: 1}]}]", "gpuz"),
        (
            "name: c\nracks: [{name: r, machines: [{name: m, gpus_per_slot: 1},"
            " {name: m, gpus_per_slot: 2}]}]",
            "'m'",
        ),
        ("name: c\nracks: [{name: r, machines: [{prefix: p, gpus_per_slot: 1}]}]", "count"),
        ("name: c\nracks: []", "racks"),
        ("name: c\nracks: [{name: r, machines: []}]", "machines"),
    ],
)
def test_malformed_spec_names_the_key(tmp_path: Path, text: str, key: str) -> None:
    """ClusterSpecError's message names the offending key (cluster.py contract)."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ClusterSpecError, match=re.escape(key)):
        load_cluster(path)


MACHINE = {"name": "m", "gpus_per_slot": 2}


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        (
            {"name": "c", "gpu_typ": "v100", "racks": [{"name": "r", "machines": [MACHINE]}]},
            "gpu_typ",
        ),
        (
            {"name": "c", "racks": [{"name": "r", "machine": [], "machines": [MACHINE]}]},
            "'machine'",
        ),
    ],
    ids=["top-level", "rack-level"],
)
def test_unknown_keys_rejected_at_every_level(doc: dict, key: str) -> None:
    """Unknown keys raise at machine level (above), so a typo one level up must raise too: a
    misspelt top-level 'gpu_type' otherwise silently types every GPU 'gpu' (changing shapes)."""
    with pytest.raises(ClusterSpecError, match=key):
        parse_cluster(doc)


def test_bad_yaml_is_a_spec_error(tmp_path: Path) -> None:
    """Invalid YAML surfaces as ClusterSpecError, not a raw parser exception."""
    path = tmp_path / "broken.yaml"
    path.write_text("name: c\nracks: [ {name: r\n")
    with pytest.raises(ClusterSpecError, match="YAML"):
        load_cluster(path)


def test_unknown_spec_name() -> None:
    """A name that is neither a file nor a shipped spec is an error naming it."""
    with pytest.raises(ClusterSpecError, match="no-such-cluster"):
        load_cluster("no-such-cluster")


# --- Placement shapes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "locality", "per_machine"),
    [
        (["nc24-a-00/s0/g0", "nc24-a-00/s0/g1"], Locality.SLOT, (2,)),
        (["nc24-a-00/s0/g0", "nc24-a-00/s1/g0"], Locality.MACHINE, (2,)),
        (["nc24-a-00/s0/g0", "nc12-a-00/s0/g0"], Locality.CROSS_MACHINE, (1, 1)),
        (["nc12-a-00/s0/g0", "nc12-b-00/s0/g0"], Locality.CROSS_RACK, (1, 1)),
        (
            ["nc24-a-01/s0/g0", "nc24-a-01/s0/g1", "nc24-a-01/s1/g0", "nc12-a-02/s0/g1"],
            Locality.CROSS_MACHINE,
            (3, 1),
        ),
        ([], Locality.NONE, ()),
    ],
)
def test_placement_locality(
    testbed: Cluster, ids: list[str], locality: Locality, per_machine: tuple[int, ...]
) -> None:
    """B.11: the 4-level hierarchy GPU -> slot -> machine -> rack; the widest level spanned."""
    placement = placement_of(testbed, ids)
    assert placement.locality is locality
    assert placement.per_machine == per_machine
    assert placement.num_gpus == len(ids)


def test_equivalent_sets_have_the_same_shape(testbed: Cluster) -> None:
    """B.4 [ASSUMPTION]: sets with the same per-slot/machine/rack counts are equivalent."""
    a = placement_of(testbed, ["nc24-a-00/s0/g0", "nc24-a-00/s0/g1", "nc24-a-03/s1/g0"])
    b = placement_of(testbed, ["nc24-a-05/s1/g1", "nc24-a-05/s1/g0", "nc12-a-01/s0/g0"])
    c = placement_of(testbed, ["nc24-a-00/s0/g0", "nc24-a-00/s1/g1", "nc24-a-03/s1/g0"])
    assert a == b
    assert a != c  # (2) + (1) is not (1, 1) + (1): slot counts differ


def test_placement_of_unknown_gpu(testbed: Cluster) -> None:
    """A GPU id outside the cluster is rejected."""
    with pytest.raises(KeyError):
        placement_of(testbed, ["nope/s0/g0"])


# --- Locality model (T:1103) ------------------------------------------------------------------


def test_locality_model_defaults(testbed: Cluster) -> None:
    """T:1103: single machine = 1, cross-machine = 1.1, cross-rack = 1.3 (slot level = 1, B.11)."""
    model = LocalityModel()
    cases = {
        ("nc24-a-00/s0/g0", "nc24-a-00/s0/g1"): 1.0,
        ("nc24-a-00/s0/g0", "nc24-a-00/s1/g0"): 1.0,
        ("nc24-a-00/s0/g0", "nc12-a-00/s0/g0"): 1.1,
        ("nc12-a-00/s0/g0", "nc12-b-00/s0/g0"): 1.3,
        (): 1.0,
    }
    for ids, expected in cases.items():
        assert model.slowdown(placement_of(testbed, ids)) == pytest.approx(expected), ids


@pytest.mark.parametrize(
    "kwargs",
    [
        {"slot": 0.9},
        {"machine": 0.0},
        {"cross_machine": 0.99},
        {"cross_rack": -1.3},
        {"cross_rack": math.nan},
    ],
)
def test_locality_model_rejects_speedups(kwargs: dict) -> None:
    """B.3: S(G) >= 1 is a slowdown; values below 1 or NaN are errors."""
    with pytest.raises(ValueError):
        LocalityModel(**kwargs)


# --- Profile model (Pollux placements.csv) -------------------------------------------------


def read_profile(model: str) -> tuple[int, dict[tuple[int, ...], float]]:
    """Reference local_bsz (most placements measured, ties -> largest) and its step times."""
    by_bsz: dict[int, dict[str, float]] = defaultdict(dict)
    with open(PROFILES / model / "placements.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            by_bsz[int(row["local_bsz"])][row["placement"]] = float(row["step_time"])
    bsz = max(by_bsz, key=lambda b: (len(by_bsz[b]), b))
    return bsz, {tuple(int(c) for c in p): t for p, t in by_bsz[bsz].items()}


def test_data_dir_is_present() -> None:
    """The shared Pollux profiles must exist; a missing data dir fails loudly, never skips."""
    for model in ("bert", "cifar10"):
        assert (PROFILES / model / "placements.csv").is_file(), PROFILES / model


@pytest.mark.parametrize("model", ["bert", "cifar10"])
def test_profile_spread_pair_slowdown(sim256: Cluster, model: str) -> None:
    """S(G) = step_time('11') / step_time('2') at the reference batch size, never below 1."""
    bsz, steps = read_profile(model)
    expected = max(1.0, steps[(1, 1)] / steps[(2,)])
    profile = ProfileModel.from_pollux_csv(PROFILES / model / "placements.csv")
    spread = placement_of(sim256, ["m4-a-00/s0/g0", "m4-a-01/s0/g0"])
    dense = placement_of(sim256, ["m4-a-00/s0/g0", "m4-a-00/s1/g0"])
    assert spread.locality is Locality.CROSS_MACHINE
    assert profile.slowdown(spread) == pytest.approx(expected)
    assert profile.slowdown(dense) == pytest.approx(1.0)
    explicit = ProfileModel.from_pollux_csv(PROFILES / model / "placements.csv", local_bsz=bsz)
    assert explicit.slowdown(spread) == pytest.approx(expected)


def test_profile_bert_is_placement_sensitive(sim256: Cluster) -> None:
    """bert (bsz 12): '11' takes 1.48 s against 0.92 s for '2', so S is clearly above 1.1."""
    bsz, _ = read_profile("bert")
    assert bsz == 12
    profile = ProfileModel.from_pollux_csv(PROFILES / "bert" / "placements.csv")
    spread = placement_of(sim256, ["m4-a-00/s0/g0", "m4-a-01/s0/g0"])
    assert profile.slowdown(spread) == pytest.approx(1.4814671874046326 / 0.9190408140420914)
    assert profile.slowdown(spread) > 1.5


def test_profile_cifar10_spread_is_clamped_to_one(sim256: Cluster) -> None:
    """cifar10 (bsz 725): '11' measured faster than '2'; S >= 1 so the slowdown is exactly 1."""
    bsz, steps = read_profile("cifar10")
    assert bsz == 725
    assert steps[(1, 1)] < steps[(2,)]
    profile = ProfileModel.from_pollux_csv(PROFILES / "cifar10" / "placements.csv")
    spread = placement_of(sim256, ["m4-a-00/s0/g0", "m4-a-01/s0/g0"])
    assert profile.slowdown(spread) == 1.0


def test_profile_three_plus_one(sim256: Cluster) -> None:
    """S for 4 GPUs as 3 + 1 on two machines = step('31' or '13') / step('4')."""
    _, steps = read_profile("bert")
    measured = steps.get((3, 1), steps.get((1, 3)))
    expected = max(1.0, measured / steps[(4,)])
    profile = ProfileModel.from_pollux_csv(PROFILES / "bert" / "placements.csv")
    ids = ["m4-a-00/s0/g0", "m4-a-00/s1/g0", "m4-a-00/s2/g0", "m4-a-01/s0/g0"]
    assert profile.slowdown(placement_of(sim256, ids)) == pytest.approx(expected)


@pytest.mark.parametrize("model", ["bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"])
def test_profile_slowdown_at_least_one(sim256: Cluster, model: str) -> None:
    """B.3: S(G) >= 1 for every measured spread of 1-4 GPUs on up to 4 machines of a rack."""
    profile = ProfileModel.from_pollux_csv(PROFILES / model / "placements.csv")
    machines = [f"m4-a-{k:02d}" for k in range(4)]
    for counts in [(1, 1), (2, 1), (1, 1, 1), (2, 2), (3, 1), (2, 1, 1), (1, 1, 1, 1), (4, 4)]:
        ids = [f"{m}/s{s}/g0" for m, c in zip(machines, counts, strict=False) for s in range(c)]
        assert profile.slowdown(placement_of(sim256, ids)) >= 1.0, counts


def test_profile_cross_rack_penalty(sim256: Cluster) -> None:
    """Profiles know no racks: a cross-rack spread gets the fallback's extra 1.3 / 1.1 factor."""
    _, steps = read_profile("bert")
    profile = ProfileModel.from_pollux_csv(PROFILES / "bert" / "placements.csv")
    across = placement_of(sim256, ["m4-a-00/s0/g0", "m4-b-00/s0/g0"])
    assert across.locality is Locality.CROSS_RACK
    assert profile.slowdown(across) == pytest.approx(steps[(1, 1)] / steps[(2,)] * 1.3 / 1.1)


def test_profile_no_single_node_reference(sim256: Cluster) -> None:
    """placement.py: no 1-node row for 8 GPUs, so '44' is its own reference x cross-machine 1.1."""
    _, steps = read_profile("bert")
    assert (8,) not in steps
    profile = ProfileModel.from_pollux_csv(PROFILES / "bert" / "placements.csv")
    ids = [f"m4-a-0{m}/s{s}/g0" for m in range(2) for s in range(4)]
    assert profile.slowdown(placement_of(sim256, ids)) == pytest.approx(1.1)


def test_profile_unmeasured_placement_falls_back(sim256: Cluster) -> None:
    """T:1103: placements never profiled use the locality model (profiles span <= 4 nodes)."""
    fallback = LocalityModel(cross_machine=1.5, cross_rack=2.0)
    profile = ProfileModel.from_pollux_csv(PROFILES / "bert" / "placements.csv", fallback=fallback)
    five_machines = placement_of(sim256, [f"m4-a-{k:02d}/s0/g0" for k in range(5)])
    assert profile.slowdown(five_machines) == pytest.approx(1.5)
    eight_on_one = placement_of(sim256, [f"m8-a-00/s{s}/g{k}" for s in range(4) for k in range(2)])
    assert profile.slowdown(eight_on_one) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "text",
    [
        "placement,local_bsz\n1,4\n",  # no step_time column
        "placement,local_bsz,step_time\n1,4,fast\n",
        "placement,local_bsz,step_time\n1x,4,0.5\n",
        "placement,local_bsz,step_time\n1,4,0\n",
        "placement,local_bsz,step_time\n1,4,-0.5\n",
        "placement,local_bsz,step_time\n",  # no rows
    ],
)
def test_profile_malformed_csv(tmp_path: Path, text: str) -> None:
    """A malformed placements.csv is a ValueError, not a silently wrong slowdown."""
    path = tmp_path / "placements.csv"
    path.write_text(text)
    with pytest.raises(ValueError):
        ProfileModel.from_pollux_csv(path)


def test_profile_unknown_local_bsz() -> None:
    """Asking for a batch size the profile never measured is an error."""
    with pytest.raises(ValueError, match="local_bsz"):
        ProfileModel.from_pollux_csv(PROFILES / "bert" / "placements.csv", local_bsz=999)
