"""Wrong image tag on a workload's container: new pods cannot pull or find it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import Verification, WorkloadEdit, WorkloadEditState, injector, waiting_reasons

IMAGE_ERRORS = {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}


class ImageTagParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tag: str = Field(..., description="the wrong tag, e.g. a version that was never built")


def retag(image: str, tag: str) -> str:
    """``image`` with its tag replaced (digest references lose the digest)."""
    repo = image.split("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    if ":" in last:
        repo = repo[: len(repo) - len(last)] + last.split(":", 1)[0]
    return f"{repo}:{tag}"


@injector("image_tag")
class ImageTag(WorkloadEdit[ImageTagParams]):
    """Point a workload's container at an image tag that does not exist."""

    Params = ImageTagParams

    def plan(self) -> WorkloadEditState:
        return self.container_state("image", lambda before: retag(before, self.params.tag))

    def verify(self, state: WorkloadEditState) -> Verification:
        wrong = state.edits[0]["after"]
        pods = [p for p in self.live_pods(state)
                if any(c["image"] == wrong for c in p["spec"]["containers"])]
        reasons = waiting_reasons(pods) & IMAGE_ERRORS
        return Verification(bool(reasons), f"pods with {wrong}: {len(pods)}; waiting: {', '.join(sorted(reasons)) or 'no'}")
