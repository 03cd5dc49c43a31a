"""The one lazy lookup behind the package's registries (`prbench.rms.KINDS`,
`prbench.data.baselines.KINDS`, `prbench.downstream.REGISTRY`): an entry names its code as a
"module:attr" string, imported only when the entry is used, so reading a registry loads no
implementation."""
from __future__ import annotations

import importlib


def load_ref(ref: str, package: str):
    """The object `ref` ("module:attr", the module relative to `package`) names, importing its module."""
    module, attr = ref.split(":")
    return getattr(importlib.import_module(f".{module}", package), attr)
