"""Mutants of launchers and dashboards: slots, SLURM arrays, sweep status, the wandb view."""

from __future__ import annotations

from dev.mutation_testing.mutant import Mutant

# fmt: off
MUTANTS: list[Mutant] = [
    # --- issue 21: sweeps side by side ---
    Mutant("slots_share_gpus", "launcher/slots.py",
           "gpus=tuple(gpus[i * per_job : (i + 1) * per_job]) if on_gpu else (),",
           "gpus=tuple(gpus[:per_job]) if on_gpu else (),", "every slot's job runs on the same GPUs"),
    # Killed by tests/launcher/test_sweep_reruns.py's SIGTERM test (2 slots: the jobs train on to their
    # end while the sweep waits out stop_timeout_s, so none is preempted), never by tests/ablation/
    # test_sweep_resume.py: that sweep runs at slots=auto, 1 slot on CPU, so its jobs run in the sweep's
    # own process (Hydra's basic launcher) and its SIGTERM reaches Lightning directly; pool.py is unused.
    Mutant("sweep_sigterm_not_forwarded", "launcher/pool.py",
           "        for w in workers.values():\n            _kill_group(w.proc, signal.SIGTERM)\n",
           "        pass\n", "Ctrl-C / SIGTERM to a parallel sweep leaves its jobs without a checkpoint"),
    # --- SLURM arrays (src/hydra_plugins/gptlab_launchers) and a resumed run's CSV log ---
    Mutant("slurm_max_num_timeout_prefixed", "../hydra_plugins/gptlab_launchers/submitit_array.py",
           'init[f"{executor}_max_num_timeout"] = params.pop("max_num_timeout")',
           'init[f"{executor}_max_num_timeout"] = params["max_num_timeout"]',
           "slurm_max_num_timeout reaches update_parameters: every SLURM sweep fails before sbatch"),
    Mutant("slurm_cpu_job_asks_gpus", "../hydra_plugins/gptlab_launchers/submitit_array.py",
           '            params["gpus_per_node"] = None\n', "            pass\n",
           "a CPU array asks --gpus-per-node (pends forever on a CPU partition)"),
    Mutant("slurm_usr2_not_saved", "../hydra_plugins/gptlab_launchers/submitit_array.py",
           "        if callable(self._submitit):  # only under submitit: it installed its requeue handler",
           "        if False:", "USR2 requeues at once, saving nothing: work since the last checkpoint lost"),
    Mutant("slurm_kill_signal_unread", "../hydra_plugins/gptlab_launchers/submitit_array.py",
           '            return int(sig), f"sacct: {state} {code}"', "            return None",
           "a task killed by SIGKILL reported with its stderr tail, not its signal"),
    # --- issue 31: the sweep's wandb view names only keys the runs log; its ETA ---
    Mutant("eta_divides_by_slots", "launcher/progress.py",
           "heapq.heappush(free, heapq.heappop(free) + mean)", "heapq.heappush(free, heapq.heappop(free))",
           "the ETA forgets the pending jobs' time"),
    Mutant("view_ignores_telemetry_cadence", "dashboards/keys.py",
           'on = bool(tele.get("enabled", True)) and reaches(every)', 'on = bool(tele.get("enabled", True))',
           "a run shorter than the telemetry cadence gets panels of keys it never logged"),
    # --- issue 37 §1: sweep status, progress lines, the wandb view's run set ---
    Mutant("progress_preempted_failed", "launcher/progress.py",
           '    if status == "preempted":\n        return INTERRUPTED',
           '    if status == "preempted":\n        return FAILED',
           "the sweep's own line says `job 3 FAILED` for a job its Ctrl-C stopped"),
    Mutant("progress_interrupted_uncounted", "launcher/progress.py",
           'stopped = f"{count[INTERRUPTED]} interrupted, " if count[INTERRUPTED] else ""', 'stopped = ""',
           "the sweep's counts leave the stopped jobs out (4 jobs: 2 done, 0 pending)"),
    Mutant("view_runset_grouped_by_arm", "dashboards/view.py",
           "filters=filters, groupby=[], run_settings=runs,",
           'filters=filters, groupby=[expr.Config("arm")], run_settings=runs,',
           "the run set grouped by arm: the summary run (no arm) is an extra group, its figures' panel too"),
    Mutant("view_curves_ungrouped", "dashboards/view.py",
           '                    panel.groupby = wr.Config("arm")\n', "",
           "curve panels not grouped by arm: every seed a line of its own, no mean and band"),
    Mutant("view_runs_uncolored", "dashboards/view.py",
           "runs = {rid: ws.RunSettings(color=colors[arm])"
           " for rid, arm in t.run_arms.items() if arm in colors}",
           "runs = {}", "the jobs' runs lose their arm's color (the report's figure colors)"),
    # --- issue 37 §6: launchers, spikes and the rest of rounds three and four ---
    Mutant("slots_cuda_minus_one_is_a_gpu", "../hydra_plugins/gptlab_launchers/slots_launcher.py",
           'if g.strip() and g.strip() != "-1"]', "if g.strip()]",
           "CUDA_VISIBLE_DEVICES=-1 (no GPU) read as one GPU named -1"),
    Mutant("pool_sigterm_killed_worker_not_preempted", "launcher/pool.py",
           "if code in (143, -signal.SIGTERM) else", "if code == 143 else",
           "a worker ended by SIGTERM itself (return code -15) is reported as died, not preempted"),
    Mutant("slurm_shell_signal_status_unread", "../hydra_plugins/gptlab_launchers/submitit_array.py",
           "if status.isdigit() and int(status) > 128:", "if status.isdigit() and int(status) > 255:",
           "sacct's ExitCode 137:0 (a shell's 128 + 9) is not read as SIGKILL"),
    # --- issue 38 item 4: tasks in the sweep report, the wandb view and the ladder ---
    Mutant("view_task_panel_missing", "dashboards/view.py", "        for metric in TASK_METRICS\n",
           "        for metric in TASK_METRICS[:-1]\n", "the view has no bpb panel for the tasks"),
    Mutant("view_task_named_by_path", "dashboards/keys.py", "stems = (Path(str(n).strip()).stem for n",
           "stems = (str(n).strip() for n", "a file task's keys predicted from its path, not its stem"),
    # --- issue 48 §6: the ladder, the pre-registered forecast, tiktoken's probes, the wandb view, status ---
    Mutant("view_unlogged_line_panels_kept", "dashboards/view.py",
           'return type(panel).__name__ != "LinePlot" or bool(panel.y)', "return True",
           "line panels of keys the runs never log (z-loss off, no MFU, a run shorter than the log"
           " cadence) are kept, empty"),
    # ---- L(D) per arm of a budget sweep (r7-ldfit): issue 45 items 4 and 7 ----
    Mutant("view_budget_columns_dropped", "dashboards/view.py",
           "pinned[-1:-1] = [f\"config:{key}\" for key in BRANCH_COLUMNS]", "pass",
           "the budget sweep's wandb run table does not say which run is a trunk and which a branch"),
    # ---- a short run's start-up and run-end view (r10-startup): issue 48 item 5 ----
    Mutant("view_one_jobs_config_for_all", "dashboards/source.py",
           "zip(logged, configs, strict=True)", "zip(logged, [configs[0]] * len(configs), strict=True)",
           "the config read once is the first job's for every job: a sweep's view misses keys others log"),
    Mutant("run_imports_the_sweeper", "dashboards/source.py",
           "from gptlab.dashboards.keys import RunShape, read_config, shape_of\n",
           "from gptlab.ablation.sweep_dir import read_record  # noqa: F401\n"
           "from gptlab.dashboards.keys import RunShape, read_config, shape_of\n",
           "every run imports the sweeper's modules at start-up (~10 CPU ms) for a record only sweeps have"),
]
# fmt: on
