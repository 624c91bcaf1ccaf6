"""`sregym export`: run records as OpenAI tool-calling conversations, and the HF datasets layout."""

import importlib.util
import json
from pathlib import Path

from sregym.cli.main import run_cli
from sregym.core.trajectory import ModelTurn, ToolCall
from sregym.agentplane.chat_export import ProblemFacts, episode, export_episodes, messages, write_hf_dataset

FACTS = ProblemFacts(alert="Users see 502 errors on the search page.", split="train",
                     ground_truth={"root_cause": "geo deployment scaled to zero", "component": "geo"})
# the report tests' record builder (tests/unit/report is not on this folder's path)
_spec = importlib.util.spec_from_file_location("report_records", Path(__file__).parents[1] / "report" / "report_records.py")
_report_records = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_report_records)
make_record, write_records = _report_records.make_record, _report_records.write_records

TRAIN_PROBLEM = "hotel_frontend_scaled_to_zero"  # split: train in problems/


def calls_record(**kw):
    record = make_record(calls=(("kubectl", "get", True, False), ("bogus_tool", None, True, True),
                                ("kubectl", "rollout", False, False)), reward={"diagnosis": 0.5, "mitigation": 0.5},
                         **kw)
    tc = record.trajectory.tool_calls
    tc[0].arguments, tc[0].result_bytes = {"command": ["get", "pods", "-n", "hotel"]}, 1450
    tc[1].error = "there is no tool named 'bogus_tool'"
    tc.append(ToolCall(t=10.0, tool="submit_mitigation", arguments={"summary": "scaled geo back up"}))
    return record


def test_messages_are_system_user_then_paired_assistant_and_tool_turns():
    msgs = messages(calls_record(), FACTS)
    assert [m["role"] for m in msgs] == ["system", "user"] + ["assistant", "tool"] * 4
    assert FACTS.alert in msgs[1]["content"] and "hotel" in msgs[1]["content"]
    for assistant, tool in zip(msgs[2::2], msgs[3::2]):
        (call,) = assistant["tool_calls"]
        assert call["type"] == "function" and tool["tool_call_id"] == call["id"]
        assert isinstance(call["function"]["arguments"], str)
        json.loads(call["function"]["arguments"])
    ids = [m["tool_calls"][0]["id"] for m in msgs[2::2]]
    assert len(set(ids)) == len(ids)
    assert json.loads(msgs[2]["tool_calls"][0]["function"]["arguments"]) == {"command": ["get", "pods", "-n", "hotel"]}
    assert msgs[-2]["tool_calls"][0]["function"]["name"] == "submit_mitigation"


def test_the_user_turn_is_the_prompt_the_agent_was_given_not_one_rebuilt_from_the_problem_file():
    # the run's prompt names its MCP endpoint and the tools it had (metrics, traces); a prompt rebuilt
    # from today's problem file would drop them, or say something else once the alert was edited
    record = calls_record()
    record.trajectory.prompt = "An alert fired (as given): search p95 high. Tools at http://10.0.0.7:8765/mcp"
    msgs = messages(record, FACTS)
    assert msgs[1] == {"role": "user", "content": record.trajectory.prompt}
    record.trajectory.prompt = None  # a record made before prompts were kept: rebuilt from the problem
    assert FACTS.alert in messages(record, FACTS)[1]["content"]


def test_invalid_action_keeps_its_error_and_is_listed():
    row = episode(calls_record(), FACTS)
    bad = next(m for m in row["messages"] if m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] == "bogus_tool")
    reply = next(m for m in row["messages"] if m.get("tool_call_id") == bad["tool_calls"][0]["id"])
    assert reply["content"].startswith("error: there is no tool named")
    assert row["invalid_calls"] == [bad["tool_calls"][0]["id"]] and row["invalid_actions"] == 1
    ok_reply = row["messages"][3]
    assert "1450 characters" in ok_reply["content"]  # a record made before result text was kept


