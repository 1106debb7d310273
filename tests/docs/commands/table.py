# ruff: noqa: E501  (the table keys are the documented commands, as long as the docs write them)
"""COMMANDS maps each documented command (normalised: `$ ` prompt, comment and line continuations
removed, whitespace collapsed) to one of
  * `tests/<path>::<test>`: the test that runs it (in tests/docs/commands/ as the docs write it, shrunk;
    elsewhere the same entry point and options, plus tiny sizes);
  * `not runnable here: <why>` (GPU, 8 devices, several nodes, SLURM, the network, hours), naming the
    shrunk equivalent that is run instead where one exists;
  * `template: <why>`: a pattern with placeholders, not a command (its instances are listed).
`test_table.py::test_every_documented_command_is_in_the_table` parses the docs and fails on a command
that is not in COMMANDS (and on an entry whose command no longer appears), so a newly documented
command must come with its test.
"""

from __future__ import annotations

GPU = "not runnable here: needs GPUs"

COMMANDS: dict[str, str] = {
    # docs/moe.md (issue 47)
    "python train.py model/ffn=moe": "tests/training/test_moe_run.py::test_moe_trains_and_the_bias_follows_the_rule",
    "python train.py model/ffn=moe model.moe.balance=bias": "tests/training/test_moe_run.py::test_moe_trains_and_the_bias_follows_the_rule",
    "python -m gptlab.analysis.params model=olmoe_1b_7b": "tests/model/test_moe_anchors.py::test_total_and_active_match_the_published_counts",
    # docs/moe.md, "Hugging Face" (issue 47 item 7): the chain, with tiny sizes, in one test
    "python train.py model/ffn=moe model.qk_norm=true model.qk_norm_scope=full model.moe.norm_topk=false hydra.run.dir=outputs/olmoe-demo": "tests/training/test_moe_hf_run.py::test_documented_moe_export_chain",
    "python scripts/export.py ckpt_path=outputs/olmoe-demo/checkpoints/last.ckpt out_dir=outputs/olmoe-demo/hf": "tests/training/test_moe_hf_run.py::test_documented_moe_export_chain",
    "python train.py model/ffn=moe model.init_from=outputs/olmoe-demo/hf hydra.run.dir=outputs/olmoe-demo-ft": "tests/training/test_moe_hf_run.py::test_documented_moe_export_chain",
    # docs/performance.md, "Planning a GPU run" (issue 22)
    "python scripts/plan.py model=llama_350m model.vocab_size=32000 model.block_size=2048 trainer=fsdp trainer.devices=8 plan.gpu=H100 plan.tokens=10e9": "tests/planning/test_plan_cli.py::test_a_plan_is_printed",
    "python scripts/plan.py trainer.precision=32-true model.activation_checkpointing=none plan.gpu=H200": "tests/planning/test_plan_cli.py::test_documented_checkpointing_numbers",
    "python scripts/plan.py trainer.precision=32-true model.activation_checkpointing=full plan.gpu=H200": "tests/planning/test_plan_cli.py::test_documented_checkpointing_numbers",
    "python scripts/plan.py trainer.precision=32-true model.activation_checkpointing=selective plan.gpu=H200": "tests/planning/test_plan_cli.py::test_documented_checkpointing_numbers",
    "python scripts/plan.py model=llama_350m model.vocab_size=32000 model.block_size=2048 data.batch_size=16 optim=adamw plan.gpu=H100": "not runnable here: a 350M model's fake step, ~50 s on the loaded 2-core machine (the same entry point and options at tiny size: tests/planning/test_plan_cli.py::test_a_plan_is_printed; the optimizer state it plans against the built optimizer's: tests/planning/test_planner.py::test_planned_optimizer_state_is_the_built_optimizers)",
    "python scripts/plan.py model=llama_350m model.vocab_size=32000 model.block_size=2048 data.batch_size=16 optim=muon plan.gpu=H100": "not runnable here: a 350M model's fake step, ~90 s on the loaded 2-core machine (the same entry point and options at tiny size: tests/planning/test_plan_cli.py::test_a_muon_plan_names_its_optimizer_and_fsdp_is_refused; the optimizer state it plans against the built optimizer's: tests/planning/test_planner.py::test_planned_optimizer_state_is_the_built_optimizers)",
    "scripts/gpu_check.sh": f"{GPU} (one GPU; its CPU dry run: tests/bench/test_gpu_check.py)",
    "bash scripts/gpu_check.sh": f"{GPU} (one lent GPU, .whl carried; its CPU dry run: tests/bench/test_gpu_check.py; its wheels in the image's venv: tests/test_gpu_wheels.py)",
    "make gpu-wheels": "tests/test_gpu_wheels.py::test_wheels_plus_image_packages_run_the_check (dev/gpu_wheels.py's download)",
    "python -m gptlab.bench.gpu_check": f"{GPU} (its CPU dry run: tests/bench/test_gpu_check.py)",
    "python -m gptlab.bench.gpu_check --dry-run": "tests/bench/test_gpu_check.py::test_dry_run_writes_every_section_and_the_table_matches_the_json",
    "python scripts/plan.py --table": "not runnable here: 20 rows of micro-batch searches on fake tensors, ~11 CPU min (18 of the rows took 518 CPU s on 2026-12-06); each row re-derived from the paper's formula in tests/docs/test_sizing_table.py (its formatting: tests/planning/test_plan_cli.py::test_table_rows_format; each row's search is largest_micro_batch, tests/planning/test_planner.py)",
    # docs/ablations.md, the claims re-run through the slots launcher (issue 21)
    "python train.py -m experiment=ablate_tying hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: 30 jobs, 610 s (its quick sibling with the same launcher settings: tests/launcher/test_parallel_sweeps.py::test_two_slots_match_the_serial_sweep_job_for_job; ablate_tying itself shrunk: test_ablate_tying_and_init)",
    "python train.py -m experiment=ablate_tying model/tying=untied optim.lr=0.00234": "not runnable here: 3 jobs of ~45 s (ablate_tying shrunk: test_ablate_tying_and_init)",
    # docs/ablations.md, "Ladders" (issue 24)
    "python train.py -m experiment=ladder_ffn hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: 72 jobs, 990 s on the loaded 2-core machine (its quick sibling through the same sweeper and launcher: tests/ablation/test_ladder_sweep.py::test_quick_ladder_runs_through_the_slots_launcher_and_reports_a_fit)",
    # docs/mup.md and docs/ablations.md (issue 32)
    "python train.py model/parametrization=mup model.mup_base_width=32": "tests/model/test_mup.py::test_a_mup_run_trains_end_to_end_through_lightning",
    "python train.py model/parametrization=completep model.mup_base_width=32 model.mup_base_depth=2": "tests/model/test_completep.py::test_a_completep_run_trains_end_to_end_through_lightning",
    # docs/architecture.md, "Attention heads" (issue 39)
    "python train.py model.attn_gate=headwise": "tests/training/test_attention_axes_run.py::test_train_py_trains_each_attention_switch",
    "python train.py model.pos_emb=none": "tests/training/test_attention_axes_run.py::test_train_py_trains_each_attention_switch",
    "python train.py model.rope_fraction=0.5": "tests/training/test_attention_axes_run.py::test_train_py_trains_each_attention_switch",
    "python train.py model.attn_softcap=50 model.logit_softcap=30": "tests/training/test_attention_axes_run.py::test_train_py_trains_each_attention_switch",
    "python train.py model.window=32 model.window_pattern=SSSL": "tests/training/test_windows_run.py::test_train_py_trains_windows_and_document_masks",
    "python train.py data.document_mask=true": "tests/training/test_windows_run.py::test_train_py_trains_windows_and_document_masks",
    "python train.py model/attention=gqa model.n_kv_head=2": "tests/model/test_gqa.py::test_train_py_trains_the_default_model_with_grouped_query_attention",
    "python -m gptlab.analysis.params model=llama_7b model/attention=gqa model.n_kv_head=8": "tests/model/test_param_report.py::test_cli_counts_grouped_query_attention",
    "python train.py -m experiment=ablate_attention hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: 45 jobs, 1,453 s (its quick sibling through the same sweeper and report: tests/model/test_gqa.py::test_ablate_attention_quick_runs_and_reports_both_arms)",
    "python scripts/depth_check.py": "tests/model/test_completep.py::test_the_depth_check_script_prints_slopes_and_refuses_bad_depths (2 depths, width 32, 1 seed)",
    "python train.py -m experiment=ladder_ffn_completep hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: 120 jobs, ~12 min on 2 cores (the same command shrunk: tests/ablation/test_ladder_sweep.py::test_the_mup_ladder_runs_shrunk_with_one_lr_grid_and_fixed_width_heads)",
    "python scripts/coord_check.py": "tests/model/test_coord_check.py::test_cli_writes_the_figure_and_the_slopes",
    "python scripts/report.py multirun/heldout/ladder_ffn_5": "tests/docs/commands/test_sweeps.py::test_ablate_ffn_through_make_sweep_and_report",
    "python scripts/ladder_forecast.py <sweep dir> <N>": "template: a sweep directory and a size; its instance below is run",
    "python scripts/ladder_forecast.py multirun/heldout/ladder_ffn_4 3542208": "tests/analysis/test_ladder_held_out.py::test_the_forecast_recorded_before_a_rung_runs_is_the_held_out_sections_forecast",
    "python train.py -m experiment=ladder_ffn hydra.sweeper.ladder.widths=[24,48,72,96,192] hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: the 18 jobs of d = 192 take ~45 min on 2 cores (the 5-rung sweep with its other rungs' jobs in place; the quick ladder through the same sweeper and launcher: tests/ablation/test_ladder_sweep.py)",
    "python train.py -m experiment=ladder_ffn_mup hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: 120 jobs, 11 min 42 s on 2 cores (the same command shrunk to 2 rungs, 1 arm, 1 seed, 2 LRs, 6 steps, one slot: tests/ablation/test_ladder_sweep.py::test_the_mup_ladder_runs_shrunk_with_one_lr_grid_and_fixed_width_heads)",
    "python scripts/ladder_forecast.py multirun/ladder_ffn_mup 3542208": "tests/analysis/test_ladder_held_out.py::test_the_forecast_recorded_before_a_rung_runs_is_the_held_out_sections_forecast (the same script on a hand-made ladder)",
    "python scripts/best_lr_vs_n.py multirun/heldout/ladder_ffn_5 multirun/ladder_ffn_mup --out docs/figures/ladder_ffn_best_lr_sp_vs_mup.png": "tests/analysis/test_lr_transfer.py::test_the_script_prints_each_arm_and_draws_both_sweeps (two hand-made ladder sweeps, SP and μP)",
    "python train.py -m experiment=ladder_ffn_mup hydra.sweeper.ladder.widths=[] model.n_embd=24,48,96,192 model.n_layer=2 model.n_head=1 model.mup_base_head_dim=null hydra.sweeper.arms=[gelu] hydra.sweeper.seeds=2 hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: 40 jobs, 3 min 10 s on 2 cores (the same preset through the same sweeper and launcher, shrunk: tests/ablation/test_ladder_sweep.py::test_the_mup_ladder_runs_shrunk_with_one_lr_grid_and_fixed_width_heads)",
    "python train.py -m experiment=ladder_ffn_mup hydra.sweeper.ladder.widths=[] model.n_embd=24,48,96,192 model.n_layer=2 model.n_head=1 model/parametrization=sp hydra.sweeper.arms=[gelu] hydra.sweeper.seeds=2 hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: 40 jobs, 3 min 25 s on 2 cores (the same preset through the same sweeper and launcher, shrunk: tests/ablation/test_ladder_sweep.py::test_the_mup_ladder_runs_shrunk_with_one_lr_grid_and_fixed_width_heads)",
    "python train.py -m experiment=ladder_ffn_mup model/tying=untied hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: 120 jobs, 8 min 14 s on 2 cores (the preset shrunk through the same sweeper and launcher: tests/ablation/test_ladder_sweep.py::test_the_mup_ladder_runs_shrunk_with_one_lr_grid_and_fixed_width_heads; untied μP: tests/model/test_mup_package.py)",
    "python train.py -m experiment=ladder_ffn_quick": "tests/ablation/test_ladder_sweep.py::test_quick_ladder_runs_through_the_slots_launcher_and_reports_a_fit",
    "python train.py -m experiment=ladder_placement hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: 72 jobs, 1,085 s (the depth ladder's grid: tests/ablation/test_ladder_grid.py::test_a_depth_ladder_keeps_the_width_and_varies_depth; the same sweeper and launcher end to end: tests/ablation/test_ladder_sweep.py::test_quick_ladder_runs_through_the_slots_launcher_and_reports_a_fit)",
    "scripts/report.py /tmp/w24/two figures=false": "tests/analysis/test_ladder_report.py::test_bad_ladders_are_one_line_exit_2 (the same report call on a 2-size ladder made by hand)",
    # docs/performance.md, "Sweeps side by side" (issue 21): the same script at 1 round, 2 jobs
    "python -m dev.bench.sweep --rounds 2": "tests/bench/test_bench_sweep.py::test_bench_sweep_times_both_and_compares_losses",
    "python -m dev.bench.sweep --rounds 2 --set trainer.max_steps=300 --set trainer.val_check_interval=100": "tests/bench/test_bench_sweep.py::test_bench_sweep_times_both_and_compares_losses",
    "python -m dev.bench.sweep --rounds 2 --set trainer.max_steps=1500 --set trainer.val_check_interval=500": "tests/bench/test_bench_sweep.py::test_bench_sweep_times_both_and_compares_losses",
    # README, "Sweeps on one node" / "Sweeps on SLURM" (issue 21)
    "python train.py -m experiment=ablate_placement trainer.devices=2": f"{GPU} (4 DDP jobs of 2 GPUs; the GPU split is run on a probe app: tests/launcher/test_parallel_sweeps.py::test_each_running_job_gets_its_own_gpus_port_and_threads)",
    "python train.py -m experiment=ablate_tying_quick hydra.launcher.slots=2": "tests/launcher/test_parallel_sweeps.py::test_two_slots_match_the_serial_sweep_job_for_job",
    "python train.py -m model/ffn=gelu,swiglu trainer.accelerator=cpu trainer.devices=2 hydra.launcher.slots=2": "tests/launcher/test_parallel_sweeps.py::test_two_ddp_jobs_side_by_side_do_not_collide",
    # docs/slurm.md: through the fake SLURM of tests/launcher/fake_slurm.py
    "python train.py -m experiment=ablate_placement hydra/launcher=slurm hydra.launcher.partition=gpu": "not runnable here: its tasks need GPUs (a GPU array's script through the fake SLURM, tasks failing for want of a GPU: tests/launcher/test_slurm_array.py::test_a_gpu_array_asks_for_its_gpus_and_a_task_that_fails_fails_the_sweep; the same command on CPU: test_the_readme_command_submits_one_array_with_the_serial_losses)",
    "python train.py -m experiment=ablate_placement hydra/launcher=slurm hydra.launcher.partition=gpu trainer.devices=4 hydra.launcher.timeout_min=600 hydra.launcher.array_parallelism=8": "not runnable here: its tasks need 4 GPUs each (the script of a multi-GPU array: tests/launcher/test_slurm_array.py::test_a_gpu_array_asks_for_its_gpus_and_a_task_that_fails_fails_the_sweep)",
    "python train.py -m experiment=ablate_tying_quick hydra/launcher=slurm hydra.launcher.partition=cpu trainer.accelerator=cpu": "tests/launcher/test_slurm_array.py::test_the_readme_command_submits_one_array_with_the_serial_losses",
    "python train.py -m experiment=ablate_tying_quick hydra/launcher=array_local": "tests/launcher/test_parallel_sweeps.py::test_submitit_array_matches_the_serial_sweep",
    # README, "Two commands"
    "make train": "tests/docs/commands/test_train_runs.py::test_make_train_then_the_interop_chain",
    "make test": "tests/docs/commands/test_make_targets.py::test_make_test_fast_and_lint",
    "TEST_WORKERS=0 make test": "tests/docs/commands/test_make_targets.py::test_make_test_fast_and_lint",
    "make test-fast": "tests/docs/commands/test_make_targets.py::test_make_test_fast_and_lint",
    "make lint": "tests/docs/commands/test_make_targets.py::test_make_test_fast_and_lint",
    "make sweep EXPERIMENT=ablate_ffn": "tests/docs/commands/test_sweeps.py::test_ablate_ffn_through_make_sweep_and_report",
    "make bench": "tests/docs/commands/test_tools.py::test_make_bench",
    "make report SWEEP=multirun/<date>/<time>": "tests/docs/commands/test_sweeps.py::test_ablate_ffn_through_make_sweep_and_report",
    "make mutants": "tests/docs/commands/test_make_targets.py::test_make_mutants_list_check",
    # README, "Usage"
    "python train.py": "tests/docs/commands/test_train_runs.py::test_make_train_then_the_interop_chain",
    "python train.py model=pre_rmsnorm_swiglu trainer.devices=8": (
        f"{GPU} (8 of them); the same DDP path over gloo on CPU is "
        "tests/training/test_train.py::test_two_process_ddp_on_cpu"
    ),
    "python train.py trainer.accelerator=cpu trainer.devices=2": (
        "tests/training/test_train.py::test_two_process_ddp_on_cpu"
    ),
    "python train.py trainer=fsdp trainer.accelerator=cpu trainer.devices=2": (
        "tests/distributed/test_fsdp_checkpoint.py::test_resume_continues_like_the_straight_run"
    ),
    "python train.py model.n_layer=24 optim.warmup_steps=0": "tests/docs/commands/test_train_runs.py::test_any_field_directly_24_layers",
    "python train.py -m model/placement=pre,post model/ffn=swiglu,gelu model/tying=tied,untied": (
        "tests/docs/commands/test_train_data.py::test_multirun_of_three_groups_is_8_jobs"
    ),
    "python train.py -m model=pre_rmsnorm_swiglu,post_layernorm_gelu model.n_layer=2,4": (
        "tests/docs/commands/test_train_data.py::test_multirun_of_presets_and_depths_is_4_jobs"
    ),
    "python train.py data=text data.path='corpus/*.txt'": "tests/docs/commands/test_train_data.py::test_data_text_on_own_files",
    "python train.py data=tinystories": (
        "not runnable here: downloads roneneldan/TinyStories from the HF hub; the same preset on a local "
        "copy (data.source=parquet) is test_data_tinystories_parquet"
    ),
    "python generate.py ckpt_path=outputs/<date>/<time>/checkpoints/last.ckpt prompt='def ' "
    "max_new_tokens=200 temperature=0.8 top_k=50": "tests/docs/commands/test_train_runs.py::test_make_train_then_the_interop_chain",
    "python -m gptlab.analysis.params model=gpt2": "tests/docs/commands/test_train_runs.py::test_param_report",
    "python -m gptlab.analysis.params": "tests/docs/commands/test_train_runs.py::test_param_report",
    # README, "Your data"
    "python train.py data=tinystories_txt data.path=TinyStories-train.txt": "tests/docs/commands/test_train_data.py::test_data_tinystories_txt",
    "python train.py data=tinystories data.source=parquet data.path='TinyStories/data/train-*.parquet' "
    "data.max_bytes=null": "tests/docs/commands/test_train_data.py::test_data_tinystories_parquet",
    "python train.py data=tokens data.path='fineweb10B/fineweb_train_*.bin' "
    "data.val_path='fineweb10B/fineweb_val_*.bin' data.tokenizer_path=gpt2/tokenizer.json "
    "model.vocab_size=50304": "tests/docs/commands/test_train_data.py::test_data_tokens_llmc_shards",
    "python train.py data=tinystories data.streaming=true data.max_bytes=2000000000": (
        "not runnable here: streams from the HF hub; the same streaming packer over a local parquet copy "
        "(data=tinystories, its data.path a local copy) is test_data_tinystories_streaming_local"
    ),
    # README, "Interop"
    "python train.py trainer.max_steps=100 trainer.val_check_interval=50 hydra.run.dir=outputs/demo": (
        "tests/docs/commands/test_train_runs.py::test_make_train_then_the_interop_chain"
    ),
    "python generate.py ckpt_path=outputs/demo/checkpoints/last.ckpt prompt='def ' max_new_tokens=200 "
    "temperature=0.8 top_k=50 seed=0": "tests/docs/commands/test_train_runs.py::test_make_train_then_the_interop_chain",
    "python evaluate.py ckpt_path=outputs/demo/checkpoints/last.ckpt": "tests/docs/commands/test_train_runs.py::test_make_train_then_the_interop_chain",
    "python scripts/export.py ckpt_path=outputs/demo/checkpoints/last.ckpt out_dir=outputs/demo/hf": (
        "tests/docs/commands/test_train_runs.py::test_make_train_then_the_interop_chain"
    ),
    "python generate.py ckpt_path=outputs/demo/hf prompt='import ' top_p=0.9 top_k=0 seed=0": (
        "tests/docs/commands/test_train_runs.py::test_make_train_then_the_interop_chain"
    ),
    "python evaluate.py ckpt_path=outputs/demo/hf": "tests/docs/commands/test_train_runs.py::test_make_train_then_the_interop_chain",
    "python train.py model.init_from=outputs/demo/hf optim.lr=3e-4 optim.warmup_steps=0 trainer.max_steps=100 "
    "trainer.val_check_interval=50 hydra.run.dir=outputs/demo-ft": "tests/docs/commands/test_train_runs.py::test_make_train_then_the_interop_chain",
    # docs/evaluation.md (issue 38)
    "python evaluate.py ckpt_path=outputs/demo/checkpoints/last.ckpt task=hellaswag_val.jsonl,my_task.jsonl batch_size=32": (
        "tests/tasks/test_evaluate_tasks.py::test_hellaswag_file_batch_sizes_and_the_cut_context"
    ),
    "python evaluate.py ckpt_path=outputs/demo/checkpoints/last.ckpt task=my_task.yaml": (
        "tests/tasks/test_lm_eval_oracle.py::test_evaluate_py_reads_the_yaml_as_lm_eval_and_its_acc_norm_is_lm_evals_acc_bytes"
    ),
    # on a consolidated file (the three forms load through the same load_model), --batch_size 5
    "python scripts/run_lm_eval.py --model gptlab --model_args ckpt_path=outputs/demo/checkpoints/last.ckpt --tasks my_task.yaml --device cpu --batch_size 16": (
        "tests/tasks/test_lm_eval_oracle.py::test_gptlab_and_lm_evals_hf_model_agree_on_a_local_task"
    ),
    "python -m dev.bench.tasks": "tests/bench/test_bench_tasks.py::test_bench_runs_both_presets_and_prints_the_table",
    "python evaluate.py ckpt_path=outputs/demo/checkpoints/last.ckpt task=val_continuation": (
        "tests/tasks/test_val_task.py::test_evaluate_py_scores_the_task_as_its_items_in_a_file"
    ),
    "python evaluate.py ckpt_path=outputs/demo/checkpoints/last.ckpt task=val_continuation,hellaswag_val.jsonl data=text data.path='corpus/*.txt'": (
        "tests/tasks/test_val_task.py::test_evaluate_py_scores_the_task_as_its_items_in_a_file"
    ),
    # docs/evaluation.md, "In the training loop" (issue 38, item 4): the same options on tiny runs, the
    # cadence and the numbers checked (in-process app.train); train.py itself runs them in the bench test
    "python train.py callbacks.tasks.names=[val_continuation,hellaswag_val.jsonl] callbacks.tasks.every_n_steps=100": (
        "tests/training/test_tasks_callback.py::test_cadence_every_n_steps_and_the_final_validation_not_the_sanity_check"
    ),
    # docs/performance.md, "Tasks in the loop" (issue 38, item 7): the same script at 1 round, a tiny run
    "OMP_NUM_THREADS=1 python -m dev.bench.tasks_cost --rounds 2 --threads 1": "tests/bench/test_bench_task_cost.py::test_bench_task_cost_times_both_runs",
    # docs/performance.md, "Telemetry cost", round 3 (r9-telemetry-cost): the attribution script on a tiny
    # run, and the bench's variants (its CLI with every variant, one thread, tiny sizes)
    "python -m dev.bench.callback_costs --steps 20": "tests/bench/test_callback_costs.py::test_callback_costs_prints_each_piece_by_kind_of_step",
    "python -m dev.bench.callback_costs --steps 40 model.norm=layernorm model.ffn=gelu model.pos_emb=learned model.block_size=64": "tests/bench/test_callback_costs.py::test_callback_costs_prints_each_piece_by_kind_of_step",
    "python scripts/bench.py bench.threads=1 bench.tokenize=false bench.repeats=2 bench.variants=lightning,lightning+telemetry/10,lightning+telemetry/1": "tests/bench/test_bench.py::test_bench_cli_runs_two_steps_and_prints_the_table",
    # docs/performance.md, "Short runs" (issue 48, item 5)
    "OMP_NUM_THREADS=1 python -m dev.bench.short_run --steps 20 --project 600": "tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up",
    # docs/performance.md, "Short runs", fourth pass (r9): the breakdown and the pairs on nanoGPT's block
    "OMP_NUM_THREADS=1 python -m dev.bench.short_run --steps 20 --project 600 --set model.norm=layernorm --set model.ffn=gelu --set model.pos_emb=learned": "tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up",
    "OMP_NUM_THREADS=1 python -m dev.bench.step_split --nanogpt /tmp/nanogpt --rounds 5 --steps 30": "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship (gptlab's three loops at the tiny shape, the table and its differences: tests/bench/test_step_split.py::test_tiny_split_prints_each_loop_and_their_differences; a --nanogpt without model.py refused: tests/bench/test_step_split.py::test_a_nanogpt_dir_without_its_model_is_refused)",
    "OMP_NUM_THREADS=1 python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt --steps 600 --rounds 5 --nanogpt-set=--eval_iters=8 --set model.norm=layernorm --set model.ffn=gelu --set model.pos_emb=learned": "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship, and ~2.5 min a round on one thread (nanoGPT's data layout it writes: tests/bench/test_bench_short_run.py::test_nanogpt_layout; its one-line refusal without a checkout: tests/bench/test_bench_short_run.py::test_pair_without_a_nanogpt_checkout_is_one_line; the gptlab side's phases: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    'OMP_NUM_THREADS=1 python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt --steps 600 --rounds 3 --nanogpt-set=--eval_iters=8 --set model.norm=layernorm --set model.ffn=gelu --set model.pos_emb=learned --set "callbacks.tasks.names=[]" --set sample.max_new_tokens=0': "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship, and ~2.5 min a round on one thread (nanoGPT's data layout it writes: tests/bench/test_bench_short_run.py::test_nanogpt_layout; its one-line refusal without a checkout: tests/bench/test_bench_short_run.py::test_pair_without_a_nanogpt_checkout_is_one_line; the gptlab side's phases: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    "OMP_NUM_THREADS=1 python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt --steps 600 --rounds 3 --nanogpt-set=--eval_iters=8 --set model.norm=layernorm --set model.ffn=gelu --set model.pos_emb=learned": "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship, and ~5-8 min a round on one thread (nanoGPT's data layout it writes: tests/bench/test_bench_short_run.py::test_nanogpt_layout; its one-line refusal without a checkout: tests/bench/test_bench_short_run.py::test_pair_without_a_nanogpt_checkout_is_one_line; the gptlab side's phases: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    "OMP_NUM_THREADS=1 python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt --steps 600 --rounds 2 --nanogpt-set=--eval_iters=8 --set model.norm=layernorm --set model.ffn=gelu --set model.pos_emb=learned --set logger=csv": "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship, and ~5-8 min a round on one thread (nanoGPT's data layout it writes: tests/bench/test_bench_short_run.py::test_nanogpt_layout; its one-line refusal without a checkout: tests/bench/test_bench_short_run.py::test_pair_without_a_nanogpt_checkout_is_one_line; the gptlab side's phases: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    "OMP_NUM_THREADS=1 python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt --steps 600 --rounds 1 --nanogpt-set=--eval_iters=8": "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship, and ~5-8 min a round on one thread (nanoGPT's data layout it writes: tests/bench/test_bench_short_run.py::test_nanogpt_layout; its one-line refusal without a checkout: tests/bench/test_bench_short_run.py::test_pair_without_a_nanogpt_checkout_is_one_line; the gptlab side's phases: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    "OMP_NUM_THREADS=1 python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt --steps 600 --rounds 4 --nanogpt-set=--eval_iters=8 --set model.norm=layernorm --set model.ffn=gelu --set model.pos_emb=learned": "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship, and ~2.5 min a round on one thread (nanoGPT's data layout it writes: tests/bench/test_bench_short_run.py::test_nanogpt_layout; its one-line refusal without a checkout: tests/bench/test_bench_short_run.py::test_pair_without_a_nanogpt_checkout_is_one_line; its summary's ratio and median difference: tests/bench/test_bench_short_run.py::test_pair_summary_gives_the_ratio_of_medians_and_the_median_difference; the gptlab side's phases: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    "OMP_NUM_THREADS=1 python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt --steps 20 --rounds 10 --nanogpt-set=--eval_iters=8 --set model.norm=layernorm --set model.ffn=gelu --set model.pos_emb=learned": "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship, and ~15 s a round on one thread (nanoGPT's data layout it writes: tests/bench/test_bench_short_run.py::test_nanogpt_layout; its one-line refusal without a checkout: tests/bench/test_bench_short_run.py::test_pair_without_a_nanogpt_checkout_is_one_line; its summary's ratio and median difference: tests/bench/test_bench_short_run.py::test_pair_summary_gives_the_ratio_of_medians_and_the_median_difference; the gptlab side's phases: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    'OMP_NUM_THREADS=1 python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt --steps 20 --rounds 10 --nanogpt-set=--eval_iters=8 --set model.norm=layernorm --set model.ffn=gelu --set model.pos_emb=learned --set logger=csv --set "callbacks.tasks.names=[]" --set sample.max_new_tokens=0 --set callbacks.telemetry.figures=false': "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship, and ~13 s a round on one thread (nanoGPT's data layout it writes: tests/bench/test_bench_short_run.py::test_nanogpt_layout; its one-line refusal without a checkout: tests/bench/test_bench_short_run.py::test_pair_without_a_nanogpt_checkout_is_one_line; its summary's ratio and median difference: tests/bench/test_bench_short_run.py::test_pair_summary_gives_the_ratio_of_medians_and_the_median_difference; the gptlab side's phases: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    "OMP_NUM_THREADS=1 python -m dev.bench.short_run --steps 600 --project 600 --set model.norm=layernorm --set model.ffn=gelu --set model.pos_emb=learned --set trainer.val_check_interval=250": "not runnable here: ~90 CPU s of one thread for one 600-step run, past what the suite spends on a bench (the same breakdown at 4 steps, its phases adding up to the process's CPU: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    "OMP_NUM_THREADS=1 python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt --steps 600 --rounds 2": "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship, and ~45 min on the loaded 2-core machine (nanoGPT's data layout it writes: tests/bench/test_bench_short_run.py::test_nanogpt_layout; its one-line refusal without a checkout: tests/bench/test_bench_short_run.py::test_pair_without_a_nanogpt_checkout_is_one_line; the gptlab side's phases: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    "OMP_NUM_THREADS=1 python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt --steps 600 --rounds 2 --nanogpt-set=--eval_iters=8": "not runnable here: needs a karpathy/nanoGPT checkout, which gptlab does not ship, and ~45 min on the loaded 2-core machine (nanoGPT's data layout it writes: tests/bench/test_bench_short_run.py::test_nanogpt_layout; its one-line refusal without a checkout: tests/bench/test_bench_short_run.py::test_pair_without_a_nanogpt_checkout_is_one_line; the gptlab side's phases: tests/bench/test_bench_short_run.py::test_breakdown_runs_and_adds_up)",
    # README, "Ablations, telemetry, reports"
    "python train.py -m experiment=ablate_placement": "tests/docs/commands/test_sweeps.py::test_ablate_placement_cells_and_report_baseline",
    "python train.py -m experiment=ablate_ffn": "tests/docs/commands/test_sweeps.py::test_ablate_ffn_through_make_sweep_and_report",
    "python train.py -m experiment=ablate_tying": "tests/docs/commands/test_sweeps_small.py::test_ablate_tying_and_init",
    "python train.py -m experiment=ablate_init": "tests/docs/commands/test_sweeps_small.py::test_ablate_tying_and_init",
    "python train.py -m experiment=ablate_ffn_quick": "tests/docs/commands/test_sweeps_small.py::test_quick_presets_as_documented",
    "python train.py -m experiment=budget_ffn_quick": "tests/ablation/test_budget_sweep.py::test_budget_sweep_runs_trunks_then_branches_and_reports_loss_against_tokens",
    "python train.py -m experiment=budget_ffn": "not runnable here: 90 jobs, hours on 2 CPU cores; budget_ffn_quick, its shrunk form, runs in tests/ablation/test_budget_sweep.py",
    "python train.py -m experiment=schedule_compare": "not runnable here: 36 jobs of 400 steps, an hour on 2 CPU cores; its arms compose in tests/ablation/test_budget_sweep.py",
    # docs/sweeps.md "Sizes × budgets" and docs/ablations.md "Loss surface" (issue 45 item 4)
    "python -m gptlab.analysis.budgets.surface <sweep dir> [--flops 1e11,1e12]": "template: a sweep directory of a ladder crossed with budgets; its instance in docs/ablations.md is run",
    "python -m gptlab.analysis.budgets.surface multirun/surface/surface_ffn_800 --flops 5e10,1.5e11,2.5e11": "tests/analysis/test_loss_surface.py::test_the_documented_command_and_the_report_print_the_surface (as written, on a hand-made sweep of the same grid at that path)",
    "python train.py -m experiment=surface_ffn 'hydra.sweeper.ladder.widths=[]' 'hydra.sweeper.ladder.depths=[1,2,4]' model.n_embd=48 'callbacks.tasks.names=[]' hydra.launcher.slots=1 hydra.launcher.threads=1 hydra.sweep.dir=multirun/surface/surface_ffn_depth": "not runnable here: 30 jobs, 17 min 56 s on one loaded core (a depth ladder's grid: tests/ablation/test_ladder_grid.py::test_a_depth_ladder_keeps_the_width_and_varies_depth; crossed with budgets: test_a_ladder_crossed_with_budgets_leaves_each_jobs_steps_to_the_budgets; its report's section on a hand-made sweep: tests/analysis/test_loss_surface.py)",
    "python -m gptlab.analysis.budgets.surface multirun/surface/surface_ffn_depth": "not runnable here: reads the 30 jobs of the command above (the same module, as documented, on a hand-made sweep: tests/analysis/test_loss_surface.py::test_the_documented_command_and_the_report_print_the_surface)",
    "python train.py -m experiment=surface_ffn 'callbacks.tasks.names=[]' hydra.launcher.slots=1 hydra.launcher.threads=1 hydra.sweep.dir=multirun/surface/surface_ffn_800": "not runnable here: 30 jobs, 5,640 steps, 13 min 31 s on one loaded core (its grid, each job's shape, LR and steps: tests/ablation/test_ladder_grid.py::test_a_ladder_crossed_with_budgets_leaves_each_jobs_steps_to_the_budgets; trunks and branches through the same sweeper and launcher: tests/ablation/test_budget_sweep.py::test_budget_sweep_runs_trunks_then_branches_and_reports_loss_against_tokens; its report's section on a hand-made sweep: tests/analysis/test_loss_surface.py)",
    "python train.py -m experiment=lr_search": "tests/docs/commands/test_sweeps_small.py::test_lr_search",
    "python scripts/report.py multirun/<group>": "tests/docs/commands/test_sweeps.py::test_ablate_ffn_through_make_sweep_and_report",
    "python scripts/init_report.py model=pre_rmsnorm_swiglu model.n_layer=12": "tests/docs/commands/test_tools.py::test_init_reports",
    "scripts/ablations.sh": (
        "not runnable here: the claims set, about 1.5 h on 2 cores, with its sizes fixed in the script; "
        "every sweep it runs is run shrunk by test_ablate_* (placement, warmup arm, ffn, tying, init) and "
        "test_init_reports"
    ),
    "python scripts/bench.py [model=<preset> ...]": "template: its instances are the docs/performance.md rows",
    # README, "Multi-node"
    "torchrun --standalone --nproc_per_node=8 train.py trainer.devices=8 trainer=fsdp model=gpt2": (
        f"{GPU} (8); torchrun --standalone --nproc_per_node=2 train.py trainer=fsdp on CPU is "
        "tests/distributed/test_torchrun.py::test_one_two_process_job_and_no_extra_processes"
    ),
    "torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=$HEAD:29500 --rdzv-id=$JOB_ID "
    "train.py trainer.num_nodes=2 trainer.devices=8 trainer=fsdp model=gpt2": (
        f"{GPU} on 2 nodes; one-node torchrun is tests/distributed/test_torchrun.py"
    ),
    "srun python train.py trainer.num_nodes=2 trainer.devices=8 trainer=fsdp model=gpt2": (
        "not runnable here: needs SLURM and 16 GPUs; the SIGUSR1 -> hpc_ckpt -> scontrol requeue -> resume "
        "path with a fake scontrol is tests/training/test_preemption.py"
    ),
    # docs/ablations.md
    "python scripts/report.py <sweep dir>": "tests/docs/commands/test_sweeps.py::test_ablate_ffn_through_make_sweep_and_report",
    "scripts/report.py <dir> wandb=true": "tests/docs/commands/test_sweeps.py::test_ablate_ffn_through_make_sweep_and_report",
    "OMP_NUM_THREADS=1 python train.py -m experiment=ablate_init hydra.sweeper.baseline=global "
    "model.depth_scaled_init=global model.n_layer=2 optim.lr=0.00548 seed=1,2,3 model.n_embd=32 model.n_head=2 "
    "model.ffn_multiple_of=32 data.batch_size=16 logger=csv hydra.sweep.dir=multirun/size/d32b16_L2": (
        "tests/docs/commands/test_sweeps_small.py::test_depth_check_sizing_run"
    ),
    "scripts/report.py multirun/claims/placement baseline=post": "tests/docs/commands/test_sweeps.py::test_ablate_placement_cells_and_report_baseline",
    "python train.py -m experiment=<name> logger=csv": "template: its instances follow in docs/ablations.md",
    "python train.py -m experiment=ablate_placement logger=csv": "tests/docs/commands/test_sweeps.py::test_ablate_placement_cells_and_report_baseline",
    "python train.py -m experiment=ablate_init logger=csv": "tests/docs/commands/test_sweeps_small.py::test_ablate_tying_and_init",
    "python train.py -m experiment=ablate_ffn logger=csv": (
        "tests/docs/commands/test_sweeps.py::test_ablate_ffn_through_make_sweep_and_report (the preset through `make sweep`, "
        "logger=csv appended as on every shrunk preset run of tests/docs/commands)"
    ),
    "python train.py -m experiment=ablate_tying logger=csv": "tests/docs/commands/test_sweeps_small.py::test_ablate_tying_and_init",
    "python train.py -m experiment=lr_search logger=csv": "tests/docs/commands/test_sweeps_small.py::test_lr_search",
    "python scripts/report.py multirun/<experiment>-<time stamp>": "tests/docs/commands/test_sweeps.py::test_ablate_ffn_through_make_sweep_and_report",
    "python scripts/init_report.py model=pre_rmsnorm_swiglu model.n_layer=24 "
    "out=outputs/init_report/pre_rmsnorm_swiglu_L24": "tests/docs/commands/test_tools.py::test_init_reports",
    "python scripts/init_report.py model=post_layernorm_gelu model.n_layer=12 \"model.init_std='1/sqrt(d)'\" "
    "model.depth_scaled_init=none out=outputs/init_report/post_layernorm_gelu_xavier": "tests/docs/commands/test_tools.py::test_init_reports",
    "python train.py -m experiment=ablate_placement model.n_layer=4,12": (
        "tests/docs/commands/test_sweeps.py::test_ablate_placement_cells_and_report_baseline"
    ),
    "python - <<'EOF'": "tests/docs/commands/test_tools.py::test_unigram_reference_heredoc",
    "python train.py -m optim.lr=3e-3,3e-2,1e-1 model/qk_norm=off,on model.block_size=128 data.batch_size=8 "
    "trainer.max_steps=200 trainer.val_check_interval=200 data.val_windows=32 callbacks.telemetry.attention_every=1 "
    "callbacks.telemetry.figures=false optim.warmup_steps=20 logger=csv sample.max_new_tokens=0 "
    "trainer.enable_progress_bar=false hydra.sweep.dir=/tmp/wortsman": "tests/docs/commands/test_sweeps.py::test_qk_norm_sweep_and_plot",
    "python scripts/plot_qk_norm_sweep.py /tmp/wortsman docs/figures/qk_norm_high_lr.png": (
        "tests/docs/commands/test_sweeps.py::test_qk_norm_sweep_and_plot"
    ),
    # docs/optim.md
    "python -m dev.bench.save_stall": "tests/bench/test_bench_save_stall.py::test_save_stall_times_both_ways",
    "python -m dev.bench.save_stall_fsdp": "tests/bench/test_bench_save_stall_fsdp.py::test_fsdp_save_stall_times_both_ways",
    "python -m dev.bench.save_stall_fsdp --rounds 1": "tests/bench/test_bench_save_stall_fsdp.py::test_fsdp_save_stall_times_both_ways",
    "python -m dev.bench.muon_step": "tests/bench/test_bench_muon.py::test_bench_muon_prints_both_rows",
    "python train.py optim=muon": "tests/training/test_muon.py::test_optim_muon_trains_the_default_run_shortened",
    "python train.py -m experiment=ablate_optim_quick hydra.launcher.slots=2 hydra.launcher.threads=1": (
        "tests/training/test_muon.py::test_ablate_optim_quick_runs_and_reports_both_arms"
    ),
    "python train.py -m experiment=ablate_optim hydra.launcher.slots=1 hydra.launcher.threads=1": "not runnable here: 30 jobs, 2,333 s on one core (its quick sibling through the same sweeper and report: tests/training/test_muon.py::test_ablate_optim_quick_runs_and_reports_both_arms)",
    "python scripts/report.py multirun/ablate_optim-20261205-073629": "not runnable here: reads the 30 jobs of the command above (the report on the quick sibling's sweep: tests/training/test_muon.py::test_ablate_optim_quick_runs_and_reports_both_arms)",
    "python train.py -m experiment=ablate_optim_quick trainer.max_steps=200 trainer.val_check_interval=100 optim.warmup_steps=20 'hydra.sweeper.lr={min:1.0e-3,max:1.0e-1,points:5}' hydra.sweeper.seeds=3 hydra.launcher.slots=2 hydra.launcher.threads=1": "not runnable here: 30 jobs, 79 s (the same preset, sweeper, launcher settings and report at 8 jobs: tests/training/test_muon.py::test_ablate_optim_quick_runs_and_reports_both_arms)",
    # docs/optim.md, "Warmup-stable-decay and branches" (issue 45): run in-process through the same
    # compose → app.train path as train.py, shrunk to a few tiny steps (the CLI's exit code and line:
    # tests/training/test_wsd_branches.py::test_the_cli_refuses_a_branch_with_exit_2_and_one_line)
    "python train.py optim.schedule=wsd optim.decay_fraction=0.2 optim.min_lr=0": "tests/training/test_wsd_schedule.py::test_a_run_logs_the_lr_of_the_formula_at_every_step",
    "python train.py optim.schedule=wsd optim.decay_steps=0 'optim.branch_points=[100,200,400]' hydra.run.dir=outputs/trunk": "tests/training/test_wsd_branches.py::test_a_branch_is_its_single_run_twin_bit_for_bit",
    "python train.py branch_from=outputs/trunk branch.at=200 optim.decay_steps=50 hydra.run.dir=outputs/trunk-200-50": "tests/training/test_wsd_branches.py::test_a_branch_is_its_single_run_twin_bit_for_bit",
    "python train.py optim.schedule=wsd optim.decay_steps=50 trainer.max_steps=250": "tests/training/test_wsd_branches.py::test_a_branch_is_its_single_run_twin_bit_for_bit",
    # docs/architecture.md
    "python train.py model=<preset> group=option key=value ...": "template: the grammar of every train.py line",
    "python train.py model.norm=dyt": "tests/training/test_dyt_run.py::test_train_py_with_dyt_learns_and_export_refuses_it",
    "python train.py -m experiment=ablate_norm hydra.launcher.slots=2 hydra.launcher.threads=1 hydra.sweep.dir=multirun/claims39/ablate_norm": "not runnable here: 30 jobs, 994 s (its quick sibling through the same sweeper and report: tests/ablation/test_ablate_norm.py::test_quick_preset_sweeps_both_norms_and_reports)",
    "python scripts/report.py multirun/claims39/ablate_norm": "not runnable here: reads the 30 jobs of the command above (the report on the quick sibling's sweep: tests/ablation/test_ablate_norm.py::test_quick_preset_sweeps_both_norms_and_reports)",
    # docs/bad-inputs.md
    ".venv/bin/python train.py model.n_layer=2 model.n_embd=32 model.n_head=2 model.block_size=32 data.batch_size=4 "
    "data.max_bytes=60000 data.num_proc=1 trainer.max_steps=2 trainer.val_check_interval=2 data.val_windows=4 "
    "trainer.enable_progress_bar=false sample.max_new_tokens=0 logger=csv trainer.accelerator=cpu "
    "data.cache_dir=/tmp/rel/cache hydra.run.dir=/tmp/rel/badruns/<row> <row overrides>": (
        "template: each row's instance is a test of tests/training/test_bad_inputs.py"
    ),
    # docs/performance.md
    "python scripts/bench.py": "tests/bench/test_bench.py::test_bench_cli_runs_two_steps_and_prints_the_table",
    "python scripts/bench.py model=post_layernorm_gelu bench.threads=1 bench.repeats=5": "tests/docs/commands/test_tools.py::test_bench_rows",
    "python scripts/bench.py model/size=small data.batch_size=4 bench.variants=bare,lightning": "tests/docs/commands/test_tools.py::test_bench_rows",
    "python scripts/bench.py model=pre_rmsnorm_swiglu bench.threads=1 bench.repeats=5": (
        "tests/docs/commands/test_tools.py::test_bench_rows (the default preset: the post_layernorm_gelu row with model=pre_rmsnorm_swiglu)"
    ),
    "python scripts/bench.py model=pre_rmsnorm_swiglu model/size=small data.batch_size=4 bench.threads=1": (
        "tests/docs/commands/test_tools.py::test_bench_rows"
    ),
    "python scripts/bench.py model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=32 data.batch_size=2 "
    "bench.threads=1 bench.steps=50 bench.tokenize=false": "tests/docs/commands/test_tools.py::test_bench_rows",
    "python scripts/bench.py model=pre_rmsnorm_swiglu bench.repeats=5 bench.tokenize=false": "tests/docs/commands/test_tools.py::test_bench_rows",
    "python scripts/bench.py model=pre_rmsnorm_swiglu model/size=small data.batch_size=4 bench.threads=1 "
    "bench.warmup=2 bench.repeats=3 bench.tokenize=false": "tests/docs/commands/test_tools.py::test_bench_rows",
    "python scripts/bench.py model=gpt2 model.block_size=256 data.batch_size=1 bench.threads=1 bench.warmup=2 "
    "bench.repeats=2 bench.tokenize=false": "tests/docs/commands/test_tools.py::test_bench_gpt2_shape",
    "python -m dev.bench.checkpoint_memory": "tests/bench/test_checkpoint_memory.py::test_script_prints_one_row_per_mode",
    "python -m dev.bench.checkpoint_memory --rounds 20": "tests/bench/test_checkpoint_memory.py::test_rounds_time_every_mode_beside_the_planners_factor",
    "python -m dev.bench.compile_parity": (
        "not runnable here: compiles 8 placement x FFN combinations with inductor (gcc), minutes on a cold "
        "cache; one combination through the script's own function is tests/bench/test_compile.py"
    ),
    "python scripts/bench.py model=gpt2 trainer=gpu compile=true bench.warmup=10 bench.steps=20 bench.repeats=3 "
    "bench.json=bench_gpt2_h200.json": f"{GPU} (one H200, bf16); the CPU shape is test_bench_gpt2_shape",
    "PYTHONPATH=src OMP_NUM_THREADS=1 python -m dev.bench.packing --sizes-mib 2048,512 --tokenizers byte "
    "--procs 1,2 --rounds 2": "tests/docs/commands/test_tools.py::test_bench_packing",
    "PYTHONPATH=src OMP_NUM_THREADS=1 python -m dev.bench.packing --sizes-mib 128,32 --tokenizers bpe "
    "--procs 1,2 --rounds 2": "tests/docs/commands/test_tools.py::test_bench_packing",
    "PYTHONPATH=src OMP_NUM_THREADS=1 python -m dev.bench.packing --sizes-mib 512,128,32 --tokenizers bpe "
    "--encoders tiktoken --procs 1,2 --rounds 2": "tests/docs/commands/test_tools.py::test_bench_packing",
    "PYTHONPATH=src OMP_NUM_THREADS=1 python -m dev.bench.bpe_train --sample-mib 200 --vocab-size 4096 "
    "--rounds 1 --budget-mib 12,50,all --corpus python-sources": "tests/bench/test_bench_bpe_train.py::test_bench_bpe_train_budgets_on_python_sources",
    "PYTHONPATH=src OMP_NUM_THREADS=1 python -m dev.bench.bpe_train --sample-mib 100 --vocab-size 4096 "
    "--rounds 2": "tests/bench/test_bench_bpe_train.py::test_bench_bpe_train_script_times_both_trainers",
    # docs/performance.md, "Long runs in one pre-token" (issue 37, item 3)
    "PYTHONPATH=src OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1 python -m dev.bench.bpe_train --corpus long-runs --sample-mib 8 --runs 3 --run-chars 100000 --vocab-size 4096 --rounds 2 --max-piece-chars 256,none": "tests/bench/test_bench_bpe_train.py::test_bench_bpe_train_long_runs_cut_and_uncut",
    "PYTHONPATH=src OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1 python -m dev.bench.bpe_train --corpus long-runs --sample-mib 8 --runs 1 --run-chars 200000 --vocab-size 4096 --rounds 1 --trainers tokenizers --max-piece-chars 256,none": "tests/bench/test_bench_bpe_train.py::test_bench_bpe_train_long_runs_cut_and_uncut",
    "PYTHONPATH=src OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1 python -m dev.bench.bpe_train --sample-mib 32 --vocab-size 4096 --rounds 2 --max-piece-chars 256,none": "tests/bench/test_bench_bpe_train.py::test_bench_bpe_train_ordinary_text_cut_and_uncut",
    "PYTHONPATH=src OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1 python -m dev.bench.bpe_train --corpus python-sources --sample-mib 50 --vocab-size 4096 --rounds 1 --max-piece-chars 256,none": "tests/bench/test_bench_bpe_train.py::test_bench_bpe_train_python_sources_cut_and_uncut",
    # docs/dashboards.md and README (issue 31): run on real sweeps by their own tests
    "python scripts/dashboard.py <sweep dir>": "tests/dashboards/test_view_keys.py::test_offline_the_command_writes_the_file_and_says_how_to_upload",
    "python scripts/dashboard.py <sweep dir> entity=<you> project=gptlab": "not runnable here: saving needs the network and a wandb account (the same command offline, which writes the file and prints the upload line: tests/dashboards/test_view_keys.py::test_offline_the_command_writes_the_file_and_says_how_to_upload)",
    "python scripts/status.py <sweep dir>": "tests/launcher/test_sweep_progress.py::test_status_of_a_real_two_slot_sweep_while_it_runs_and_after_kill_9",
    # docs/ablations.md, the schedule and budget claims rows (issue 45, item 6)
    "python train.py -m experiment=budget_ffn optim.lr=0.00316,0.01 'hydra.sweeper.budgets=[100,200,400]' 'callbacks.tasks.names=[]' hydra.launcher.slots=1 hydra.launcher.threads=1 hydra.sweep.dir=multirun/claims/budget_ffn": "not runnable here: 48 jobs, 3,902 s on one loaded core (budget_ffn_quick through the same sweeper, branches and report: tests/ablation/test_budget_sweep.py::test_budget_sweep_runs_trunks_then_branches_and_reports_loss_against_tokens)",
    "python scripts/report.py multirun/claims/budget_ffn": "not runnable here: reads the 48 jobs of the command above (the budgets report on budget_ffn_quick's sweep: tests/ablation/test_budget_sweep.py::test_budget_sweep_runs_trunks_then_branches_and_reports_loss_against_tokens)",
    "python train.py -m experiment=schedule_compare optim.lr=0.00316,0.01 'callbacks.tasks.names=[]' hydra.launcher.slots=1 hydra.launcher.threads=1 hydra.sweep.dir=multirun/claims/schedule_compare": "not runnable here: 24 jobs of 400 steps, 5,464 s of job time on one loaded core (the preset's arms compose: tests/ablation/test_budget_sweep.py::test_schedule_compare_arms_compose; a grid through the same sweeper and report: test_ablate_ffn_through_make_sweep_and_report)",
    "python scripts/report.py multirun/claims/schedule_compare": "not runnable here: reads the 24 jobs of the command above (the same report on a real sweep: test_ablate_ffn_through_make_sweep_and_report)",
    "python scripts/report.py multirun/claims/schedule_compare_lr3": "not runnable here: reads 12 jobs of a sweep directory made on that machine (the same report on a real sweep: test_ablate_ffn_through_make_sweep_and_report)",
    "python scripts/report.py multirun/claims/schedule_compare baseline=wsd_linear out=multirun/claims/schedule_compare/vs_wsd_linear": "not runnable here: reads the 24 jobs of the command above (the report with baseline= on a real sweep: test_ablate_placement_cells_and_report_baseline)",
    # docs/moe.md, docs/ablations.md, docs/performance.md: ablate_moe (issue 47 item 8)
    "python -m gptlab.analysis.params experiment=ablate_moe model/moe_arm=moe_aux": "tests/ablation/test_ablate_moe.py::test_moe_active_equals_dense_and_total_equals_dense_total",
    "python train.py -m experiment=ablate_moe_quick": "tests/ablation/test_ablate_moe.py::test_ablate_moe_quick_runs_and_reports_with_routing_telemetry",
    "python -m gptlab.analysis.sweep.moe_load multirun/claims/ablate_moe": "not runnable here: reads the 36 jobs of the ablate_moe sweep (the same entry point on the quick sibling's sweep: tests/ablation/test_ablate_moe.py::test_ablate_moe_quick_runs_and_reports_with_routing_telemetry)",
    "python -m dev.bench.moe_step experiment=ablate_moe": "tests/bench/test_bench_moe_step.py::test_moe_step_prints_one_row_per_arm",
    "python train.py -m experiment=ablate_moe hydra.launcher.slots=1 hydra.launcher.threads=1 hydra.sweep.dir=multirun/claims/ablate_moe": "not runnable here: 36 jobs, over 2 h on the shared 2-core machine (its quick sibling through the same sweeper and report: tests/ablation/test_ablate_moe.py::test_ablate_moe_quick_runs_and_reports_with_routing_telemetry)",
    "python scripts/report.py multirun/claims/ablate_moe": "not runnable here: reads the jobs of the ablate_moe sweep above (the report on the quick sibling's sweep: tests/ablation/test_ablate_moe.py::test_ablate_moe_quick_runs_and_reports_with_routing_telemetry)",
    "python train.py -m experiment=ablate_attn_switches_quick": "tests/ablation/test_attn_switches.py::test_quick_preset_runs_and_reports_the_gate_and_the_sink",
    "python train.py -m experiment=ablate_attn_switches hydra.launcher.slots=1 hydra.launcher.threads=1 hydra.sweep.dir=multirun/claims/ablate_attn_switches": "not runnable here: 45 jobs, ~2.5 h on 2 shared cores (its quick sibling through the same sweeper and report: tests/ablation/test_attn_switches.py::test_quick_preset_runs_and_reports_the_gate_and_the_sink)",
    "python scripts/report.py multirun/claims/ablate_attn_switches figures=false": "not runnable here: reads the 43 jobs of the stopped 2026-12-06 sweep (the report on a sweep written as files: tests/analysis/test_sweep_report.py::test_report_seeds_option_judges_the_named_seeds_alone)",
    "python scripts/report.py multirun/claims/ablate_moe baseline=moe_aux": "not runnable here: reads the 36 jobs of the ablate_moe sweep (the report with baseline= on a real sweep: tests/docs/commands/test_sweeps.py::test_ablate_placement_cells_and_report_baseline)",
}
