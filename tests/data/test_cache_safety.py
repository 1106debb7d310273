"""Crash-safe caches and bounded memory, measured on real processes.

A packer is SIGKILLed midway (its batches slowed down so the kill lands inside packing), then the
next prepare must rebuild and say so; truncated and altered token files must be found at start-up;
peak RSS of a packing subprocess must stay under a bound and not grow with the corpus.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from gptlab.data import integrity
from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens

SRC = str(Path(__file__).resolve().parents[2] / "src")
SEP = "<|endoftext|>"

# Packs data.path with the byte tokenizer in a fresh interpreter; prints its peak RSS (KiB) as JSON.
# VmHWM, not getrusage: ru_maxrss survives exec, so a child forked from a big pytest reports pytest's.
CHILD = """
import json, sys, time
from gptlab.data import writer
from gptlab.data.sources import stream as streaming
from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens
cfg = DataConfig(**json.loads(sys.argv[1]))
if len(sys.argv) > 2:  # slow every batch down, so a kill lands inside packing
    streaming.READ_CHUNK = writer.BATCH_BYTES = 4096
    real = writer.encode
    def slow(*a):
        time.sleep(float(sys.argv[2]))
        return real(*a)
    writer.encode = slow
prepare_tokens(cfg)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({"maxrss_kib": int(hwm.split()[1])}))
"""


def child(cfg: dict, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(cfg), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def corpus(path: Path, n_bytes: int) -> Path:
    """n_bytes of ASCII stories separated by <|endoftext|>, written in 1 MiB pieces."""
    rng = np.random.default_rng(0)
    words = [b"the", b"cat", b"sat", b"on", b"a", b"mat", b"and", b"dreamed", b"of", b"fish."]
    story = b" ".join(words[i] for i in rng.integers(0, len(words), 150)) + b"\n" + SEP.encode()
    block = story * ((1 << 20) // len(story))
    with open(path, "wb") as fh:
        for _ in range(n_bytes // len(block)):
            fh.write(block)
    return path


def test_sigkill_while_packing_then_a_clean_rebuild(tmp_path: Path, caplog) -> None:
    text = corpus(tmp_path / "c.txt", 1 << 20)
    cfg = {
        "source": "text",
        "path": str(text),
        "doc_separator": SEP,
        "cache_dir": str(tmp_path / "cache"),
        "num_proc": 1,
    }
    proc = child(cfg, "0.05")  # 256 batches: ~13 s of packing, the kill lands early in it
    deadline = time.time() + 120
    while time.time() < deadline:  # wait for the scratch dir to hold tokens
        scratch = [p for p in (tmp_path / "cache").glob(".*/train.bin") if p.stat().st_size > 0]
        if scratch:
            break
        time.sleep(0.05)
    assert scratch, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not list((tmp_path / "cache").glob("*/meta.json"))  # nothing finished, nothing trusted
    with caplog.at_level(logging.WARNING, logger="gptlab.data.cache"):
        packed = prepare_tokens(DataConfig(**cfg))
    assert len([r for r in caplog.records if "unfinished packing" in r.getMessage()]) == 1
    assert not list((tmp_path / "cache").glob(".*"))  # the leftover is gone
    fresh = prepare_tokens(DataConfig(**{**cfg, "cache_dir": str(tmp_path / "fresh")}))
    for split in ("train", "val"):
        assert packed.path(split).read_bytes() == fresh.path(split).read_bytes()


def _damage_then_prepare(text_cfg, caplog, damage) -> str:
    cfg = text_cfg(val_fraction=0.25)
    first = prepare_tokens(cfg)
    good = {s: first.path(s).read_bytes() for s in ("train", "val")}
    damage(first.directory)
    with caplog.at_level(logging.WARNING, logger="gptlab.data.cache"):
        again = prepare_tokens(cfg)
    assert {s: again.path(s).read_bytes() for s in ("train", "val")} == good  # rebuilt
    return caplog.text


def test_truncated_cache_is_detected_and_rebuilt(text_cfg, caplog) -> None:
    def truncate(d: Path) -> None:
        os.truncate(d / "train.bin", (d / "train.bin").stat().st_size - 2)

    log = _damage_then_prepare(text_cfg, caplog, truncate)
    assert "are damaged (train.bin has" in log and "packing them again" in log


def test_altered_cache_is_detected_and_rebuilt(text_cfg, caplog) -> None:
    def flip(d: Path) -> None:
        with open(d / "val.bin", "r+b") as fh:
            fh.seek(-1, os.SEEK_END)
            last = fh.read(1)
            fh.seek(-1, os.SEEK_END)
            fh.write(bytes([last[0] ^ 1]))

    log = _damage_then_prepare(text_cfg, caplog, flip)
    assert "val.bin fails its sampled checksum" in log


def test_sampled_check_reads_a_bounded_part_and_the_full_check_all(tmp_path: Path) -> None:
    f = tmp_path / "t.bin"
    data = bytearray(np.random.default_rng(1).integers(0, 256, 10 << 20, dtype=np.uint8).tobytes())
    f.write_bytes(data)
    rec = {"t.bin": integrity.describe(f)}
    offsets = integrity.sample_offsets(len(data))
    assert len(offsets) == integrity.SAMPLE_BLOCKS and offsets[0] == 0
    assert offsets[-1] + integrity.SAMPLE_BYTES == len(data)
    gap = offsets[1] + integrity.SAMPLE_BYTES + 10  # a byte no sampled block covers
    data[gap] ^= 0xFF
    f.write_bytes(data)
    assert integrity.problem(tmp_path, rec) is None  # the price of O(1): missed by the sample
    assert integrity.problem(tmp_path, rec, full=True) == "t.bin fails its checksum"


def _peak_rss_mib(tmp_path: Path, n_bytes: int) -> float:
    text = corpus(tmp_path / f"c{n_bytes}.txt", n_bytes)
    cfg = {
        "source": "text",
        "path": str(text),
        "doc_separator": SEP,
        "cache_dir": str(tmp_path / f"k{n_bytes}"),
    }
    out, err = child(cfg).communicate(timeout=300)
    assert out, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])["maxrss_kib"] / 1024


@pytest.mark.slow
def test_packing_rss_is_bounded_and_flat(tmp_path: Path) -> None:
    small, big = _peak_rss_mib(tmp_path, 24 << 20), _peak_rss_mib(tmp_path, 72 << 20)
    print(f"peak RSS: {small:.0f} MiB (24 MiB corpus), {big:.0f} MiB (72 MiB)")
    # held whole, 72 MiB of text is 72 MiB as one str plus 144 MiB of uint16 tokens
    assert big < 300, (small, big)
    assert big < small * 1.1, (small, big)


def test_sigterm_while_packing_raises_and_leaves_nothing(text_cfg, tmp_path: Path, monkeypatch) -> None:
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from gptlab.data import writer
    from gptlab.data.sources import stream as streaming

    real = writer.encode

    def slow(*args):
        time.sleep(0.2)
        return real(*args)

    monkeypatch.setattr(writer, "encode", slow)
    monkeypatch.setattr(writer, "BATCH_BYTES", 64)
    monkeypatch.setattr(streaming, "READ_CHUNK", 4096)  # 256 slow batches: SIGTERM lands among them
    text = corpus(tmp_path / "c.txt", 1 << 20)
    cache = tmp_path / "cache"

    def kill_when_packing() -> None:
        while not list(cache.glob(".*")):
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=kill_when_packing, daemon=True).start()
    with pytest.raises(SIGTERMException):
        prepare_tokens(
            DataConfig(source="text", path=str(text), doc_separator=SEP, cache_dir=str(cache), num_proc=1)
        )
    assert not list(cache.glob(".*")) and not list(cache.glob("*/meta.json"))
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is put back


@pytest.mark.slow
def test_sigterm_while_packing_ends_the_run_preempted(tmp_path: Path) -> None:
    from tests.conftest import TINY

    text = corpus(tmp_path / "big.txt", 256 << 20)
    cache, run_dir = tmp_path / "cache", tmp_path / "run"
    args = [
        *TINY,
        f"data.cache_dir={cache}",
        f"hydra.run.dir={run_dir}",
        "data.source=text",
        "data.num_proc=1",
    ]
    args += [f"data.path={text}", f"data.doc_separator='{SEP}'", "data.max_bytes=null", "trainer.max_steps=2"]
    proc = subprocess.Popen(
        [sys.executable, str(Path(SRC).parent / "train.py"), *args],
        env={**os.environ, "PYTHONPATH": SRC, "WANDB_MODE": "offline"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 240
    while not list(cache.glob(".*/train.bin")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-3000:]
    assert json.loads((run_dir / "metrics.json").read_text())["status"] == "preempted"
    assert not list(cache.glob(".*")) and not list(cache.glob("*/meta.json"))


def _gap(size: int) -> int:
    """A byte offset no sampled block covers."""
    offsets = integrity.sample_offsets(size)
    assert len(offsets) == integrity.SAMPLE_BLOCKS
    return offsets[1] + integrity.SAMPLE_BYTES + 10


def test_byte_flipped_outside_the_sample_is_found_by_the_full_check(tmp_path: Path, caplog) -> None:
    """Issue 25.8: meta.json's full CRC is checked once per new version of a cache file."""
    text = corpus(tmp_path / "c.txt", 1 << 20)
    cfg = DataConfig(source="text", path=str(text), doc_separator=SEP, cache_dir=str(tmp_path / "cache"))
    first = prepare_tokens(cfg)
    good = first.path("train").read_bytes()
    raw = bytearray(good)
    raw[_gap(len(raw))] ^= 0x01
    first.path("train").write_bytes(raw)
    assert integrity.problem(first.directory, first.meta["files"]) is None  # the sample misses it
    with caplog.at_level(logging.WARNING, logger="gptlab.data.cache"):
        again = prepare_tokens(cfg)
    damaged = [r.getMessage() for r in caplog.records if "are damaged" in r.getMessage()]
    assert damaged == [
        f"cached tokens at {first.directory} are damaged (train.bin fails its checksum): packing them again"
    ]
    assert again.path("train").read_bytes() == good  # rebuilt


