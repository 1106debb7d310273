"""A fake SLURM on one machine: sbatch, srun, sacct, squeue, scancel and scontrol as commands on PATH.

It does what submitit and gptlab ask of SLURM, the way SLURM does it:
- `sbatch <script>` reads the script's `#SBATCH` lines, prints "Submitted batch job <id>" and runs the
  script once per array index (`--array=0-7%4`: four at a time) in the background, each with SLURM's
  variables (SLURM_JOB_ID, SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID, SLURM_NTASKS, SLURM_JOB_NAME, ...)
  and its output appended to `--output` / `--error` (%A %a %j expanded).
- `srun [--output F --error F ...] cmd` starts SLURM_NTASKS copies of cmd (SLURM_PROCID / LOCALID
  set, %t expanded) and forwards the signals it gets to them, as srun does.
- `sacct -o JobID,State,NodeList,ExitCode --parsable2 [-n] -j <id>` prints each array task's line;
  ExitCode is `<status>:<signal>`: a task whose step was killed by signal 9 reads `FAILED|0:9`.
- `scancel [--signal=SIG] <id>` signals a task's step processes, or without --signal cancels the task.
- `scontrol requeue <id>` puts a running task back in the queue: it runs again (SLURM_RESTART_COUNT
  + 1) once its process exits. Refused for a job without `--requeue` when the cluster's JobRequeue is
  0 (FAKE_SLURM_JOB_REQUEUE=0), as SLURM refuses it.
- `squeue -h [-j <id>]` lists tasks not finished.
State lives in $FAKE_SLURM_DIR (tasks/<id>.json); every submitted script is kept as sbatch/<id>.sh.
The nodes are this machine: only `--nodes=1` is accepted.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

COMMANDS = ("sbatch", "srun", "sacct", "squeue", "scancel", "scontrol")
FINISHED = ("COMPLETED", "FAILED", "CANCELLED")
NODE = "localhost"


def state_dir() -> Path:
    return Path(os.environ["FAKE_SLURM_DIR"])


@contextmanager
def locked() -> Iterator[None]:
    """One writer at a time: the scheduler, srun, scontrol and scancel all update task files."""
    state_dir().mkdir(parents=True, exist_ok=True)
    with open(state_dir() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def next_id() -> int:
    with locked():
        path = state_dir() / "next_id"
        n = int(path.read_text()) if path.exists() else 4200
        path.write_text(str(n + 1))
        return n


def task_path(key: str) -> Path:
    return state_dir() / "tasks" / f"{key}.json"


def read_task(key: str) -> dict[str, Any]:
    return json.loads(task_path(key).read_text())


def update_task(key: str, **fields: Any) -> dict[str, Any]:
    with locked():
        path = task_path(key)
        task = json.loads(path.read_text()) if path.exists() else {}
        task.update(fields)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(task))
        tmp.replace(path)
        return task


def tasks_of(job_id: str) -> list[str]:
    """Task keys for `<array id>` (every task) or `<array id>_<index>` (one)."""
    keys = sorted(p.stem for p in (state_dir() / "tasks").glob("*.json"))
    return [k for k in keys if k == job_id or k.split("_")[0] == job_id]


# --- sbatch -------------------------------------------------------------------------------------------


def sbatch_flags(words: list[str]) -> dict[str, str | bool]:
    """`--key=value`, `--key value` and bare `--flag` words as a dict."""
    flags: dict[str, str | bool] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            key, eq, value = word[2:].partition("=")
            if eq:
                flags[key] = value
            elif i + 1 < len(words) and not words[i + 1].startswith("-"):
                flags[key] = words[i + 1]
                i += 1
            else:
                flags[key] = True
        i += 1
    return flags


def script_flags(script: str) -> dict[str, str | bool]:
    words: list[str] = []
    for line in script.splitlines():
        if line.startswith("#SBATCH"):
            words += shlex.split(line[len("#SBATCH") :])
    return sbatch_flags(words)


def sbatch(args: list[str]) -> int:
    script_file = Path(args[-1])
    text = script_file.read_text()
    flags = {**script_flags(text), **sbatch_flags(args[:-1])}
    if str(flags.get("nodes", "1")) != "1":
        print(f"sbatch: error: the fake cluster has one node; --nodes={flags['nodes']}", file=sys.stderr)
        return 1
    job = next_id()
    kept = state_dir() / "sbatch" / f"{job}.sh"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(text)
    (state_dir() / "sbatch" / f"{job}.json").write_text(json.dumps({"flags": flags, "cwd": os.getcwd()}))
    indices, parallel = [None], 1
    if "array" in flags:
        spec, _, limit = str(flags["array"]).partition("%")
        first, _, last = spec.partition("-")
        indices = list(range(int(first), int(last or first) + 1))
        parallel = int(limit) if limit else len(indices)
    for index in indices:
        key = str(job) if index is None else f"{job}_{index}"
        update_task(key, state="PENDING", exit_code="0:0", restarts=0, requeue=False, job=job, index=index)
    log = open(state_dir() / "sbatch" / f"{job}.scheduler.log", "w")  # noqa: SIM115 - the child keeps it
    subprocess.Popen(
        [sys.executable, __file__, "_schedule", str(job), str(parallel)],
        start_new_session=True, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=os.environ.copy(),
    )  # fmt: skip
    print(f"Submitted batch job {job}")
    return 0


def expand(pattern: str, env: dict[str, str], rank: int | None = None) -> str:
    out = pattern.replace("%A", env.get("SLURM_ARRAY_JOB_ID", env["SLURM_JOB_ID"]))
    out = out.replace("%a", env.get("SLURM_ARRAY_TASK_ID", "0")).replace("%j", env["SLURM_JOB_ID"])
    return out if rank is None else out.replace("%t", str(rank))


def schedule(job: int, parallel: int) -> None:
    """Run the array's tasks, `parallel` at a time; a requeued task goes back to the end of the queue."""
    meta = json.loads((state_dir() / "sbatch" / f"{job}.json").read_text())
    flags, script = meta["flags"], state_dir() / "sbatch" / f"{job}.sh"
    pending = tasks_of(str(job))
    running: dict[str, subprocess.Popen] = {}
    while pending or running:
        while pending and len(running) < parallel:
            key = pending.pop(0)
            if read_task(key)["state"] == "CANCELLED":
                continue
            running[key] = start_task(key, flags, script, meta["cwd"])
        for key, proc in list(running.items()):
            if proc.poll() is None:
                continue
            del running[key]
            if end_task(key, proc.returncode):
                pending.append(key)
        time.sleep(0.1)


