"""Optional shaped rewards: credit moved earlier in the episode, never changed in total.

The episode's return is always the run's partial-credit reward (``grades.reward.total`` of the
record, weights in ``oracles/reward.yaml``). A shaped term named in ``reset(options={"shaping":
[...]})`` pays its penalty at the step where it happens, with the record's weight and cap; the
final step pays the rest (``total - paid``), so the return is the same number a run is graded
with and what is trained is what is benchmarked.

- ``invalid_action``: ``-penalties.invalid_action`` for each invalid action (unknown tool,
  arguments that do not match the schema or are not JSON, a refused call), up to
  ``penalties.invalid_action_cap`` in all;
- ``wrong_remediation``: ``-penalties.wrong_remediation`` for each write outside the faulty
  component and its scope, up to ``penalties.wrong_remediation_cap``. Judged on the conductor's
  side (it needs the ground truth); the env only receives the count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sregym.oracles import load_reward_weights

SHAPED_TERMS = ("invalid_action", "wrong_remediation")


class UnknownShapingTerm(ValueError):
    """A shaping term the env does not know."""


def shaped_terms(names: Iterable[str] | None) -> frozenset[str]:
    """The shaping terms asked for; an unknown name is an error naming the known ones."""
    chosen = frozenset(names or ())
    unknown = sorted(chosen - set(SHAPED_TERMS))
    if unknown:
        raise UnknownShapingTerm(f"unknown shaping term(s) {', '.join(unknown)}; known: {', '.join(SHAPED_TERMS)}")
    return chosen


@dataclass
class Shaping:
    """Per-step penalties as the record weighs them; ``paid`` is what the episode has paid so far."""

    terms: frozenset[str] = frozenset()
    per_invalid: float = 0.0
    invalid_cap: float = 0.0
    per_wrong: float = 0.0
    wrong_cap: float = 0.0
    paid: float = 0.0
    _invalid_paid: float = field(default=0.0, repr=False)
    _wrong_paid: float = field(default=0.0, repr=False)

    @classmethod
    def from_weights(cls, terms: Iterable[str] | None, weights_file: str | None = None) -> Shaping:
        p = load_reward_weights(weights_file).penalties
        return cls(terms=shaped_terms(terms), per_invalid=p.invalid_action, invalid_cap=p.invalid_action_cap,
                   per_wrong=p.wrong_remediation, wrong_cap=p.wrong_remediation_cap)

    def step(self, *, invalid: int = 0, wrong: int = 0) -> float:
        """The shaped reward of one step with ``invalid`` invalid actions and ``wrong`` wrong remediations."""
        reward = 0.0
        if "invalid_action" in self.terms and invalid:
            take = min(self.per_invalid * invalid, self.invalid_cap - self._invalid_paid)
            self._invalid_paid += max(0.0, take)
            reward -= max(0.0, take)
        if "wrong_remediation" in self.terms and wrong:
            take = min(self.per_wrong * wrong, self.wrong_cap - self._wrong_paid)
            self._wrong_paid += max(0.0, take)
            reward -= max(0.0, take)
        self.paid += reward
        return reward

    def final(self, total: float) -> float:
        """The last step's reward: what the run's reward ``total`` still owes after the shaped steps."""
        return total - self.paid
