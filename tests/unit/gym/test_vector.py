"""The vector form: sub-envs in slot namespaces, and problems whose runs would overlap on a node refused."""

from pathlib import Path

import pytest

from sregym.core.errors import UserInputError
from sregym.gym import make_vector
from sregym.gym.vector import slot_namespaces

TESTS = Path(__file__).parents[2] / "integration" / "conductor" / "problems"


def test_sub_envs_take_the_suites_slot_namespaces():
    assert slot_namespaces("hotel", 3) == ["hotel", "hotel-p1", "hotel-p2"]


def test_a_problem_with_a_node_level_fault_is_refused_before_anything_runs():
    # two latent sector error episodes would both hold the node the database runs on
    with pytest.raises(UserInputError) as e:
        make_vector("latent_sector_error", 2, settings={"noise": False})
    assert "latent_sector_error" in str(e.value) and "node" in str(e.value) and "num_envs=1" in str(e.value)


def test_node_level_noise_is_refused_only_with_noise_on():
    # hotel_rate_bad_image_tag: a Kubernetes-object fault; its noise includes node-level types
    with pytest.raises(UserInputError) as e:
        make_vector("hotel_rate_bad_image_tag", 2, settings={"noise": True})
    assert "noise" in str(e.value)
    envs = make_vector("hotel_rate_bad_image_tag", 2, settings={"noise": False}, mode="sync")
    try:
        assert envs.num_envs == 2
        assert [e._namespace for e in envs.envs] == ["hotel-reservation", "hotel-reservation-p1"]
    finally:
        envs.close()


def test_bad_counts_and_unknown_problems_are_clear_errors():
    with pytest.raises(UserInputError, match="num_envs"):
        make_vector("hotel_rate_bad_image_tag", 0)
    with pytest.raises(UserInputError, match="no_such_problem"):
        make_vector("no_such_problem", 2)
