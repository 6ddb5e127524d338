"""What a benchmark ran on: the CPU and its ISA flags, cores, memory, library versions."""
from __future__ import annotations

from importlib import metadata
import os
import platform

# The CPU features that decide which kernels run (AMX and AVX-512 bfloat16 above all).
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16")
PACKAGES = ("tensorflow", "keras", "keras-hub", "torch", "transformers")


def machine_description() -> dict:
    flags_line, model = "", platform.processor()
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags_line = line
    isa = [f for f in ISA_FLAGS if f" {f}" in flags_line]
    return {"cpu": model, "cores": os.cpu_count(), "isa": isa,
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
            "python": platform.python_version(), "versions": _versions(),
            "load_average_start": os.getloadavg()}


def machine_label(machine: dict) -> str:
    """The kind of machine a timing belongs to: CPU model, cores and ISA flags."""
    return f"{machine['cpu']}, {machine['cores']} cores, {', '.join(machine['isa']) or 'no AVX2'}"


def _versions() -> dict:
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions
