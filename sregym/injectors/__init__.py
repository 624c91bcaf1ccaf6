"""The injector API: how a fault primitive is written, registered, planned and recovered."""

from sregym.injectors.api import (
    INJECTORS,
    FaultContext,
    Injector,
    Mechanism,
    NoParams,
    PlannedState,
    Verification,
    injector,
    run_labels,
)
from sregym.injectors.node import running_pods

__all__ = ["INJECTORS", "FaultContext", "Injector", "Mechanism", "NoParams", "PlannedState", "Verification",
           "injector", "run_labels", "running_pods"]
