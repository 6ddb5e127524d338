"""What the benchmarks share: where the repository, the shared data and the results are, the
machine a run is on, progress lines, commands and worker processes, results files, and the flags
that several benchmarks spell the same way.

Every benchmark runs as a module from the repository root (`python -m bench.<topic>.<name>`), so
that the project's packages import as they are, with no change to `sys.path`, and starts its own
processes the same way, in `REPO_ROOT`. Its flags are absl's and it runs through
`utils.entry_point`, as the scripts do; it defines them in its `define_flags()`, called only where
it runs as the main module: benchmarks import each other's functions, and the tests import them
all into one process, where a flag defined twice would be an error.
"""
from __future__ import annotations

from importlib import metadata
import json
import multiprocessing
import os
import pathlib
import platform
import subprocess
import time
from typing import Any, Callable, Sequence

from absl import flags

from utils.output_files import write_text_atomically

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
# The original code's outputs and the real public data, beside the repository.
SHARED = REPO_ROOT.parent / "shared"

# The CPU features that decide which kernels run (AMX and AVX-512 bfloat16 above all).
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16")
PACKAGES = ("tensorflow", "keras", "keras-hub", "torch", "transformers")


def shared_data_dir() -> str:
    """The real public data: `$BERT_SHARED_DATA`, else ../shared/data."""
    return os.environ.get("BERT_SHARED_DATA", str(SHARED / "data"))


def results_dir(benchmark: str) -> str:
    """bench/results/<benchmark>/, where a benchmark writes its results unless told otherwise."""
    return str(REPO_ROOT / "bench" / "results" / benchmark)


# ---------------------------------------------------------------------------------------------
# The machine.

def isa_flags(names: tuple[str, ...] = ISA_FLAGS) -> list[str]:
    """Those of `names` that the CPU has (its /proc/cpuinfo flags), in the order of `names`."""
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags_line = next((line for line in f if line.startswith("flags")), "")
    return [name for name in names if f" {name}" in flags_line]


def machine_description() -> dict:
    """What a benchmark ran on: the CPU and its ISA flags, cores, memory, library versions."""
    model = platform.processor()
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        model = next((line.split(":", 1)[1].strip() for line in f
                      if line.startswith("model name")), model)
    return {"cpu": model, "cores": os.cpu_count(), "isa": isa_flags(),
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


# ---------------------------------------------------------------------------------------------
# Progress and commands.

def log(message: str) -> None:
    """Prints a progress line with the time."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run_logged(command: list[str], log_path: str) -> float:
    """Runs a command in the repository root with its output in `log_path`; returns its wall
    time, and fails with the log's end if the command fails."""
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as output:
        code = subprocess.run(command, cwd=REPO_ROOT, stdout=output, stderr=subprocess.STDOUT,
                              check=False).returncode
    if code:
        with open(log_path, encoding="utf-8") as output:
            tail = output.read()[-3000:]
        raise RuntimeError(f"{' '.join(command[:3])} ... failed ({code}); log {log_path}:\n{tail}")
    return time.monotonic() - start


class SpawnedProcess:
    """The driver's end of a spawned process that answers messages over a pipe: a message is a
    tuple, a reply a dict, `{"error": traceback}` where the process failed on the message;
    ("stop",) ends the process. Its own process keeps a library's threads, settings and memory
    apart from the driver's and from the other sides'."""

    def __init__(self, name: str, target: Callable, args: tuple = ()):
        """`target(connection, *args)` serves the messages in the new process."""
        self.name = name
        self._target, self._args = target, args
        self.start()

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=self._target, args=(child, *self._args),
                                       daemon=True)
        self.process.start()

    def ask(self, *message) -> dict:
        self.connection.send(message)
        reply = self.connection.recv()
        if "error" in reply:
            raise RuntimeError(f"{self.name} failed on {message[0]}:\n{reply['error']}")
        return reply

    def stop(self) -> None:
        if self.process.is_alive():
            self.connection.send(("stop",))
        self.process.join(timeout=60)


# ---------------------------------------------------------------------------------------------
# Results files.

def read_json(path: str, default: Any) -> Any:
    """The JSON value in `path`, or `default` where there is no such file (a first run)."""
    if not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_text(path: str, text: str) -> None:
    """`text` written whole or not at all into `path`, its folder made if missing."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_text_atomically(path, text)


def write_json(path: str, value: Any, sort_keys: bool = False) -> None:
    """`value` as JSON (one-space indents, a final newline) by `write_text`."""
    write_text(path, json.dumps(value, indent=1, sort_keys=sort_keys) + "\n")


def write_report(stem: str, results: dict, markdown: str, sort_keys: bool = False) -> None:
    """A benchmark's results as `<stem>.json` and their report as `<stem>.md`."""
    write_json(stem + ".json", results, sort_keys)
    write_text(stem + ".md", markdown)


# ---------------------------------------------------------------------------------------------
# Flags that several benchmarks share.

def define_shared_data_flag() -> None:
    """--shared_data: the real public data."""
    flags.DEFINE_string("shared_data", shared_data_dir(),
                        "The real public data (default: $BERT_SHARED_DATA, else ../shared/data).")


def define_output_dir_flag(benchmark: str, what: str) -> None:
    """--output_dir: where `what` go, bench/results/<benchmark>/ by default."""
    flags.DEFINE_string("output_dir", results_dir(benchmark), f"Where {what} go.")


def define_list_flag(name: str, default: list[str] | None, choices: Sequence[str],
                     help_text: str) -> None:
    """A comma-separated flag whose every value must be one of `choices`."""
    flags.DEFINE_list(name, default, f"{help_text} Among {', '.join(choices)}.")
    flags.register_validator(name, lambda values: not values or set(values) <= set(choices),
                             message=f"each among {', '.join(choices)}")


def define_integers_flag(name: str, default: list[int], help_text: str) -> None:
    """A comma-separated flag of integers (their strings: `int` them where read)."""
    flags.DEFINE_list(name, [str(value) for value in default], help_text)
    flags.register_validator(name, lambda values: all(v.isdigit() for v in values),
                             message="a comma-separated list of integers")


def define_report_only_flag() -> None:
    """--report_only: the report written again from the results there are, nothing measured."""
    flags.DEFINE_bool("report_only", False, "Only write the report again from the results "
                      "there are; measure nothing.")
