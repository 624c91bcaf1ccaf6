"""A policy that learns on live episodes: an epsilon-greedy bandit over a small runbook, per alert.

Each episode is a real run through the Gymnasium env (docs/training.md): the policy reads the alert,
picks one runbook entry (a short list of tool calls, then its diagnosis and the mitigation
submission), and the run's own reward comes back. The bandit keeps the mean return of each entry per
alert and mostly picks the best one so far; a uniformly random pick over the same runbook is played
on the same seeds for comparison. The point is that the loop works end to end on live incidents,
not a strong agent: the runbook holds the fix, the bandit only has to find which entry it is.

    python3 examples/runbook_bandit.py --episodes 8 --out runs/bandit
    python3 examples/runbook_bandit.py --incident lite --episodes 3 --out runs/bandit-lite

writes ``returns.json`` and ``returns.png`` (return per episode, and the running mean, of both
policies) under ``--out``. Needs the local cluster (`sregym cluster up`). ``--incident tiny`` (the
default) plays the conductor's tiny test problem (about 12 s an episode); ``--incident lite`` a
problem of the lite suite, hotel_geo_selector_mismatch (docs/training.md has its figures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path

import gymnasium as gym

import sregym.gym  # noqa: F401 - registers sregym/Incident-v0

TESTS = Path(__file__).resolve().parent.parent / "tests" / "integration" / "conductor"
# which incident the episodes play: its problem, the app's namespace, and where its files are
# (the tiny problem lives with the conductor's tests; a lite problem is in problems/)
# grade_settle: the lite fix reaches users only once search's gRPC client to geo is out of its
# reconnect back-off; graded at once, the first request after a correct fix timed out (5 s) in CI
# and the fix read as not mitigated (the grade is right about that instant, but the example is
# about the learning loop, so its fix is graded once it had time to take effect)
INCIDENTS = {
    "tiny": {"problem": "tiny_settings_drift", "namespace": "tiny", "grade_settle": 0,
             "problems_dirs": [TESTS / "problems"], "charts_dirs": [str(TESTS / "charts")]},
    "lite": {"problem": "hotel_geo_selector_mismatch", "namespace": "hotel-reservation", "grade_settle": 8,
             "problems_dirs": [], "charts_dirs": []},
}


def call(tool: str, **arguments) -> dict:
    return {"tool": tool, "arguments": json.dumps(arguments)}


def entry(diagnosis: str, *calls: dict) -> list[dict]:
    return [*calls, call("submit_diagnosis", text=diagnosis), call("submit_mitigation")]


def runbook(namespace: str, incident: str = "tiny") -> dict[str, list[dict]]:
    """What an on-call engineer might try first, each ending in a diagnosis and the submission.
    The lite incident's runbook is two entries (looking, and the fix): each episode of a real app
    costs tens of seconds, and a bandit tries every entry once before it can prefer one."""
    if incident == "lite":
        selector = {"app.kubernetes.io/name": "geo", "app.kubernetes.io/instance": "hotel-reservation"}
        return {
            "look and declare it fixed": entry("nothing found",
                                               call("kubectl", command=["get", "pods", "-n", namespace])),
            "restore the geo Service's selector": entry(
                "the geo Service's selector matches no geo pod, so geo has no endpoints; restored it",
                call("kubectl", command=["get", "service", "geo", "-n", namespace, "-o", "yaml"]),
                call("kubectl", command=["patch", "service", "geo", "-n", namespace, "-p",
                                         json.dumps({"spec": {"selector": selector}})])),
        }
    return {
        "restart the deployments": entry("pods were in a bad state; restarted them",
                                         call("kubectl", command=["rollout", "restart", "deployment", "-n", namespace])),
        "delete the pods": entry("pods were in a bad state; recreated them",
                                 call("kubectl", command=["delete", "pods", "--all", "-n", namespace])),
        "restore the greeting setting": entry(
            "the tiny-settings ConfigMap's greeting was changed; restored it to hello",
            call("kubectl", command=["get", "configmaps", "-n", namespace, "-o", "yaml"]),
            call("kubectl", command=["patch", "configmap", "tiny-settings", "-n", namespace, "-p",
                                     '{"data": {"greeting": "hello"}}'])),
        "look and declare it fixed": entry("nothing found",
                                           call("kubectl", command=["get", "pods", "-n", namespace])),
    }


class RunbookBandit:
    """Epsilon-greedy over the runbook's entries, one table per alert (the alert text's hash)."""

    def __init__(self, entries: list[str], epsilon: float, rng: random.Random) -> None:
        self.entries, self.epsilon, self.rng = entries, epsilon, rng
        self.total: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(entries, 0.0))
        self.count: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(entries, 0))

    @staticmethod
    def table(alert: str) -> str:
        """The alert's table: the text's hash, so two episodes of one alert share what they learned."""
        return hashlib.sha256(alert.encode()).hexdigest()[:12]

    def pick(self, alert: str) -> str:
        key = self.table(alert)
        untried = [e for e in self.entries if self.count[key][e] == 0]
        if untried:
            return self.rng.choice(untried)
        if self.rng.random() < self.epsilon:
            return self.rng.choice(self.entries)
        return max(self.entries, key=lambda e: self.total[key][e] / self.count[key][e])

    def learn(self, alert: str, entry: str, episode_return: float) -> None:
        key = self.table(alert)
        self.total[key][entry] += episode_return
        self.count[key][entry] += 1


def play(env: gym.Env, seed: int, choose, incident: str = "tiny") -> tuple[str, str, float, bool]:
    """One episode: reset, the chosen entry's calls; the alert, the entry, the return and whether
    mitigation passed."""
    where = INCIDENTS[incident]
    obs, info = env.reset(seed=seed, options={"problem": where["problem"]})
    alert = obs["text"]
    entries = runbook(where["namespace"], incident)  # the namespace the prompt names
    entry = choose(alert, list(entries))
    total, passed = 0.0, False
    for action in entries[entry]:
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            passed = bool(info.get("mitigation_passed"))
            break
    return alert, entry, total, passed


def plot(results: dict[str, list[dict]], path: Path, incident: str = "tiny") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for (name, rows), color in zip(results.items(), ("tab:blue", "tab:gray")):
        returns = [r["return"] for r in rows]
        running = [sum(returns[:i + 1]) / (i + 1) for i in range(len(returns))]
        episodes = range(1, len(returns) + 1)
        ax.plot(episodes, returns, "o", color=color, alpha=0.4, label=f"{name}: return")
        ax.plot(episodes, running, "-", color=color, label=f"{name}: running mean")
    ax.set_xlabel(f"episode (live run of {INCIDENTS[incident]['problem']})")
    ax.set_ylabel("episode return (the run's reward)")
    ax.set_title("Runbook bandit vs a random pick, on live episodes")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--incident", choices=sorted(INCIDENTS), default="tiny",
                        help="tiny: the conductor's test problem; lite: a problem of the lite suite")
    parser.add_argument("--episodes", type=int, default=8, help="episodes per policy (each a live run)")
    parser.add_argument("--epsilon", type=float, default=0.1, help="the bandit's exploration rate")
    parser.add_argument("--seed", type=int, default=0, help="seeds the picks; episode i plays run seed SEED+i")
    parser.add_argument("--out", type=Path, default=Path("runs/bandit"), help="folder for records, returns.json, returns.png")
    parser.add_argument("--kubeconfig", type=Path, default=None, help="cluster (default: the last `sregym cluster up`)")
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    where = INCIDENTS[args.incident]
    env = gym.make("sregym/Incident-v0", problems_dirs=where["problems_dirs"], out_dir=args.out / "runs",
                   kubeconfig=args.kubeconfig,
                   settings={"noise": False, "baseline_window": 1, "grade_window": 3, "verify_timeout": 30,
                             "grade_settle": where["grade_settle"], "charts_dirs": where["charts_dirs"]})
    bandit = RunbookBandit(list(runbook(where["namespace"], args.incident)), args.epsilon, random.Random(args.seed))
    uniform = random.Random(args.seed + 1)
    results: dict[str, list[dict]] = {"bandit": [], "random pick": []}
    try:
        for i in range(args.episodes):
            for name in results:
                choose = ((lambda alert, entries: bandit.pick(alert)) if name == "bandit"
                          else (lambda alert, entries: uniform.choice(entries)))
                alert, entry, total, passed = play(env, args.seed + i, choose, args.incident)
                if name == "bandit":
                    bandit.learn(alert, entry, total)
                results[name].append({"episode": i + 1, "entry": entry, "return": round(total, 4), "mitigated": passed})
                print(f"{name:12s} episode {i + 1}: {entry!r} return {total:+.3f} mitigated {passed}", flush=True)
    finally:
        env.close()
    (args.out / "returns.json").write_text(json.dumps(results, indent=2))
    plot(results, args.out / "returns.png", args.incident)
    for name, rows in results.items():
        half = len(rows) // 2
        print(f"{name}: mean return {sum(r['return'] for r in rows) / len(rows):+.3f}, last half "
              f"{sum(r['return'] for r in rows[half:]) / max(1, len(rows) - half):+.3f}")
    print(f"wrote {args.out / 'returns.json'} and {args.out / 'returns.png'}")
    return results


if __name__ == "__main__":
    main()
