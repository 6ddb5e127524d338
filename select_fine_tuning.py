r"""Chooses a GLUE task's fine-tuning setting as the BERT paper did: a grid of run_classifier.py
runs, the best on dev kept, and its model's test predictions.

    python select_fine_tuning.py --task_name=RTE --data_dir=$GLUE_DIR/RTE \
      --init_checkpoint=$BERT_DIR/bert_model.ckpt --learning_rates=5e-5,4e-5,3e-5,2e-5 \
      --batch_sizes=32 --epochs=3 --seeds=1,2 --output_dir=/tmp/rte_selection \
      [--processes=2] [-- more run_classifier.py flags, e.g. --max_seq_length=128]

Each run is `run_classifier.py --do_train --do_eval` in its own folder of --output_dir, named after
its setting (`lr5e-05_bs32_ep3_seed1`), with its log in `run_classifier.log`; the flags after
`--` go to every run and to the prediction (the grid's own flags are refused there). Rerunning the
command skips the finished runs and resumes an interrupted one. The report, `selection.md` and
`selection.json` in --output_dir, holds every run's dev results, mean ± sd per setting, and the
setting chosen by the paper's rule (the best dev result of any run, `selection.grid.RULE`); the
chosen run's model then predicts the test split into --output_dir/chosen (the GLUE server's
submission file). More in docs/fine-tuning.md, "Choosing the learning rate as the paper did".
"""
from __future__ import annotations

from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

import concurrent.futures
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time

from absl import flags, logging
import tensorflow as tf

from data.classifier import glue_tasks
from modeling import checkpoints
from selection import grid as selection, report as selection_report
from training.run_guards import exclusive_output_dir
from utils.json_files import read_json_object
from utils.output_files import write_text_atomically, written_together
from utils.progress import Progress, format_seconds
from utils.user_errors import UserError

RUN_CLASSIFIER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_classifier.py")
CHOSEN_DIR = "chosen"
LOG_FILE = "run_classifier.log"

FLAGS = flags.FLAGS
flags.DEFINE_string("task_name", None, "The task: " + ", ".join(glue_tasks.TASKS) + " (those "
                    "with train and dev splits).")
flags.DEFINE_string("data_dir", None, "The task's folder of .tsv files (GLUE/XNLI layout).")
flags.DEFINE_string("init_checkpoint", None, "The pretrained model every run fine-tunes.")
flags.DEFINE_string("output_dir", None, "The runs' folders, the report and chosen/.")
flags.DEFINE_list("learning_rates", ["5e-5", "4e-5", "3e-5", "2e-5"],
                  "Peak learning rates to compare (default: the paper's).")
flags.DEFINE_list("batch_sizes", ["32"], "Training batch sizes to compare (the paper: 32).")
flags.DEFINE_list("epochs", ["3"], "Numbers of training epochs to compare (the paper: 3).")
flags.DEFINE_list("seeds", ["12345"], "Seeds: each setting is run once per seed (the paper's "
                  "random restarts for small sets); the best single run is kept.")
flags.DEFINE_integer("processes", 1, "Runs at once. Each run uses all of the machine's cores (and "
                     "its GPUs), so more processes help only where there are cores to spare; "
                     "with more than one, each run gets cores / processes threads "
                     "(TF_NUM_INTRAOP_THREADS, TF_NUM_INTEROP_THREADS, OMP_NUM_THREADS, unless "
                     "set) and GPU memory as it needs it (TF_FORCE_GPU_ALLOW_GROWTH).")