def test_a_tool_turn_carries_the_text_the_tool_answered():
    record = calls_record()
    record.trajectory.tool_calls[0].result_text = "NAME    READY   STATUS\ngeo-1   0/1     CrashLoopBackOff"
    record.trajectory.tool_calls[1].result_text = "there is no tool named 'bogus_tool'"
    msgs = messages(record, FACTS)
    assert msgs[3]["content"] == "NAME    READY   STATUS\ngeo-1   0/1     CrashLoopBackOff"
    assert msgs[5]["content"] == "there is no tool named 'bogus_tool'"


def test_calls_one_model_reply_made_together_are_one_assistant_turn():
    # an LLM that asks for two tools in one reply was sent both results before its next turn; exported
    # one call per turn, the fine-tuned model would learn a conversation it never had
    record = calls_record()
    tc = record.trajectory.tool_calls  # t = 0, 1, 2 (made by make_record), then submit at 10
    record.trajectory.model_turns = [ModelTurn(t=1.5, reply_t=0.0, tool_calls=2),   # kubectl get, bogus_tool
                                     ModelTurn(t=2.5, reply_t=1.8, tool_calls=1),   # kubectl rollout
                                     ModelTurn(t=4.0, reply_t=3.9),                 # text only: no call
                                     ModelTurn(t=10.5, reply_t=9.5, tool_calls=1)]  # submit
    assert [c.t for c in tc] == [0.0, 1.0, 2.0, 10.0]
    msgs = messages(record, FACTS)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool",
                                         "assistant", "tool"]
    both = msgs[2]["tool_calls"]
    assert [c["function"]["name"] for c in both] == ["kubectl", "bogus_tool"]
    assert [m["tool_call_id"] for m in msgs[3:5]] == [c["id"] for c in both]
    assert [c["function"]["name"] for c in msgs[5]["tool_calls"] + msgs[7]["tool_calls"]] == ["kubectl", "submit_mitigation"]


def test_without_reply_times_each_call_is_its_own_turn():
    # records made before reply times were kept, and policies that call one tool a turn (the gym's)
    record = calls_record()
    record.trajectory.model_turns = [ModelTurn(t=2.5, tool_calls=2), ModelTurn(t=3.5, tool_calls=1)]
    assert [m["role"] for m in messages(record, FACTS)] == ["system", "user"] + ["assistant", "tool"] * 4


def test_row_carries_ids_and_reward_but_no_grader_evidence_or_ground_truth_by_default():
    record = calls_record(evidence_coverage=0.8, wrong_remediations=("deleted pod db-0",), seed=3, agent="react",
                          model="m-1")
    row = episode(record, FACTS)
    assert (row["run_id"], row["problem_id"], row["seed"], row["agent"], row["model"], row["split"]) == (
        record.run_id, "p1", 3, "react", "m-1", "train")
    assert row["reward"] == 1.0 and row["reward_terms"] == {"diagnosis": 0.5, "mitigation": 0.5}
    text = json.dumps(row)
    for leak in ("ground_truth", "geo deployment scaled to zero", "deleted pod db-0", "evidence_coverage",
                 "checklist_judge"):
        assert leak not in text
    labelled = episode(record, FACTS, with_ground_truth=True)
    assert labelled["ground_truth"] == FACTS.ground_truth
    assert "scaled to zero" not in json.dumps(labelled["messages"])


def test_ungraded_run_has_null_reward():
    row = episode(make_record(calls=(("kubectl", "get", True, False),)), None)
    assert row["reward"] is None and row["reward_terms"] == {} and row["split"] == "unknown"
    assert "not available" in row["messages"][1]["content"]


def test_incomplete_and_empty_runs_are_skipped_and_counted():
    records = [calls_record(problem="a"), calls_record(problem="b", status="error"),
               calls_record(problem="c", status="aborted"), make_record(problem="d")]  # d: no tool call
    done = export_episodes(records, lambda pid: FACTS)
    assert [r["problem_id"] for r in done.rows] == ["a"]
    assert (done.skipped_incomplete, done.skipped_no_trajectory) == (2, 1)
    kept = export_episodes(records, lambda pid: None, include_incomplete=True)
    assert [r["problem_id"] for r in kept.rows] == ["a", "b", "c"] and kept.unknown_problems == {"a", "b", "c"}


