"""A policy that learns on live episodes: a bandit over a small runbook, one table per alert.

Each episode is a real run through the Gymnasium env (docs/training.md): the policy reads the alert,
picks one runbook entry (what to look at first, what to change, then its diagnosis and the
mitigation submission), and the run's own reward comes back. The bandit keeps the mean return of
each entry per alert and plays the best so far; an entry not yet tried is valued at ``--optimism``
(optimistic initial values: it is tried before one that paid less, and not before one that paid
more). A uniformly random pick over the same runbook plays the same incidents on the same seeds for
comparison. The point is that the loop works end to end on live incidents, not a strong agent: the
runbook holds each incident's fix, and the bandit has to find, for each alert, which entry it is.

    python3 examples/runbook_bandit.py --episodes 8 --out runs/bandit
    python3 examples/runbook_bandit.py --incidents lite --episodes 4 --out runs/bandit-lite

writes ``returns.json`` and ``returns.png`` (return per episode, and the running mean, of both
policies) under ``--out``. Needs the local cluster (`sregym cluster up`). ``--incidents tiny`` (the
default) plays the conductor's tiny test problem (about 12 s an episode); ``--incidents lite`` two
problems of the lite suite in turn, hotel_geo_selector_mismatch and hotel_rate_bad_image_tag
(docs/training.md has their figures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym

import sregym.gym  # noqa: F401 - registers sregym/Incident-v0

TESTS = Path(__file__).resolve().parent.parent / "tests" / "integration" / "conductor"
# Each incident: the app's namespace, and how long after the submission its fix is graded.
# grade_settle: the geo fix reaches users only once search's gRPC client to geo is out of its
# reconnect back-off; graded at once, the first request after a correct fix timed out (5 s) in CI
# and the fix read as not mitigated (the grade is right about that instant, but the example is
# about the learning loop, so its fix is graded once it had time to take effect). The rate fix is
# graded on the Deployment and its pods, which the fix itself settles.
INCIDENTS = {
    "tiny_settings_drift": {"namespace": "tiny", "grade_settle": 0},
    "hotel_geo_selector_mismatch": {"namespace": "hotel-reservation", "grade_settle": 8},
    "hotel_rate_bad_image_tag": {"namespace": "hotel-reservation", "grade_settle": 0},
}
# which incidents an invocation plays, in turn, and where their files are (the tiny problem lives
# with the conductor's tests; the lite suite's problems are in problems/)
INCIDENT_SETS = {
    "tiny": {"problems": ["tiny_settings_drift"], "problems_dirs": [TESTS / "problems"],
             "charts_dirs": [str(TESTS / "charts")]},
    "lite": {"problems": ["hotel_geo_selector_mismatch", "hotel_rate_bad_image_tag"], "problems_dirs": [],
             "charts_dirs": []},
}

# a step of an entry: an action, or a function of the last observation that makes one
Step = dict | Callable[[dict], dict]


def call(tool: str, **arguments) -> dict:
    return {"tool": tool, "arguments": json.dumps(arguments)}


def entry(diagnosis: str, *calls: Step) -> list[Step]:
    return [*calls, call("submit_diagnosis", text=diagnosis), call("submit_mitigation")]


def runbook(namespace: str, incidents: str = "tiny") -> dict[str, list[Step]]:
    """What an on-call engineer might try first, each entry ending in a diagnosis and the submission.
    The lite runbook is one entry per incident it covers, offered on every alert: a write of the
    other incident's fix changes nothing (it sets what is already there) and counts as a wrong
    remediation. Two entries, because each episode of a real app costs about 20 s and the bandit
    tries an entry before it knows what it pays."""
    if incidents == "lite":
        selector = {"app.kubernetes.io/name": "geo", "app.kubernetes.io/instance": "hotel-reservation"}

        def rate_as_search(obs: dict) -> dict:  # rate runs the image its siblings run (one per service)
            image = obs["text"].strip()
            return call("kubectl", command=["set", "image", "deployment/rate", f"rate={image}", "-n", namespace])

        return {
            "restore the geo Service's selector": entry(
                "the geo Service's selector matches no geo pod, so geo has no endpoints; restored it",
                call("kubectl", command=["get", "service", "geo", "-n", namespace, "-o", "yaml"]),
                call("kubectl", command=["patch", "service", "geo", "-n", namespace, "-p",
                                         json.dumps({"spec": {"selector": selector}})])),
            "set rate's image to its siblings'": entry(
                "the rate Deployment's image was changed to a tag that cannot be pulled; set it back",
                call("kubectl", command=["get", "deployment", "search", "-n", namespace, "-o",
                                         "jsonpath={.spec.template.spec.containers[0].image}"]),
                rate_as_search),
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
    """Greedy over the runbook's entries (epsilon-greedy with ``epsilon`` > 0), one table per alert
    (the alert text's hash). An entry's value is the mean of its returns, and ``optimism`` before
    it is tried: an untried entry is played before any that paid less, never before one that paid
    more (ties broken at random)."""

    def __init__(self, entries: list[str], epsilon: float, rng: random.Random, optimism: float = 0.5) -> None:
        self.entries, self.epsilon, self.rng, self.optimism = entries, epsilon, rng, optimism
        self.total: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(entries, 0.0))
        self.count: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(entries, 0))

    @staticmethod
    def table(alert: str) -> str:
        """The alert's table: the text's hash, so two episodes of one alert share what they learned."""
        return hashlib.sha256(alert.encode()).hexdigest()[:12]

    def value(self, alert: str, entry: str) -> float:
        key = self.table(alert)
        n = self.count[key][entry]
        return self.total[key][entry] / n if n else self.optimism

    def pick(self, alert: str) -> str:
        if self.epsilon and self.rng.random() < self.epsilon:
            return self.rng.choice(self.entries)
        values = {e: self.value(alert, e) for e in self.entries}
        best = max(values.values())
        return self.rng.choice([e for e in self.entries if values[e] == best])

    def learn(self, alert: str, entry: str, episode_return: float) -> None:
        key = self.table(alert)
        self.total[key][entry] += episode_return
        self.count[key][entry] += 1


def play(env: gym.Env, seed: int, problem: str, choose, incidents: str = "tiny") -> tuple[str, str, float, bool]:
    """One episode of ``problem``: reset, the chosen entry's calls; the alert, the entry, the return
    and whether mitigation passed."""
    where = INCIDENTS[problem]
    obs, info = env.reset(seed=seed, options={"problem": problem,
                                              "settings": {"grade_settle": where["grade_settle"]}})
    alert = obs["text"]
    entries = runbook(where["namespace"], incidents)  # the namespace the prompt names
    entry = choose(alert, list(entries))
    total, passed = 0.0, False
    for step in entries[entry]:
        action = step(obs) if callable(step) else step
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            passed = bool(info.get("mitigation_passed"))
            break
    return alert, entry, total, passed


def plot(results: dict[str, list[dict]], path: Path, incidents: str = "tiny") -> None:
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
    problems = INCIDENT_SETS[incidents]["problems"]
    ax.set_xlabel("episode (live runs of " + (problems[0] if len(problems) == 1 else
                                              ", ".join(problems) + " in turn") + ")", fontsize=8)
    ax.set_ylabel("episode return (the run's reward)")
    ax.set_title("Runbook bandit (a table per alert) vs a random pick, on live episodes")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--incidents", choices=sorted(INCIDENT_SETS), default="tiny",
                        help="tiny: the conductor's test problem; lite: two problems of the lite suite, in turn")
    parser.add_argument("--episodes", type=int, default=8,
                        help="episodes per policy (each a live run), over the incidents in turn")
    parser.add_argument("--epsilon", type=float, default=0.1, help="the bandit's exploration rate")
    parser.add_argument("--optimism", type=float, default=0.5, help="an untried entry's value (returns are 0-1)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the picks; episode i plays run seed SEED+i")
    parser.add_argument("--out", type=Path, default=Path("runs/bandit"), help="folder for records, returns.json, returns.png")
    parser.add_argument("--kubeconfig", type=Path, default=None, help="cluster (default: the last `sregym cluster up`)")
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    chosen = INCIDENT_SETS[args.incidents]
    problems = chosen["problems"]
    env = gym.make("sregym/Incident-v0", problems_dirs=chosen["problems_dirs"], out_dir=args.out / "runs",
                   kubeconfig=args.kubeconfig,
                   settings={"noise": False, "baseline_window": 1, "grade_window": 3, "verify_timeout": 30,
                             "charts_dirs": chosen["charts_dirs"]})
    entries = list(runbook(INCIDENTS[problems[0]]["namespace"], args.incidents))
    bandit = RunbookBandit(entries, args.epsilon, random.Random(args.seed), args.optimism)
    uniform = random.Random(args.seed + 1)
    results: dict[str, list[dict]] = {"bandit": [], "random pick": []}
    try:
        for i in range(args.episodes):
            problem = problems[i % len(problems)]
            for name in results:
                choose = ((lambda alert, entries: bandit.pick(alert)) if name == "bandit"
                          else (lambda alert, entries: uniform.choice(entries)))
                alert, entry, total, passed = play(env, args.seed + i, problem, choose, args.incidents)
                if name == "bandit":
                    bandit.learn(alert, entry, total)
                results[name].append({"episode": i + 1, "problem": problem, "alert": RunbookBandit.table(alert),
                                      "entry": entry, "return": round(total, 4), "mitigated": passed})
                print(f"{name:12s} episode {i + 1} ({problem}): {entry!r} return {total:+.3f} mitigated {passed}",
                      flush=True)
    finally:
        env.close()
    (args.out / "returns.json").write_text(json.dumps(results, indent=2))
    plot(results, args.out / "returns.png", args.incidents)
    for name, rows in results.items():
        half = len(rows) // 2
        print(f"{name}: mean return {sum(r['return'] for r in rows) / len(rows):+.3f}, last half "
              f"{sum(r['return'] for r in rows[half:]) / max(1, len(rows) - half):+.3f}")
    print(f"wrote {args.out / 'returns.json'} and {args.out / 'returns.png'}")
    return results


if __name__ == "__main__":
    main()
