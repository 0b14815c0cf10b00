"""The one server model with its free state (docs/rules.md#servers): numbering, taking by id and by count, and the
place stages and the runtime that hold their servers as it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hetsched
from hetsched.model.cluster import ClusterSpec, Server
from hetsched.model.servers import Servers
from hetsched.place.gpus import Placer

ROOT = Path(hetsched.__file__).parent
CLUSTER = ClusterSpec.load("2x4/24/500@v100+1x2/12/250@k80+1x4/24/500@v100")


def test_servers_follow_the_cluster_numbering_per_type():
    v100, k80 = Servers.of(CLUSTER, "v100"), Servers.of(CLUSTER, "k80")
    assert v100.ids == ((0, 1, 2, 3), (4, 5, 6, 7), (10, 11, 12, 13)) and k80.ids == ((8, 9),)
    assert Servers.of(CLUSTER).ids == CLUSTER.gpu_ids()
    assert (v100.cap_g, v100.cap_c, v100.cap_m) == ([4, 4, 4], [24.0] * 3, [500.0] * 3)
    plain = Servers.of(ClusterSpec.parse("2:0:1"))          # no shapes: one single-GPU server per GPU
    assert plain.ids == ((0,), (1,), (2,)) and plain.cap_c == [None] * 3 and plain.fc == [None] * 3


def test_taking_by_id_moves_ids_and_counts_and_reset_frees_all():
    s = Servers.of(CLUSTER, "v100")
    assert s.holds((5, 6)) and not s.spread((5, 6)) and s.spread((3, 4))
    s.take((5, 6))
    assert not s.holds((4, 5)) and s.fg == [4, 2, 4] and s.free == 10
    assert s.take_lowest(1, 2) == (4, 7) and s.fg[1] == 0
    with pytest.raises(ValueError, match="server 1 has 0 free GPUs"):
        s.take_lowest(1, 1)
    s.reset()
    assert s.fg == [4, 4, 4] and s.free == 12 and s.holds((4, 5, 6, 7))


def test_taking_by_count_hands_out_each_servers_lowest_ids_once():
    s = Servers.of(CLUSTER, "v100")
    s.commit_counts(((0, 3), (2, 1)))
    s.commit_counts(((0, 1),))
    assert s.fg == [0, 4, 3] and s.free == 7
    assert s.hand_out(((0, 3), (2, 1))) == (0, 1, 2, 10) and s.hand_out(((0, 1),)) == (3,)
    with pytest.raises(ValueError, match="handed out on server 0"):
        s.hand_out(((0, 1),))
    s.start_hand_out()
    assert s.hand_out(((0, 2),)) == (0, 1)
    assert s.free_ids == {11, 12, 13} | {4, 5, 6, 7}        # by id, a GPU taken by count is its server's lowest
    with pytest.raises(ValueError, match="by count after GPUs taken by id"):
        s.commit_counts(((1, 1),))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.booleans()), min_size=1, max_size=8), st.randoms())
def test_gavel_placement_on_the_servers_is_disjoint_and_extends_whole_leases(jobs, rnd):
    """Placer: each job gets as many GPUs of its type as it asks for, no GPU twice; a job whose last GPUs are
    still free keeps them (the first such job in its size order), placed on one server when one holds it."""
    placer, pool = Placer(CLUSTER, ("v100", "k80")), Servers.of(CLUSTER, "v100")
    chosen, want = [], 0
    for entry, (scale, has_last) in enumerate(jobs):
        if want + scale > 12:
            break
        last = (0, tuple(rnd.sample(sorted(pool.free_ids), scale))) if has_last else None
        chosen.append((entry, 0, scale, last))
        want += scale
    got = {e: (gpus, extended, spread) for e, w, gpus, extended, spread in placer.place(list(chosen))}
    used = [g for gpus, _, _ in got.values() for g in gpus]
    assert len(used) == len(set(used)) == want and set(used) <= set(sum(pool.ids, ()))
    for entry, _, scale, last in chosen:
        gpus, extended, spread = got[entry]
        assert len(gpus) == scale and spread == pool.spread(gpus)
        assert extended == (last is not None and gpus == last[1])
    with_last = sorted((c for c in chosen if c[3] is not None), key=lambda c: -c[2])
    if with_last:                                     # the first in size order finds its last GPUs free
        assert got[with_last[0][0]][1]


def test_every_place_stage_and_the_runtime_hold_their_servers_as_the_one_model():
    users = ["place/gpus.py", "place/pool.py", "decide/elastic/cluster.py", "decide/elastic/rounds.py",
             "runtime/local_gpus.py", "runtime/worker_calls.py"]
    base = {"runtime": ROOT.parent / "runtime"}
    missing = []
    for rel in users:
        folder, _, name = rel.partition("/")
        path = base.get(folder, ROOT / folder) / name
        tree = ast.parse(path.read_text())
        if not any(isinstance(n, ast.ImportFrom) and n.module == "hetsched.model.servers" for n in ast.walk(tree)):
            missing.append(rel)
    assert not missing, missing


def test_a_server_needs_one_id_per_gpu():
    with pytest.raises(ValueError, match="one GPU id per GPU"):
        Servers([Server("v100", 2)], [(0,)])
