"""The task as an on-call SRE receives it: the alert or user report, the namespace, the tools.

The conductor passes the alert text (written by the problem author, checked there to not name the
fault plane); this module adds only what any SRE is told about the environment. It never receives
the problem id, fault, injector or ground truth, so it cannot leak them. :func:`check_prompt`
is a last guard the conductor may call with words that must not appear (problem id, injector
names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from jinja2 import Environment, StrictUndefined

from sregym.agentplane.budgets import AgentBudgets

TEMPLATE = """\
You are the on-call SRE for the application running in the Kubernetes namespace `{{ namespace }}`.

{{ alert_heading }}:
{{ alert | indent(2, first=True) }}

Find out what is wrong and why, fix it, and report.

Tools (MCP server{% if mcp_url %} at {{ mcp_url }}{% endif %}):
- kubectl: the kubectl CLI with your credentials (read and write; no watching, no local files)
{%- if metrics %}
- query_metrics: PromQL queries against Prometheus (instant, or a range with start/end/step)
{%- endif %}
- query_logs: log lines by namespace, pod, container, time range and text
{%- if traces %}
- query_traces: request traces by service, operation, time range, errors only
{%- endif %}
- submit_diagnosis: your diagnosis (what is wrong, which component, how it fails, the evidence)
- submit_mitigation: call it once the service is healthy again; this ends your work

Budget: {{ budgets.steps }} tool calls (submissions are free) and {{ (budgets.seconds / 60) | round(1) }} minutes\
{%- if budgets.tokens %}, {{ budgets.tokens }} model tokens{% endif %}.
Your access covers the namespace `{{ namespace }}` and read-only views of the cluster; other namespaces are not \
yours to change.
"""

_env = Environment(autoescape=False, undefined=StrictUndefined, keep_trailing_newline=True)
_template = _env.from_string(TEMPLATE)


class PromptLeakError(ValueError):
    """The prompt contains a word the agent must not be told."""


def render_prompt(alert: str, namespace: str, budgets: AgentBudgets, *, metrics: bool = True, traces: bool = True,
                  mcp_url: str | None = None, user_report: bool = False) -> str:
    """The text handed to the agent. ``user_report`` heads the alert as a report from users."""
    return _template.render(alert=alert.strip(), namespace=namespace, budgets=budgets, metrics=metrics,
                            traces=traces, mcp_url=mcp_url,
                            alert_heading="A user reports" if user_report else "An alert fired")


def check_prompt(prompt: str, forbidden: Iterable[str]) -> str:
    """Raise :class:`PromptLeakError` if any forbidden word (case-insensitive, whole word) is in the prompt."""
    found = [w for w in forbidden if w and re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", prompt, re.IGNORECASE)]
    if found:
        raise PromptLeakError(f"the agent prompt would name {', '.join(sorted(set(found)))}")
    return prompt
