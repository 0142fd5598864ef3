"""Parsers for `nvidia-smi` output: `-q -x` inventory, `--query-*` CSV, `-L` listing, compute apps.

All of them take the command's text and raise `gpuws.core.errors.ParseError` for anything they
cannot read; values the driver does not report come back as None, never 0.
"""

from gpuws.core.nvsmi._xmldoc import split_document
from gpuws.core.nvsmi.compute_apps import DEFAULT_FIELDS as COMPUTE_APP_FIELDS
from gpuws.core.nvsmi.compute_apps import ComputeApp, parse_compute_apps
from gpuws.core.nvsmi.listing import GpuListEntry, MigListEntry, merge_gpu_listing, parse_gpu_list
from gpuws.core.nvsmi.mig_profiles import derive_mig_profile
from gpuws.core.nvsmi.query_csv import QueryRow, parse_query_csv, parse_query_line, to_float, to_int
from gpuws.core.nvsmi.xml_inventory import is_simulated_xml, parse_nvidia_smi_xml

__all__ = [
    "COMPUTE_APP_FIELDS",
    "ComputeApp",
    "GpuListEntry",
    "MigListEntry",
    "QueryRow",
    "derive_mig_profile",
    "is_simulated_xml",
    "merge_gpu_listing",
    "parse_compute_apps",
    "parse_gpu_list",
    "parse_nvidia_smi_xml",
    "parse_query_csv",
    "parse_query_line",
    "split_document",
    "to_float",
    "to_int",
]
