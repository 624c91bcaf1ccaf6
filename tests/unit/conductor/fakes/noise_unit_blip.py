"""A noise primitive for unit tests: while active it records itself in a JSON file (``$UNIT_NOISE_FILE``)
and can make a fake oracle pass by writing the value that file's ``mask`` key names."""

import json
import os
from pathlib import Path

from sregym.injectors import Injector, Verification, injector
from sregym.injectors._noise import NoiseParams


@injector("noise_unit_blip")
class UnitBlip(Injector[NoiseParams]):
    Params = NoiseParams

    def _file(self) -> Path:
        return Path(os.environ["UNIT_NOISE_FILE"])

    def _write(self, **kw) -> None:
        data = json.loads(self._file().read_text())
        data.update(kw)
        self._file().write_text(json.dumps(data))

    def plan(self):
        return {}

    def inject(self, state):
        data = json.loads(self._file().read_text())
        self._write(noise_started=data.get("noise_started", 0) + 1, active=True,
                    **({data["mask"]: "good"} if data.get("mask") else {}))

    def verify(self, state):
        return Verification(True)

    def recover(self, state):
        self._write(active=False)