def test_only_the_splits_asked_for_are_exported_so_test_problems_stay_out_of_training_data():
    facts = {"a": FACTS, "b": ProblemFacts(alert="x", split="test"), "c": ProblemFacts(alert="y", split="dev")}
    records = [calls_record(problem=p) for p in ("a", "b", "c", "gone")]  # gone: no problem file, split unknown
    done = export_episodes(records, facts.get, splits={"train", "dev"})
    assert [r["problem_id"] for r in done.rows] == ["a", "c"] and done.skipped_split == 2
    assert done.skipped == 2
    assert len(export_episodes(records, facts.get).rows) == 4  # no filter: every split


def test_cli_split_filter(tmp_path, capsys):
    write_records([calls_record(problem="hotel_geo_cpu_pressure")], tmp_path / "results")
    out = tmp_path / "rows.jsonl"
    code = run_cli(["export", str(tmp_path / "results"), "--out", str(out), "--split", "nosuch"])
    err = capsys.readouterr().err
    assert code == 2 and "--split" in err and "train, dev or test" in err and not out.exists()
    assert run_cli(["export", str(tmp_path / "results"), "--out", str(out), "--split", "train"]) == 2  # all skipped
    assert "1 run(s) of other splits" in capsys.readouterr().err


def test_hf_layout_splits_by_problem_split_and_writes_a_card(tmp_path):
    rows = [episode(calls_record(problem=p), ProblemFacts(alert="Checkout is failing for all users.", split=s))
            for p, s in (("a", "train"), ("b", "train"), ("c", "test"))]
    files = write_hf_dataset(rows, tmp_path / "ds")
    train = (tmp_path / "ds/data/train-00000-of-00001.jsonl").read_text().splitlines()
    test = (tmp_path / "ds/data/test-00000-of-00001.jsonl").read_text().splitlines()
    assert [json.loads(line)["problem_id"] for line in train] == ["a", "b"] and len(test) == 1
    card = (tmp_path / "ds/README.md").read_text()
    assert "split: train\n    path: data/train-*.jsonl" in card and "`messages`" in card
    assert len(files) == 3


def test_cli_exports_jsonl_and_prints_skipped(tmp_path, capsys):
    results = write_records([calls_record(problem=TRAIN_PROBLEM), calls_record(problem=TRAIN_PROBLEM, seed=1,
                                                                                status="error")], tmp_path / "r")
    out = tmp_path / "eps.jsonl"
    assert run_cli(["export", str(results), "--out", str(out)]) == 0
    (line,) = out.read_text().splitlines()
    row = json.loads(line)
    assert row["split"] == "train" and "ground_truth" not in row
    assert "skipped 1 aborted or errored" in capsys.readouterr().err
    assert run_cli(["export", str(results), "--out", str(tmp_path / "hf"), "--format", "hf",
                    "--with-ground-truth"]) == 0
    row = json.loads((tmp_path / "hf/data/train-00000-of-00001.jsonl").read_text().splitlines()[0])
    assert row["ground_truth"]["component"]


