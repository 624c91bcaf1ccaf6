"""Names shared by every layer."""

# Where fault-plane workloads (node agents, stress pods, helper pods) run. The agent's RBAC cannot
# read it. The name is deliberately ordinary infrastructure: the agent may see it in a namespace
# list, and no name it can see may hint at faults, chaos or injection.
HIDDEN_NAMESPACE = "node-ops"

# Label that marks objects created by the fault plane so `sregym cleanup` can find them. Its key
# and values are neutral on purpose (the agent cannot read the hidden namespace, but objects some
# injectors create in the app namespace, such as NetworkPolicies, must not stand out either).
OWNER_LABEL = "app.kubernetes.io/managed-by"
OWNER_VALUE = "node-ops"
RUN_LABEL = "node-ops/run"

OBSERVABILITY_NAMESPACE = "observability"
# The load generators whose answers define the SLOs run here: the agent may read it, not change it.
LOADGEN_NAMESPACE = OBSERVABILITY_NAMESPACE
# Each load generator is labelled with the app namespace it drives (the charts' _helpers.tpl).
LOADGEN_TARGET_LABEL = "target-namespace"
