"""Methods and their registry. Adding a method: one module, plus one line in the import list below."""

# The import list: one line per method module, in the order of the paper's tables.
# isort: off
from methods import fusion_unets  # noqa: F401  (MV-, QMV-, Mean-, STAPLE-UNet)
from methods import ls_unet  # noqa: F401  (LS-UNet, label sampling)
from methods import mh_unet  # noqa: F401  (MH-UNet, one head per rater)
from methods import cm_unet  # noqa: F401  (CM-UNet and its global-CM variant)
from methods import mr_net  # noqa: F401  (MR-Net)
from methods import lf_net  # noqa: F401  (LF-Net and its ablations)
from methods import prob_unet  # noqa: F401  (the field's sampling methods: Prob. U-Net,
from methods import pionono  # noqa: F401  Pionono
from methods import d_persona  # noqa: F401  and D-Persona)

# isort: on
from methods.base import DataSpec, Method, Stage, StepContext
from methods.registry import (
    MethodEntry,
    MethodRef,
    UnknownMethodError,
    build_method,
    get_entry,
    method_names,
    param_name,
    parse_value,
    register_method,
    register_variant,
    resolve_config,
)

__all__ = [
    "DataSpec",
    "Method",
    "MethodEntry",
    "MethodRef",
    "Stage",
    "StepContext",
    "UnknownMethodError",
    "build_method",
    "get_entry",
    "method_names",
    "param_name",
    "parse_value",
    "register_method",
    "register_variant",
    "resolve_config",
]