flags.mark_flags_as_required(["task_name", "data_dir", "init_checkpoint", "output_dir"])


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything checked before the first run starts."""

    task: glue_tasks.GlueTask
    metric: str
    grid: selection.Grid
    runs: list[selection.Run]
    extra: list[str]
    test_splits: list[glue_tasks.SplitSpec]
    no_predictions: str | None
    vocab_file: str

    def run_dir(self, run: selection.Run) -> str:
        return os.path.join(FLAGS.output_dir, run.name)

    def record(self, run: selection.Run) -> dict:
        return selection.run_record(run, self.task, FLAGS.data_dir, FLAGS.init_checkpoint,
                                    self.extra)


def _plan(extra: list[str]) -> Plan:
    """Refuses a bad grid, task, data folder, model or output folder before any run starts."""
    grid = selection.parse_grid(FLAGS.learning_rates, FLAGS.batch_sizes, FLAGS.epochs,
                                FLAGS.seeds)
    if FLAGS.processes < 1:
        raise ValueError(f"--processes={FLAGS.processes} must be at least 1")
    selection.check_extra_flags(extra)
    language = selection.extra_flag_value(extra, "xnli_language") or "zh"
    task = selection.check_task(FLAGS.task_name, FLAGS.data_dir, language)
    test_splits, no_predictions = selection.prediction_splits(task, FLAGS.data_dir, language)
    plan = Plan(task, selection.main_metric(task), grid, grid.runs(), extra, test_splits,
                no_predictions, _vocab_file(extra))
    for run in plan.runs:
        selection.run_state(plan.run_dir(run), plan.record(run), task)
    return plan


def _vocab_file(extra: list[str]) -> str:
    """The model's vocab.txt, which the chosen model's prediction needs (a fine-tuned folder has
    none); reading the model once here also checks it before any run."""
    given = selection.extra_flag_value(extra, "vocab_file")
    loaded = checkpoints.read_model(
        FLAGS.init_checkpoint, bert_config_file=selection.extra_flag_value(extra,
                                                                           "bert_config_file"),
        vocab_file=given)
    return loaded.vocab_file


class _Children:
    """The run_classifier.py processes running, to pass a stop signal on to."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self.stopping = False

    def run(self, command: list[str], log_path: str, env: dict[str, str]) -> int:
        with open(log_path, "a", encoding="utf-8") as log:
            with self._lock:
                if self.stopping:
                    return -signal.SIGTERM
                process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                           env=env)
                self._running.add(process)
            try:
                return process.wait()
            finally:
                with self._lock:
                    self._running.discard(process)

    def stop(self) -> None:
        """SIGTERM to every run: each saves a checkpoint and ends; a rerun resumes them."""
        with self._lock:
            self.stopping = True
            running = list(self._running)
        for process in running:
            process.send_signal(signal.SIGTERM)
        for process in running:
            process.wait()


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    if FLAGS.processes > 1:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
            os.cpu_count() or 1
        share = str(max(1, cores // FLAGS.processes))
        for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
            env.setdefault(name, share)
        env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    return env


def _failure(what: str, code: int, log_path: str) -> UserError:
    """The error of a failed run: its own `error:` line, or its log's last line."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    last = errors[-1] if errors else (lines[-1] if lines else "no output")
    return UserError(f"{what}: run_classifier.py failed (status {code}): {last} (log: {log_path})")


def _train(plan: Plan, run: selection.Run, number: str,
           children: _Children) -> dict[str, float]:
    run_dir = plan.run_dir(run)
    os.makedirs(run_dir, exist_ok=True)
    write_text_atomically(os.path.join(run_dir, selection.RECORD_FILE),
                          json.dumps(plan.record(run), indent=2) + "\n")
    log_path = os.path.join(run_dir, LOG_FILE)
    command = [sys.executable, RUN_CLASSIFIER, f"--task_name={plan.task.name}",
               f"--data_dir={FLAGS.data_dir}", f"--init_checkpoint={FLAGS.init_checkpoint}",
               f"--output_dir={run_dir}", "--do_train", "--do_eval", *run.flags(), *plan.extra]
    logging.info("run %s (%s): training, log in %s", number, run.label(), log_path)
    code = children.run(command, log_path, _child_env())
    results = selection.read_dev_results(plan.task, run_dir)
    if code or results is None:
        raise _failure(f"run {run.name}", code, log_path)
    return results


def _run_grid(plan: Plan) -> list[tuple[selection.Run, dict[str, float]]]:
    """Runs the runs not finished yet, --processes at a time, with a progress line per run."""
    number = {run.name: i for i, run in enumerate(plan.runs, start=1)}
    results, pending = {}, []
    for run in plan.runs:
        if selection.run_state(plan.run_dir(run), plan.record(run), plan.task) == "finished":
            results[run.name] = selection.read_dev_results(plan.task, plan.run_dir(run))
            logging.info("run %d/%d (%s): finished before, dev %s = %s; skipped",
                         number[run.name], len(plan.runs), run.label(), plan.metric,
                         results[run.name].get(plan.metric))
        else:
            pending.append(run)
    progress = Progress("runs", total=len(pending), interval=float("inf"))
    children = _Children()
    with concurrent.futures.ThreadPoolExecutor(FLAGS.processes) as pool:
        started = {}
        for run in pending:
            started[pool.submit(_timed, _train, plan, run,
                                f"{number[run.name]}/{len(plan.runs)}", children)] = run
        try:
            for future in concurrent.futures.as_completed(started):
                run = started[future]
                results[run.name], seconds = future.result()
                progress.update()
                eta = progress.eta()
                logging.info("run %d/%d (%s): dev %s = %s in %s; %d/%d runs done, elapsed %s, "
                             "ETA %s", number[run.name], len(plan.runs), run.label(),
                             plan.metric, results[run.name].get(plan.metric),
                             format_seconds(seconds), progress.count, progress.total,
                             format_seconds(progress.elapsed()),
                             format_seconds(eta) if eta is not None else "-")
                _write_report(plan, _in_grid_order(plan, results), None)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            children.stop()
            raise
    return _in_grid_order(plan, results)


def _timed(function, *args):
    start = time.monotonic()
    return function(*args), time.monotonic() - start


def _in_grid_order(plan: Plan, results: dict) -> list[tuple[selection.Run, dict[str, float]]]:
    return [(run, results[run.name]) for run in plan.runs if run.name in results]


def _predict(plan: Plan, chosen: selection.Run | None) -> dict | None:
    """The chosen model's test predictions in --output_dir/chosen (skipped when made before)."""
    if plan.no_predictions:
        logging.info("%s", plan.no_predictions)
        return {"note": plan.no_predictions}
    if chosen is None:
        return None
    output_dir = os.path.join(FLAGS.output_dir, CHOSEN_DIR)
    model = os.path.join(plan.run_dir(chosen), "model.ckpt")
    record = {"run": chosen.name, "init_checkpoint": model, "extra_flags": plan.extra}
    files = [name for spec in plan.test_splits
             for name in (spec.submission_file, f"test_results{spec.results_suffix}.tsv")]
    done = {"output_dir": output_dir, "files": files}
    record_path = os.path.join(output_dir, selection.RECORD_FILE)
    if os.path.isfile(record_path) and read_json_object(record_path) == record and all(
            os.path.isfile(os.path.join(output_dir, name)) for name in files):
        logging.info("test predictions of run %s: made before, in %s", chosen.name, output_dir)
        return done
    os.makedirs(output_dir, exist_ok=True)
    # A fine-tuned folder has no vocab.txt: the model's files are named (the user's, if given).
    model_files = {"vocab_file": plan.vocab_file,
                   "bert_config_file": os.path.join(plan.run_dir(chosen), "bert_config.json")}
    command = [sys.executable, RUN_CLASSIFIER, f"--task_name={plan.task.name}",
               f"--data_dir={FLAGS.data_dir}", f"--init_checkpoint={model}",
               f"--output_dir={output_dir}", "--do_predict",
               *(f"--{name}={path}" for name, path in model_files.items()
                 if not selection.extra_flag_value(plan.extra, name)), *plan.extra]
    log_path = os.path.join(output_dir, LOG_FILE)
    logging.info("test predictions of run %s into %s", chosen.name, output_dir)
    children = _Children()
    try:
        code = children.run(command, log_path, dict(os.environ))
    except BaseException:
        children.stop()
        raise
    if code:
        raise _failure("test predictions", code, log_path)
    write_text_atomically(record_path, json.dumps(record, indent=2) + "\n")
    return done


def _write_report(plan: Plan, results, predictions: dict | None) -> dict:
    chosen = selection.choose(results, plan.metric)
    report = selection_report.build_report(
        plan.task.name, plan.metric, plan.grid, results, chosen,
        {run.name: plan.run_dir(run) for run in plan.runs}, predictions)
    with written_together():
        write_text_atomically(os.path.join(FLAGS.output_dir, "selection.json"),
                              json.dumps(report, indent=2) + "\n")
        write_text_atomically(os.path.join(FLAGS.output_dir, "selection.md"),
                              selection_report.report_markdown(report))
    return report


def main(argv):
    # This process reads files and starts the runs; the runs have the GPUs.
    tf.config.set_visible_devices([], "GPU")
    plan = _plan(argv[1:])
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    with exclusive_output_dir(FLAGS.output_dir):
        logging.info("%d runs of %s (%d settings x %d seeds), choosing on dev %s",
                     len(plan.runs), plan.task.name, len(plan.runs) // len(plan.grid.seeds),
                     len(plan.grid.seeds), plan.metric)
        results = _run_grid(plan)
        chosen = selection.choose(results, plan.metric)
        predictions = _predict(plan, chosen[0] if chosen else None)
        _write_report(plan, results, predictions)
    if chosen is None:
        raise UserError(f"no run has a dev {plan.metric} that is a number; see "
                        f"{FLAGS.output_dir}/selection.md")
    logging.info("chosen: %s (run %s), dev %s = %s; report in %s/selection.md",
                 chosen[0].setting.label(), chosen[0].name, plan.metric,
                 chosen[1][plan.metric], FLAGS.output_dir)


if __name__ == "__main__":
    entry_point.run(main)
