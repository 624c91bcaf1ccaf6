"""Pure logic of Kubernetes object edits used by the primitives."""

from injectors.container_args import has_flags, with_flags
from injectors.image_tag import retag
from injectors.rbac_revoke import revoke
from injectors.resource_limits import throttled_periods
from injectors.dns_failure import qname_hex
from sregym.injectors._objects import (
    ABSENT,
    RESTART_ANNOTATION,
    _pointer,
    dig,
    edit,
    restart_edits,
    restart_undo_value,
    undo_order,
)
from sregym.injectors._observe import terminated_reasons, unschedulable, waiting_reasons


def test_dig_finds_values_and_marks_missing_ones_absent():
    obj = {"spec": {"containers": [{"env": [{"name": "A"}]}]}}
    assert dig(obj, ["spec", "containers", 0, "env"]) == [{"name": "A"}]
    assert dig(obj, ["spec", "containers", 1]) == ABSENT
    assert dig(obj, ["spec", "nodeSelector"]) == ABSENT


def test_json_pointer_escapes_slashes_in_annotation_keys():
    assert _pointer(["metadata", "annotations", "a/b~c"]) == "/metadata/annotations/a~1b~0c"


def test_restart_keeps_other_template_annotations_and_undo_restarts_once_more():
    wl = {"kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
          "spec": {"template": {"metadata": {"annotations": {"keep": "1"}}}}}
    (e,) = restart_edits(wl)
    assert e["before"] == {"keep": "1"} and e["after"]["keep"] == "1" and RESTART_ANNOTATION in e["after"]
    # undo is a fresh restart (a new template, never the old ReplicaSet), the same one each time
    undone = restart_undo_value(e)
    assert undone["keep"] == "1" and undone != e["before"] and undone != e["after"]
    assert restart_undo_value(e) == undone
    (bare,) = restart_edits({**wl, "spec": {"template": {"metadata": {}}}})
    assert set(restart_undo_value(bare)) == {RESTART_ANNOTATION}


def test_two_faults_rolling_one_workload_in_the_same_second_each_roll_it_on_inject_and_on_recover():
    """Two config_value faults on one workload (a retry storm's timeout and retries) plan and inject
    within a second. With stamps to the second, the second restart was the first one again (no
    rollout: pods that read only the first bad value kept running) and on recover the first fault's
    undo set what the second's had just set (no rollout: pods that read the other key still bad
    kept it; seen live, hotel_retry_storm_after_search_stall, search ran CALL_TIMEOUT_SECONDS=0.2
    for the whole window after recovery)."""
    wl = {"kind": "Deployment", "metadata": {"name": "search", "namespace": "n"},
          "spec": {"template": {"metadata": {}}}}
    (first,) = restart_edits(wl)
    rolled = {**wl, "spec": {"template": {"metadata": {"annotations": first["after"]}}}}
    (second,) = restart_edits(rolled)
    assert second["after"] != first["after"], "the second inject must roll the pods again"
    # recover: faults in reverse order, each undo must change the template the one before left
    assert restart_undo_value(second) != first["after"]
    assert restart_undo_value(first) != restart_undo_value(second), "the last undo must roll the pods again"
    # and never back onto a template an inject made: that ReplicaSet may still hold its pods (the
    # rollout of the undo before is under way) with the bad values (seen live: db_stall seed 0, a
    # frontend pod ran CALL_RETRIES=6 and CALL_TIMEOUT_SECONDS=0.2 for the whole window after recovery)
    made = {e["after"][RESTART_ANNOTATION] for e in (first, second)}
    assert not made & {restart_undo_value(e)[RESTART_ANNOTATION] for e in (first, second)}


def test_undo_restores_settings_before_it_rolls_the_pods_that_read_them():
    wl = {"kind": "Deployment", "metadata": {"name": "rate", "namespace": "n"}, "spec": {"template": {"metadata": {}}}}
    setting = edit("ConfigMap", "n", "settings", ["data", "PORT"], "11211", "11222")
    edits = [setting, *restart_edits(wl), edit("Secret", "n", "s", ["data", "k"], "a", "b")]
    assert [e["kind"] for e in undo_order(edits)] == ["Secret", "ConfigMap", "Deployment"]


def test_retag_replaces_only_the_tag():
    assert retag("registry:5000/team/app:1.2", "9.9") == "registry:5000/team/app:9.9"
    assert retag("app", "x") == "app:x"
    assert retag("app@sha256:abc", "x") == "app:x"


def test_container_flags_replace_a_value_in_place_and_append_missing_flags():
    args = ["redis-server", "--maxmemory", "48mb", "--maxmemory-policy", "allkeys-lru"]
    after = with_flags(args, {"--maxmemory": "1mb", "--appendonly": "no"})
    assert after == ["redis-server", "--maxmemory", "1mb", "--maxmemory-policy", "allkeys-lru", "--appendonly", "no"]
    assert has_flags(after, {"--maxmemory": "1mb"}) and not has_flags(args, {"--maxmemory": "1mb"})
    assert with_flags(["--verbose", "--maxmemory"], {"--maxmemory": "1mb"})[-2:] == ["--maxmemory", "1mb"]


def test_revoke_removes_one_verb_and_drops_empty_rules():
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
             {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    assert revoke(rules, "get", "configmaps", "") == [rules[1]]
    assert revoke(rules, "list", "pods", "")[1]["verbs"] == ["get"]
    star = revoke([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], "get", "pods", "")
    assert "get" not in star[0]["verbs"] and "list" in star[0]["verbs"]


def test_throttling_is_read_from_cpu_stat():
    assert throttled_periods("nr_periods 10\nnr_throttled 4\nthrottled_time 9\n") == 4
    assert throttled_periods("") == 0


def test_dns_names_are_matched_in_wire_format():
    assert qname_hex("geo.default") == "|0367656f0764656661756c74|"


def test_pod_states_are_read_from_status():
    pods = [{"metadata": {"name": "p"}, "status": {
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        "containerStatuses": [{"state": {"waiting": {"reason": "ErrImageNeverPull"}},
                               "lastState": {"terminated": {"reason": "OOMKilled"}}}]}}]
    assert unschedulable(pods) == ["p"]
    assert waiting_reasons(pods) == {"ErrImageNeverPull"}
    assert terminated_reasons(pods) == {"OOMKilled"}


def test_credential_commands_change_and_check_the_password_on_the_server():
    from injectors.credential_rotation import auth_check_command, postgres_command, redis_command

    assert redis_command(6379, "old", "new")[-3:] == ["SET", "requirepass", "new"]
    sql = postgres_command(5432, "hotel", "old'pw", "it's")[-1]
    assert sql == "ALTER USER \"hotel\" PASSWORD 'it''s'"
    assert "PGPASSWORD=old'pw" in postgres_command(5432, "hotel", "old'pw", "x")
    assert "ping" in auth_check_command("redis", 6379, "", "pw")[-1]
    assert auth_check_command("postgres", 5432, "u", "pw")[-1] == "select 1"
