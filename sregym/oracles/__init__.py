"""The oracle API: mitigation oracles judge the live system; diagnosis oracles judge text."""

from sregym.core.params import NoParams
from sregym.oracles.api import MITIGATION_ORACLES, MitigationContext, MitigationOracle, mitigation_oracle
from sregym.oracles.diagnosis import DIAGNOSIS_ORACLES, DiagnosisOracle, diagnosis_oracle

__all__ = ["DIAGNOSIS_ORACLES", "MITIGATION_ORACLES", "DiagnosisOracle", "MitigationContext", "MitigationOracle",
           "NoParams", "diagnosis_oracle", "mitigation_oracle"]
