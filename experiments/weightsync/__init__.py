"""Whole-model weight sync from a training mesh to an inference mesh
(``python -m experiments weight-sync CONFIG.yaml [--json]``): see :mod:`.sync`."""

from experiments.weightsync.config import load_sync_config
from experiments.weightsync.sync import SyncResult, format_result, plan_sync


def run(path, json_out: bool = False) -> int:
    import json

    res = plan_sync(load_sync_config(path))
    print(json.dumps(res.to_dict()) if json_out else format_result(res))
    return 0


__all__ = ["SyncResult", "format_result", "load_sync_config", "plan_sync", "run"]
