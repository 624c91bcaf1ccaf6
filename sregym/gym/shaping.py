"""Optional shaped rewards: credit moved earlier in the episode, never changed in total.

The episode's return is always the run's partial-credit reward (``grades.reward.total`` of the
record, weights in ``oracles/reward.yaml``). A shaped term named in ``reset(options={"shaping":
[...]})`` pays its share at the step where it is earned, with the record's weight and cap; the
final step pays the rest (``total - paid``), so the return is the same number a run is graded
with and what is trained is what is benchmarked.

- ``evidence_coverage``: ``weights.evidence`` times the gain of the run's evidence coverage at this
  step (the record's metric, ``sregym.oracles.evidence_coverage``, over the calls so far), so at
  most the weight in all. Judged on the conductor's side; the env only receives the gain. It tells
  the policy, call by call, which of its reads hit the ground truth's evidence: see docs/training.md.

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

SHAPED_TERMS = ("evidence_coverage", "invalid_action", "wrong_remediation")


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
    """Per-step credit and penalties as the record weighs them; ``paid`` is what the episode has paid so far."""

    terms: frozenset[str] = frozenset()
    per_evidence: float = 0.0
    per_invalid: float = 0.0
    invalid_cap: float = 0.0
    per_wrong: float = 0.0
    wrong_cap: float = 0.0
    paid: float = 0.0
    _paid_by_term: dict[str, float] = field(default_factory=dict, repr=False)

    @classmethod
    def from_weights(cls, terms: Iterable[str] | None, weights_file: str | None = None) -> Shaping:
        weights = load_reward_weights(weights_file)
        p = weights.penalties
        return cls(terms=shaped_terms(terms), per_evidence=weights.weights.evidence, per_invalid=p.invalid_action,
                   invalid_cap=p.invalid_action_cap, per_wrong=p.wrong_remediation, wrong_cap=p.wrong_remediation_cap)

    def step(self, *, invalid: int = 0, wrong: int = 0, evidence: float = 0.0) -> float:
        """The shaped reward of one step with ``invalid`` invalid actions, ``wrong`` wrong remediations
        and an ``evidence`` coverage gain (a share in [0, 1])."""
        # coverage is a share, so its gains sum to 1 at most: the weight is its cap
        reward = (self._pay("evidence_coverage", self.per_evidence * evidence, self.per_evidence)
                  - self._pay("invalid_action", self.per_invalid * invalid, self.invalid_cap)
                  - self._pay("wrong_remediation", self.per_wrong * wrong, self.wrong_cap))
        self.paid += reward
        return reward

    def _pay(self, term: str, amount: float, cap: float) -> float:
        """What a term asked for pays of ``amount`` without going past ``cap`` in all (0 when not asked for)."""
        if term not in self.terms or amount <= 0:
            return 0.0
        paid = self._paid_by_term.get(term, 0.0)
        take = max(0.0, min(amount, cap - paid))
        self._paid_by_term[term] = paid + take
        return take

    def final(self, total: float) -> float:
        """The last step's reward: what the run's reward ``total`` still owes after the shaped steps."""
        return total - self.paid
