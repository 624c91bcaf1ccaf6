"""``unit_file_value`` with a typed planned state (``State``): what its recover receives, and the
context it was rebuilt with, are written to the file under ``_recovered_with``."""

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sregym.injectors import Injector, PlannedState, Verification, injector


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str
    value: str


class FileState(PlannedState):
    original: str | None = None


@injector("unit_typed_file_value")
class TypedFileValue(Injector[Params]):
    """Writes a value into a JSON file; recover restores what plan() saw (typed state)."""
    Params = Params
    State = FileState

    def _read(self):
        return json.loads(Path(self.params.file).read_text())

    def _write(self, data):
        Path(self.params.file).write_text(json.dumps(data))

    def plan(self) -> FileState:
        return FileState(original=self._read().get(self.target.name))

    def inject(self, state: FileState) -> None:
        self._write({**self._read(), self.target.name: self.params.value})

    def verify(self, state: FileState) -> Verification:
        return Verification(self._read().get(self.target.name) == self.params.value)

    def recover(self, state: FileState) -> None:
        seen = {"state": type(state).__name__, "run_id": self.ctx.run_id, "labels": self.ctx.labels,
                "exclude": self.ctx.exclude}
        self._write({**self._read(), self.target.name: state.original, "_recovered_with": seen})
