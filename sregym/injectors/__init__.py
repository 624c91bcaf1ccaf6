"""The injector API: how a fault primitive is written, registered, planned and recovered."""

from sregym.injectors.api import (
    INJECTORS,
    FaultContext,
    Injector,
    Mechanism,
    NoParams,
    Verification,
    injector,
)

__all__ = ["INJECTORS", "FaultContext", "Injector", "Mechanism", "NoParams", "Verification", "injector"]