def test_cli_bad_results_dir_is_a_clear_error(tmp_path, capsys):
    assert run_cli(["export", str(tmp_path / "nope"), "--out", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "no such file or directory" in err and "Traceback" not in err
    (tmp_path / "empty").mkdir()
    assert run_cli(["export", str(tmp_path / "empty"), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "no run records" in capsys.readouterr().err


def test_cli_nothing_left_to_export_is_an_error_not_an_empty_dataset(tmp_path, capsys):
    results = write_records([calls_record(status="error")], tmp_path / "r")
    assert run_cli(["export", str(results), "--out", str(tmp_path / "hf"), "--format", "hf"]) == 2
    assert "all 1 run(s) were skipped" in capsys.readouterr().err and not (tmp_path / "hf").exists()


def test_oracle_runs_recite_the_ground_truth_so_are_skipped_unless_asked():
    records = [calls_record(problem="a"), calls_record(problem="b", agent="oracle", kind="oracle")]
    done = export_episodes(records, lambda pid: FACTS)
    assert [r["problem_id"] for r in done.rows] == ["a"] and done.skipped_oracle == 1
    assert [r["agent"] for r in export_episodes(records, lambda pid: FACTS, include_oracle=True).rows] == ["noop", "oracle"]


def test_the_hf_folder_loads_with_the_datasets_library_as_the_docs_say(tmp_path, monkeypatch):
    # the real library, offline, its cache kept in tmp_path: rows of every shape the export writes
    # (graded and ungraded, calls grouped by one reply or one each, a known and an unknown split)
    datasets = importlib.import_module("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    grouped = calls_record(problem=TRAIN_PROBLEM, seed=1, model="m-1")
    grouped.trajectory.model_turns = [ModelTurn(t=1.5, reply_t=0.0, tool_calls=2),
                                      ModelTurn(t=10.5, reply_t=9.5, tool_calls=1)]
    records = [calls_record(problem=TRAIN_PROBLEM), grouped, calls_record(problem="hotel_cache_accept_emfile"),
               make_record(problem="gone", calls=(("kubectl", "get", True, False),))]  # ungraded, no problem file
    results = write_records(records, tmp_path / "results")
    out = tmp_path / "sregym-episodes"
    assert run_cli(["export", str(results), "--out", str(out), "--format", "hf", "--with-ground-truth"]) == 0
    cache = str(tmp_path / "hf-cache")
    # docs/training.md's line, and the folder by path (the card's `configs`)
    by_files = datasets.load_dataset("json", data_files={"train": str(out / "data/train-*.jsonl")}, cache_dir=cache)
    by_folder = datasets.load_dataset(str(out), cache_dir=cache)
    assert sorted(by_folder) == ["test", "train", "unknown"]
    train = by_files["train"]
    assert train.num_rows == 2 and by_folder["train"].num_rows == 2
    assert (by_folder["test"].num_rows, by_folder["unknown"].num_rows) == (1, 1)
    written = [json.loads(line) for line in (out / "data/train-00000-of-00001.jsonl").read_text().splitlines()]
    for row, want in zip(train, written):
        assert (row["run_id"], row["problem_id"], row["split"], row["seed"], row["reward"]) == (
            want["run_id"], want["problem_id"], "train", want["seed"], want["reward"])
        assert row["ground_truth"]["component"] == want["ground_truth"]["component"]
        msgs = row["messages"]
        assert [m["role"] for m in msgs] == [m["role"] for m in want["messages"]]
        assert msgs[1]["content"] == want["messages"][1]["content"]  # the task prompt
        calls = [c for m in msgs if m["role"] == "assistant" for c in m["tool_calls"]]
        assert [c["function"]["name"] for c in calls] == ["kubectl", "bogus_tool", "kubectl", "submit_mitigation"]
        assert json.loads(calls[0]["function"]["arguments"]) == {"command": ["get", "pods", "-n", "hotel"]}
        answered = [m["tool_call_id"] for m in msgs if m["role"] == "tool"]
        assert answered == [c["id"] for c in calls]
    first_reply = [m for m in train[1]["messages"] if m["role"] == "assistant"][0]
    assert len(first_reply["tool_calls"]) == 2  # one model reply asked for two calls together
    # one schema for every split: a struct has each key any row gave it, null where a row had none
    ungraded = by_folder["unknown"][0]
    assert ungraded["reward"] is None and set(ungraded["reward_terms"].values()) == {None}
    assert ungraded["model"] is None and by_folder["train"][1]["model"] == "m-1"  # null in one split, set in another
    assert by_folder["train"][0]["messages"][3]["tool_calls"] is None  # a tool turn
