"""One live episode through the Gymnasium env (docs/training.md): a scripted policy looks, fixes,
submits, and the episode's return is the run's reward. Run from a checkout with the local cluster
up (`sregym cluster up`): `python3 examples/gym_episode.py`."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym

import sregym.gym  # noqa: F401 - registers sregym/Incident-v0 and sregym/<problem_id>-v0

TESTS = Path(__file__).resolve().parent.parent / "tests" / "integration" / "conductor"


def call(tool: str, **arguments) -> dict:
    return {"tool": tool, "arguments": json.dumps(arguments)}


def main() -> None:
    env = gym.make("sregym/Incident-v0", problems_dirs=[TESTS / "problems"], out_dir="runs/gym",
                   settings={"noise": False, "baseline_window": 1, "grade_window": 3,
                             "charts_dirs": [str(TESTS / "charts")]})
    try:
        obs, info = env.reset(seed=7, options={"problem": "tiny_settings_drift"})
        print(obs["text"])
        policy = [call("kubectl", command="get configmaps -n tiny -o yaml"),
                  call("kubectl", command=["patch", "configmap", "tiny-settings", "-n", "tiny", "-p",
                                           '{"data": {"greeting": "hello"}}']),
                  call("submit_diagnosis", text="tiny-settings greeting changed to goodbye", component="tiny-settings"),
                  call("submit_mitigation")]
        episode_return = 0.0
        for action in policy:
            obs, reward, terminated, truncated, info = env.step(action)
            episode_return += reward
            print(f"{action['tool']}: {obs['text'][:120]!r}")
            if terminated or truncated:
                break
        print(f"return {episode_return:.3f}; mitigation passed: {info['mitigation_passed']}; run {info['run_id']}")
    finally:
        env.close()  # a run still playing is aborted and its faults recovered


if __name__ == "__main__":
    main()