def start_task(key: str, flags: dict[str, Any], script: Path, cwd: str) -> subprocess.Popen:
    task = read_task(key)
    tasks_per_node = int(flags.get("ntasks-per-node", 1))
    env = {
        **os.environ,
        # an array task has an id of its own; a plain job's is the one sbatch printed
        "SLURM_JOB_ID": str(task["job"]) if task["index"] is None else str(next_id()),
        "SLURM_JOB_NAME": str(flags.get("job-name", script.name)),
        "SLURM_NTASKS": str(tasks_per_node),
        "SLURM_NTASKS_PER_NODE": str(tasks_per_node),
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_NNODES": "1",
        "SLURM_NODEID": "0",
        "SLURM_JOB_NODELIST": NODE,
        "SLURM_NODELIST": NODE,
        "SLURM_SUBMIT_DIR": cwd,
        "SLURM_RESTART_COUNT": str(task["restarts"]),
        "SLURM_TASK_KEY": key,  # the fake's own: which task file srun updates
    }
    if task["index"] is not None:
        env.update(SLURM_ARRAY_JOB_ID=str(task["job"]), SLURM_ARRAY_TASK_ID=str(task["index"]))
    if "cpus-per-task" in flags:
        env["SLURM_CPUS_PER_TASK"] = str(flags["cpus-per-task"])
    mode = "a" if flags.get("open-mode") == "append" else "w"
    out = open(expand(str(flags.get("output", "slurm-%j.out")), env), mode)  # noqa: SIM115
    err = open(expand(str(flags["error"]), env), mode) if "error" in flags else out  # noqa: SIM115
    proc = subprocess.Popen(
        ["bash", str(script)], cwd=cwd, env=env, stdout=out, stderr=err, start_new_session=True
    )
    update_task(key, state="RUNNING", batch_pid=proc.pid, step_pids=[], step_signal=None)
    return proc


def end_task(key: str, returncode: int) -> bool:
    """Record how the task ended; True when it was requeued (it goes back to the queue)."""
    task = read_task(key)
    if task.get("requeue"):
        update_task(key, state="PENDING", requeue=False, restarts=task["restarts"] + 1, step_pids=[])
        return True
    if task["state"] == "CANCELLED":
        return False
    if task.get("step_signal"):
        update_task(key, state="FAILED", exit_code=f"0:{task['step_signal']}")
    elif returncode == 0:
        update_task(key, state="COMPLETED", exit_code="0:0")
    elif returncode < 0:
        update_task(key, state="FAILED", exit_code=f"0:{-returncode}")
    else:
        update_task(key, state="FAILED", exit_code=f"{returncode}:0")
    return False


# --- srun ---------------------------------------------------------------------------------------------

SRUN_VALUED = {"--output", "-o", "--error", "-e", "--ntasks", "-n", "--cpus-per-task", "-c", "--nodes", "-N"}


