"""A fault primitive for unit tests of the engine's pure logic: it edits a key of a JSON file
(``target.name``) instead of a cluster object, and can be told to never take effect."""

import json
from pathlib import Path
from pydantic import BaseModel, ConfigDict
from sregym.injectors import Injector, Verification, injector


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str
    value: str
    takes_effect: bool = True


@injector("unit_file_value")
class FileValue(Injector[Params]):
    """Writes a value into a JSON file; recover restores what plan() saw."""
    Params = Params

    def _read(self):
        return json.loads(Path(self.params.file).read_text())

    def plan(self):
        return {"original": self._read().get(self.target.name)}

    def inject(self, state):
        if not self.params.takes_effect:
            return
        data = self._read()
        data[self.target.name] = self.params.value
        Path(self.params.file).write_text(json.dumps(data))

    def verify(self, state):
        return Verification(self._read().get(self.target.name) == self.params.value)

    def recover(self, state):
        data = self._read()
        data[self.target.name] = state["original"]
        Path(self.params.file).write_text(json.dumps(data))
