"""The deliberate breakages: each replaces one exact snippet of one file under src/gptlab/ (the
snippet must occur exactly once, so a stale one shows up as an error instead of a silent no-op)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to src/gptlab/
    old: str
    new: str
    why: str


# fmt: off
MUTANTS: list[Mutant] = [
    # --- gradient clipping: the defect of issue 12, and the factor it reports ---
    Mutant("clip_grads_not_params", "training/module.py", "clip_grads_with_norm_(params,",
           "clip_grads_with_norm_([p.grad for p in params],", "the original bug: nothing is clipped"),
    Mutant("clip_coef_unclamped", "training/module.py", "(total.detach() + 1e-6), max=1.0)",
           "(total.detach() + 1e-6), min=0.0)", "reports a factor > 1 when nothing was clipped"),
    Mutant("telemetry_clip_coef_fake", "training/callbacks/telemetry.py",
           "coef.detach().reshape(1).to(packed)", "torch.ones(1).to(packed)",
           "grad_norm/clip_coef no longer the applied factor"),
    # --- norm placement formulas (model/block.py) ---
    Mutant("pre_branch_norm_dropped", "model/block.py", "x = x + self.attn(self.attn_norm(x), rope)",
           "x = x + self.attn(x, rope)", "pre-norm attention reads the raw stream"),
    Mutant("post_norm_off_stream", "model/block.py", "x = self.attn_norm(x + self.attn(x, rope))",
           "x = x + self.attn_norm(self.attn(x, rope))", "post-norm moved onto the branch"),
    Mutant("sandwich_out_norm_dropped", "model/block.py",
           "x = x + self.ffn_out_norm(self.ffn(self.ffn_norm(x)))", "x = x + self.ffn(self.ffn_norm(x))",
           "sandwich FFN loses its output norm"),
    Mutant("deepnorm_alpha_on_branch", "model/block.py",
           "self.attn_norm(self.alpha * x + self.attn(x, rope))",
           "self.attn_norm(x + self.alpha * self.attn(x, rope))", "α scales the branch, not the stream"),
    Mutant("deepnorm_alpha_dropped", "model/block.py", "self.ffn_norm(self.alpha * x + self.ffn(x))",
           "self.ffn_norm(x + self.ffn(x))", "DeepNorm FFN without α"),
    # --- DeepNorm constants and depth-scaled init (model/block.py, model/init.py) ---
    Mutant("deepnorm_alpha_exponent", "model/block.py", "(2 * n_layer) ** 0.25", "(2 * n_layer) ** 0.5",
           "α = (2L)^(1/2) instead of (2L)^(1/4)"),
    Mutant("deepnorm_beta_exponent", "model/init.py", "(8 * n_layer) ** -0.25", "(8 * n_layer) ** -0.5",
           "β = (8L)^(-1/2) instead of (8L)^(-1/4)"),
    Mutant("depth_scale_global", "model/init.py", "1.0 / math.sqrt(2 * cfg.n_layer)",
           "1.0 / math.sqrt(cfg.n_layer)", "global depth scaling 1/sqrt(L), not 1/sqrt(2L)"),
    Mutant("depth_scale_per_layer", "model/init.py", "1.0 / math.sqrt(2 * (layer + 1))",
           "1.0 / math.sqrt(2 * cfg.n_layer)", "per_layer silently equals global"),
    # --- next-token targets ---
    Mutant("target_shift", "training/module.py", "x, y = batch[:, :-1], batch[:, 1:]",
           "x, y = batch[:, :-1], batch[:, :-1]", "training predicts the current token"),
    Mutant("val_target_shift", "training/validation.py", "x, y = tokens[:, :-1], tokens[:, 1:]",
           "x, y = tokens[:, :-1], tokens[:, :-1]", "validation scores current-token copying"),
    # --- LR schedule and weight decay (training/optim.py) ---
    Mutant("warmup_off_by_one", "training/optim.py", "return (step + 1) / cfg.warmup_steps",
           "return step / cfg.warmup_steps", "warmup starts at lr 0"),
    Mutant("cosine_sign", "training/optim.py", "0.5 * (1.0 + math.cos(math.pi * progress))",
           "0.5 * (1.0 - math.cos(math.pi * progress))", "cosine rises instead of decaying"),
    Mutant("min_lr_floor_dropped", "training/optim.py", "return floor + (1.0 - floor) * shape",
           "return shape", "decay goes to 0, not min_lr"),
    Mutant("decay_on_all_params", "training/optim.py", "p.dim() < 2], \"weight_decay\": 0.0}",
           "p.dim() < 2], \"weight_decay\": weight_decay}", "gains and biases decay too"),
    Mutant("decay_on_no_params", "training/optim.py", "p.dim() >= 2], \"weight_decay\": weight_decay}",
           "p.dim() >= 2], \"weight_decay\": 0.0}", "no weight decay at all"),
    # --- distributed reductions: telemetry, train/loss, validation ---
    Mutant("telemetry_ddp_replicas_summed", "training/callbacks/telemetry.py",
           "replicated = 1.0 if self.sharded else 1.0 / world", "replicated = 1.0",
           "DDP grad norms counted once per replica (×sqrt(W))"),
    Mutant("telemetry_act_not_averaged", "training/callbacks/telemetry.py",
           "for a in acts if a is not None]) / world)", "for a in acts if a is not None]))",
           "act_rms summed over ranks"),
    Mutant("train_loss_last_microbatch", "training/module.py", "self._step_loss_sum / accumulate, None",
           "loss.detach(), None", "train/loss is the last micro-batch's (the old defect)"),
    Mutant("train_loss_rank_local", "training/module.py",
           'self.trainer.strategy.reduce(loss.clone(), reduce_op="mean")', "loss",
           "train/loss is rank 0's alone"),
    # validation (module.py _val_totals, the rewrite that SUM-reduces [loss sum, token count])
    Mutant("val_count_not_reduced", "training/module.py",
           'totals = self.trainer.strategy.reduce(totals, reduce_op="sum")',
           'totals = torch.stack([self.trainer.strategy.reduce(totals.clone(), reduce_op="sum")[0], '
           "totals[1]])",
           "global loss sum over this rank's token count"),
    Mutant("val_not_reduced", "training/module.py", "if self.trainer.world_size > 1:\n            totals =",
           "if False:\n            totals =", "val/loss is rank 0's share of the windows"),
    Mutant("val_count_per_window", "training/validation.py", "w.sum() * y.size(1)])", "w.sum()])",
           "val/loss divided by windows instead of tokens"),
    Mutant("val_padding_counted", "data/datamodule.py", "(self.windows[0], 0.0) if k == PAD",
           "(self.windows[0], 1.0) if k == PAD", "padding windows weigh in multi-rank validation"),
    Mutant("val_first_windows", "data/datamodule.py", "return (edges[:-1] + offset).tolist()",
           "return list(range(count))", "validation reads the split's first windows (the old defect)"),
    Mutant("val_rank_shard", "data/datamodule.py", "own = list(subset[rank::world_size])",
           "own = list(subset[0::world_size])", "every rank scores rank 0's val windows"),
    # --- RNG state on resume (training/callbacks/rng.py) ---
    Mutant("rng_wrong_rank", "training/callbacks/rng.py", "dict(states[rank])", "dict(states[0])",
           "every rank restores rank 0's RNG state"),
    Mutant("rng_restore_skipped", "training/callbacks/rng.py", "restore_rng(self._pending)", "pass",
           "a resumed run keeps the fresh seed's RNG"),
    # --- model: tying, attention, RoPE, norms ---
    Mutant("tying_dropped", "model/gpt.py", "self.lm_head.weight = self.tok_emb.weight", "pass",
           "tie_embeddings=true trains an untied head"),
    Mutant("causal_mask", "model/attention.py", "is_causal=True", "is_causal=False",
           "attention sees the future"),
    Mutant("sdpa_scale_one", "model/attention.py", "is_causal=True", "is_causal=True, scale=1.0",
           "no 1/sqrt(d_head) scale"),
    Mutant("rope_rotate_half_sign", "model/attention.py", "torch.cat([-x2, x1], dim=-1)",
           "torch.cat([x2, x1], dim=-1)", "RoPE is no longer a rotation"),
    Mutant("rope_theta_exponent", "model/attention.py", "dtype=torch.float32) / head_dim))",
           "dtype=torch.float32) / (head_dim // 2)))", "RoPE frequencies span the wrong range"),
    Mutant("rmsnorm_is_layernorm", "model/norms.py", "return nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)",
           "return nn.LayerNorm(cfg.n_embd, eps=cfg.norm_eps, bias=False)", "norm=rmsnorm builds LayerNorm"),
    Mutant("layernorm_eps_ignored", "model/norms.py", "nn.LayerNorm(cfg.n_embd, eps=cfg.norm_eps, bias",
           "nn.LayerNorm(cfg.n_embd, eps=1e-2, bias", "model.norm_eps ignored by LayerNorm"),
    # --- run control: final validation, non-finite guard ---
    Mutant("final_validation_never", "training/callbacks/final_validation.py",
           "trainer.should_stop = True", "pass", "runs end without a final validation"),
    Mutant("nonfinite_never_dropped", "training/callbacks/nonfinite.py", "p.grad = None", "pass",
           "a NaN gradient step is applied on CPU"),
    # --- data windows and rank sharding (data/datamodule.py) ---
    Mutant("window_too_short", "data/datamodule.py", "start : start + self.block_size + 1]",
           "start : start + self.block_size]", "windows of block_size tokens: one target short"),
    Mutant("window_start_off_by_one", "data/datamodule.py", "start = k * self.block_size\n",
           "start = k * self.block_size + 1\n", "windows start one token late"),
    Mutant("stream_rank_offset", "data/datamodule.py", "range(first + self.rank, first + self.global_batch",
           "range(first, first + self.global_batch", "every rank reads rank 0's batches"),
    # --- issue 14: attention telemetry, z-loss, qk-norm, spike forensics ---
    Mutant("attn_logit_unscaled", "training/callbacks/telemetry.py", "(q[b : b + step].float() * D**-0.5)",
           "(q[b : b + step].float())", "attention logits logged without the 1/sqrt(d_head)"),
    Mutant("z_loss_dropped", "training/module.py", "return ce + coef * z", "return ce",
           "optim.z_loss logged but never trained on"),
    Mutant("qk_norm_not_applied", "model/attention.py", "q, k = self.q_norm(q), self.k_norm(k)",
           "pass", "model.qk_norm=true builds the gains but never normalises"),
    Mutant("spike_windows_next_step", "training/callbacks/spikes.py", "start = step * size",
           "start = (step + 1) * size", "a spike record names the next step's batch"),
    # --- issue 15: end-of-text id, shard headers ---
    Mutant("byte_tokenizer_no_eos", "data/tokenizers.py", "eos_id: int | None = BYTE_EOS",
           "eos_id: int | None = None", "documents run into each other with no end-of-text id"),
    Mutant("shard_header_not_skipped", "data/shards.py",
           "return Shard(path, HEADER_BYTES, dtype, count, True)",
           "return Shard(path, 0, dtype, count, True)", "an llm.c shard's header read as tokens"),
    # --- issue 13: the report's statistics and DeepNet's init ---
    Mutant("paired_as_mean_of_arms", "analysis/stats.py",
           "d = mean_interval([x - y for x, y in zip(a, b, strict=True)])",
           "d = mean_interval([x - statistics.fmean(b) for x in a])",
           "the paired difference ignores the pairing (spread of a alone)"),
    Mutant("deepnorm_beta_exponent", "model/init.py", "return (8 * n_layer) ** -0.25",
           "return (8 * n_layer) ** -0.5", "DeepNet's beta with the wrong exponent"),
    Mutant("across_cells_reversed", "analysis/arms.py",
           "CellComparison(key, value, values[0], compare(arm, base), fixed)",
           "CellComparison(key, value, values[0], compare(base, arm), fixed)",
           "the depth check reads (shallow − deep): a deeper loss win reported as worse"),
    Mutant("grad_profile_last_step", "analysis/grad_profile.py", "step = min(s for s, _ in series[0])",
           "step = max(s for s, _ in series[0])", "the 'first telemetry step' profile is the last one"),
    Mutant("config_record_not_checked", "ablation/launch.py",
           "problem = conflict(sweep_dir, jobs) or config_conflict(sweep_dir, record, configs)",
           "problem = conflict(sweep_dir, jobs)", "an edited preset resumes into the old sweep dir"),
    # --- issue 25: the report's edges ---
    Mutant("verdict_ignores_missing_jobs", "analysis/arms.py",
           "text = _gap_verdict(phrases, absent) if phrases else verdict(diff)", "text = verdict(diff)",
           "better/worse printed when a best LR was chosen from a curve with a missing or NaN job"),
    Mutant("lr_sensitivity_interval_unclipped", "analysis/arms.py",
           "return clip_interval(mean_interval(values), 0.0, self.loss_at_init)",
           "return mean_interval(values)", "the LR-sensitivity interval goes below 0"),
    # --- issue 25: data edges ---
    Mutant("shard_scan_first_chunk_only", "data/shards.py",
           "for start in range(0, len(tokens), SCAN_TOKENS):",
           "for start in range(0, min(len(tokens), SCAN_TOKENS), SCAN_TOKENS):",
           "the max-id scan reads one chunk: an id out of range later ends training in an IndexError"),
    Mutant("cache_full_crc_unchecked", "data/packing.py",
           'why = integrity.problem(out, meta["files"]) or integrity.unverified_problem(out, meta["files"])',
           'why = integrity.problem(out, meta["files"])',
           "a byte flipped outside the sampled blocks of a packed cache is trained on"),
    Mutant("uint32_as_uint16_unnoticed", "data/shards.py", "if len(odd) <= 4 and len(even) >= 64:",
           "if len(odd) <= 4 and len(even) < 64:",
           "a raw uint32 file read as uint16 trains on every other token being 0"),
    # --- issue 25: spikes and resume ---
    Mutant("spike_skip_unbounded", "training/callbacks/spikes.py",
           "if self.in_a_row < self.max_consecutive:", "if True:",
           "after a lasting level shift every step is a spike and on_spike=skip drops every update"),
    Mutant("resume_log_step_not_restored", "training/callbacks/log_step.py",
           "loop._batches_that_stepped = trainer.global_step", "pass",
           "a run resumed from the final validation's checkpoint logs every metric one step early"),
    # --- issue 21: sweeps side by side ---
    Mutant("slots_share_gpus", "launcher/slots.py",
           "gpus=tuple(gpus[i * per_job : (i + 1) * per_job]) if on_gpu else (),",
           "gpus=tuple(gpus[:per_job]) if on_gpu else (),", "every slot's job runs on the same GPUs"),
    Mutant("slot_port_ignored", "training/launch.py",
           "return int(given) if given.isdigit() else _free_port()", "return _free_port()",
           "a DDP job ignores the port its slot reserved (two side-by-side jobs may race for one)"),
    Mutant("sweeper_one_job_per_launch", "ablation/launch.py",
           "results = sweeper.launcher.launch([job for _, job in left], initial_job_idx=left[0][0])",
           "results = [r for k, j in left for r in sweeper.launcher.launch([j], initial_job_idx=k)]",
           "the ablation sweeper hands jobs over one at a time: nothing runs side by side, no array"),
    Mutant("job_subdir_not_pinned", "ablation/launch.py",
           'left.append((k, [*job, *extra, f"hydra.sweep.subdir={k}"]))', "left.append((k, [*job, *extra]))",
           "a re-run with gaps numbers its jobs consecutively: job 5 lands in job 2's directory"),
    Mutant("sweep_sigterm_not_forwarded", "launcher/pool.py",
           "        for w in workers.values():\n            _kill_group(w.proc, signal.SIGTERM)\n",
           "        pass\n", "Ctrl-C / SIGTERM to a parallel sweep leaves its jobs without a checkpoint"),
    # --- issue 23: tiktoken ---
    Mutant("tiktoken_rank_offset", "data/tiktoken_bpe.py", "        ranks[raw] = int(tid)\n",
           "        ranks[raw] = int(tid) + 1\n",
           "the converted ranks are off by one: every BPE silently falls back to the slow encoder"),
    Mutant("tiktoken_sample_unchecked", "data/tiktoken_bpe.py", "bad = first_mismatch(tok, enc, docs)",
           "bad = None", "a BPE whose tiktoken ids differ packs different tokens than tokenizers would"),
    Mutant("tiktoken_vocab_unpadded", "data/tiktoken_encodings.py",
           "self.vocab_size = padded(enc.n_vocab)", "self.vocab_size = enc.n_vocab",
           "data.tokenizer=tiktoken sizes the embedding at 50,257 instead of a multiple of 64"),
    Mutant("bpe_trainer_not_in_identity", "data/tokenizers.py",
           'trainer = "" if cfg.bpe_trainer == "tokenizers" else f":{cfg.bpe_trainer}"', 'trainer = ""',
           "data.bpe_trainer=rustbpe reuses the tokens packed with tokenizers' trainer (other ids)"),
]
# fmt: on
BASELINE = Mutant("baseline", "__init__.py", "", "", "the unmutated tree passes")