def test_full_check_runs_once_per_version_of_a_file(tmp_path: Path, monkeypatch) -> None:
    text = corpus(tmp_path / "c.txt", 1 << 20)
    cfg = DataConfig(source="text", path=str(text), doc_separator=SEP, cache_dir=str(tmp_path / "cache"))
    packed = prepare_tokens(cfg)
    verified = json.loads((packed.directory / integrity.VERIFIED).read_text())
    assert set(verified) == {"train.bin", "val.bin"}  # the packer vouches for what it just wrote
    reads: list[str] = []
    real = integrity.full_crc
    monkeypatch.setattr(integrity, "full_crc", lambda path: reads.append(path.name) or real(path))
    prepare_tokens(cfg)
    assert reads == []  # nothing new: no full read
    train = packed.path("train")
    os.utime(train, ns=(train.stat().st_atime_ns, train.stat().st_mtime_ns + 10**9))  # a new version
    prepare_tokens(cfg)
    prepare_tokens(cfg)
    assert reads == ["train.bin"]  # read whole once, then recorded
    (packed.directory / integrity.VERIFIED).unlink()  # a cache packed before verified.json existed
    prepare_tokens(cfg)
    prepare_tokens(cfg)
    assert sorted(reads) == ["train.bin", "train.bin", "val.bin"]
