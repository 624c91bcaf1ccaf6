"""The oracle API: mitigation oracles judge the live system; diagnosis oracles judge text."""

from sregym.oracles.api import MITIGATION_ORACLES, MitigationContext, MitigationOracle, mitigation_oracle

__all__ = ["MITIGATION_ORACLES", "MitigationContext", "MitigationOracle", "mitigation_oracle"]