def srun(args: list[str]) -> int:
    opts: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        word = args[i]
        if "=" in word:
            key, value = word.split("=", 1)
            opts[key] = value
        elif word in SRUN_VALUED:
            opts[word] = args[i + 1]
            i += 1
        i += 1
    command = args[i:]
    env = dict(os.environ)
    ntasks = int(opts.get("--ntasks", opts.get("-n", env.get("SLURM_NTASKS", "1"))))
    procs = []
    for rank in range(ntasks):
        rank_env = {**env, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank), "SLURM_STEP_ID": "0"}
        out_pattern = opts.get("--output", opts.get("-o"))
        err_pattern = opts.get("--error", opts.get("-e"))
        out = open(expand(out_pattern, env, rank), "a") if out_pattern else None  # noqa: SIM115
        err = open(expand(err_pattern, env, rank), "a") if err_pattern else out  # noqa: SIM115
        procs.append(subprocess.Popen(command, env=rank_env, stdout=out, stderr=err))
    key = env.get("SLURM_TASK_KEY")
    if key:
        update_task(key, step_pids=[p.pid for p in procs])

    def forward(signum: int, _frame: Any) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT, signal.SIGCONT):
        signal.signal(s, forward)
    codes = [p.wait() for p in procs]
    killed = [-c for c in codes if c < 0]
    if killed and key:
        update_task(key, step_signal=killed[0])
    if killed:
        return 128 + killed[0]
    return next((c for c in codes if c != 0), 0)


# --- sacct, squeue, scancel, scontrol -------------------------------------------------------------------


def sacct(args: list[str]) -> int:
    fields, ids, header = ["JobID", "State"], [], True
    i = 0
    while i < len(args):
        word = args[i]
        if word in ("-o", "--format"):
            fields = args[i + 1].split(",")
            i += 1
        elif word.startswith("--format="):
            fields = word.split("=", 1)[1].split(",")
        elif word in ("-j", "--jobs"):
            ids += args[i + 1].split(",")
            i += 1
        elif word in ("-n", "--noheader"):
            header = False
        i += 1
    if header:
        print("|".join(fields))
    for job_id in ids:
        for key in tasks_of(job_id):
            task = read_task(key)
            values = {
                "JobID": key,
                "State": task["state"],
                "ExitCode": task["exit_code"],
                "NodeList": "None assigned" if task["state"] == "PENDING" else NODE,
            }
            print("|".join(values.get(f, "") for f in fields))
    return 0


def squeue(args: list[str]) -> int:
    ids = [a for i, a in enumerate(args) if i > 0 and args[i - 1] in ("-j", "--jobs")]
    keys = [k for j in ids for k in tasks_of(j)] if ids else tasks_of_all()
    if "-h" not in args and "--noheader" not in args:
        print("JOBID STATE")
    for key in keys:
        state = read_task(key)["state"]
        if state not in FINISHED:
            print(f"{key} {state}")
    return 0


def tasks_of_all() -> list[str]:
    return sorted(p.stem for p in (state_dir() / "tasks").glob("*.json"))


def parse_signal(name: str) -> int:
    name = name.upper()
    if name.isdigit():
        return int(name)
    return int(getattr(signal, name if name.startswith("SIG") else f"SIG{name}"))


def scancel(args: list[str]) -> int:
    signum, ids = None, []
    i = 0
    while i < len(args):
        word = args[i]
        if word.startswith("--signal="):
            signum = parse_signal(word.split("=", 1)[1])
        elif word in ("--signal", "-s"):
            signum = parse_signal(args[i + 1])
            i += 1
        else:
            ids.append(word)
        i += 1
    for job_id in ids:
        for key in tasks_of(job_id):
            task = read_task(key)
            if task["state"] != "RUNNING":
                if signum is None and task["state"] == "PENDING":
                    update_task(key, state="CANCELLED")
                continue
            if signum is not None:  # like scancel --signal: to the job steps (srun forwards it)
                for pid in task.get("step_pids") or []:
                    _kill(pid, signum)
            else:
                update_task(key, state="CANCELLED", exit_code="0:15")
                _kill(-task["batch_pid"], signal.SIGTERM)
    return 0


def scontrol(args: list[str]) -> int:
    if len(args) != 2 or args[0] != "requeue":
        print(f"scontrol: the fake knows only `scontrol requeue <id>`, not {args}", file=sys.stderr)
        return 1
    for key in tasks_of(args[1]):
        task = read_task(key)
        flags = json.loads((state_dir() / "sbatch" / f"{task['job']}.json").read_text())["flags"]
        allowed = "requeue" in flags or (
            "no-requeue" not in flags and os.environ.get("FAKE_SLURM_JOB_REQUEUE", "1") == "1"
        )
        if not allowed:
            print(f"Requested operation is presently disabled for job {key}", file=sys.stderr)
            return 1
        update_task(key, requeue=True)
    return 0


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def install(bin_dir: Path) -> Path:
    """Write the six commands into bin_dir (put it first on PATH, set FAKE_SLURM_DIR)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS:
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" {name} "$@"\n')
        path.chmod(0o755)
    return bin_dir


def main() -> int:
    name, args = sys.argv[1], sys.argv[2:]
    if name == "_schedule":  # the scheduler outlives sbatch: a hang-up is not its end
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        schedule(int(args[0]), int(args[1]))
        return 0
    return {"sbatch": sbatch, "srun": srun, "sacct": sacct, "squeue": squeue, "scancel": scancel}.get(
        name, scontrol
    )(args)


if __name__ == "__main__":
    sys.exit(main())
