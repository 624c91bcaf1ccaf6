"""The export's dataset card declares one schema for every split, merged over all rows: what
`datasets.load_dataset(<folder>)` would otherwise infer from one split and then fail to cast the
others to (test_chat_export.py loads a folder with the real library)."""

import pytest

from sregym.agentplane.dataset_features import UnrepresentableColumn, card_features


def test_a_null_in_one_row_takes_the_type_another_row_gives_and_a_column_null_everywhere_is_a_string():
    rows = [{"model": None, "reward": None, "note": None}, {"model": "m-1", "reward": 1, "note": None},
            {"model": None, "reward": 0.5, "note": None}]
    assert card_features(rows) == [{"name": "model", "dtype": "string"}, {"name": "reward", "dtype": "float64"},
                                   {"name": "note", "dtype": "string"}]


def test_a_struct_holds_every_key_any_row_gave_it_and_lists_merge_their_elements():
    rows = [{"terms": {}, "calls": [], "messages": [{"role": "user", "content": "x"}]},
            {"terms": {"evidence": 0.5}, "calls": ["call_1"],
             "messages": [{"role": "assistant", "content": None,
                           "tool_calls": [{"id": "c0", "function": {"name": "kubectl", "arguments": "{}"}}]},
                          {"role": "tool", "tool_call_id": "c0", "content": "ok"}]},
            {"terms": {"diagnosis": 1.0}, "calls": [], "messages": []}]
    terms, calls, messages = card_features(rows)
    assert terms == {"name": "terms", "struct": [{"name": "evidence", "dtype": "float64"},
                                                  {"name": "diagnosis", "dtype": "float64"}]}
    assert calls == {"name": "calls", "list": "string"}
    assert messages == {"name": "messages", "list": [
        {"name": "role", "dtype": "string"}, {"name": "content", "dtype": "string"},
        {"name": "tool_calls", "list": [{"name": "id", "dtype": "string"}, {"name": "function", "struct": [
            {"name": "name", "dtype": "string"}, {"name": "arguments", "dtype": "string"}]}]},
        {"name": "tool_call_id", "dtype": "string"}]}
    assert card_features([{"grid": [[1, 2], [3.5]]}]) == [{"name": "grid", "list": {"list": "float64"}}]


def test_values_no_one_type_holds_name_their_field():
    with pytest.raises(UnrepresentableColumn, match=r"row\.ground_truth\.scope holds both string and list"):
        card_features([{"ground_truth": {"scope": "geo"}}, {"ground_truth": {"scope": ["geo"]}}])
