"""The weight-sync config file: YAML, at most :data:`MAX_CONFIG_BYTES`, checked by
pydantic (unknown keys are errors). See ``experiments/configs/weight-sync/`` and
docs/crossmesh.md."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from synth.errors import RedistributionError

MAX_CONFIG_BYTES = 256 << 10
ROLES = ("expert", "col", "row", "embed", "vector", "router")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SideSchema(_Strict):
    mesh: str = Field(description="mesh with device ids, e.g. 'fsdp=32,ep=8@0-255'")
    rules: dict[str, list[list[str] | None]] = Field(description="per role, the axes splitting each dim")

    @field_validator("rules")
    @classmethod
    def _roles(cls, v):
        bad = sorted(set(v) - set(ROLES))
        if bad:
            raise ValueError(f"unknown role(s) {bad}; roles are {list(ROLES)}")
        return v


class PublishedSchema(_Strict):
    time_s: float = Field(gt=0)
    method: Literal["p2p", "bucketed_broadcast", "gather_broadcast", "device_put"]
    what: str
    source: str
    time_s_high: float | None = None
    differs: str | None = Field(default=None, description="why the simulated schedule of the published method "
                                "differs from the figure by more than 30% (what that system pays that the "
                                "simulation does not model), with its evidence")


class SyncConfigSchema(_Strict):
    name: str
    model: str
    source: str = Field(description="where the configuration (meshes, machine) comes from")
    assumed: list[str] = Field(default_factory=list, description="what the source does not say and we chose")
    dtype: Literal["fp32", "bf16", "fp16"] = "bf16"
    target_dtype: Literal["fp32", "bf16", "fp16", "fp8"] | None = None
    machine: str
    staging_cap_bytes: int = Field(gt=0)
    planner: Literal["normal", "auto", "easy"] = "normal"
    train: SideSchema
    infer: SideSchema
    published: PublishedSchema | None = None


def load_sync_config(path) -> dict:
    """The validated config as a plain dict; one-line :class:`RedistributionError` on any fault."""
    import yaml

    from synth.fileio import read_bytes

    raw = read_bytes(path, "weight-sync config")
    if len(raw) > MAX_CONFIG_BYTES:
        raise RedistributionError(f"weight-sync config {path} is {len(raw):,} bytes; the limit is "
                                  f"{MAX_CONFIG_BYTES:,}")
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise RedistributionError(f"weight-sync config {path}: not valid YAML ({str(e).splitlines()[0]})") from None
    try:
        cfg = SyncConfigSchema.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise RedistributionError(f"weight-sync config {path}: {loc}: {err['msg']}") from None
    return cfg.model_dump()
