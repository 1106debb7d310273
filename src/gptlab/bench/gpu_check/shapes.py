"""What the check runs: the full shapes for one H100, or a tiny dry run for a CPU."""

from __future__ import annotations

from dataclasses import dataclass, field

# bf16 keeps 8 significant bits (unit roundoff u = 2^-8). A loss passes through ~2L+2 sequential bf16
# matmuls (L = 12); independent roundings grow like sqrt(26)·u ≈ 5·2^-8 ≈ 2% of the value. Each of
# the 50 steps' bf16+compile loss must lie within 2^-5 (3.1%) of the fp32 eager loss, relatively.
PARITY_RTOL = 2.0**-5


@dataclass(frozen=True)
class Shapes:
    """Model overrides, batch and step counts, section time limits (seconds) and the whole budget."""

    gpt2: tuple[str, ...]
    llama: tuple[str, ...]
    common: tuple[str, ...]
    warmup: int
    steps: int
    parity_steps: int
    budget: float
    backend: str  # torch.compile's backend: inductor on a GPU; eager for the CPU dry run
    limits: dict[str, float] = field(default_factory=dict)


LIMITS = {  # seconds; the sum exceeds the budget on purpose: a section gets what is left, at most this
    "env": 20,
    "sdpa": 30,
    "gpt2_bare_eager": 45,
    "gpt2_bare_compiled": 120,
    "gpt2_lightning_eager": 45,
    "gpt2_lightning_compiled": 75,
    "llama_350m_compiled": 100,
    "parity": 60,
    "memory": 60,
    "ddp": 45,
    "fsdp": 60,
}

FULL = Shapes(
    gpt2=("model=gpt2", "data.batch_size=16"),
    llama=("model=llama_350m", "model.block_size=1024", "data.batch_size=8"),
    common=("trainer=gpu", "trainer.precision=bf16-mixed", "data.max_bytes=40000000"),
    warmup=5,
    steps=20,
    parity_steps=50,
    budget=420.0,
    backend="inductor",
    limits=LIMITS,
)

TINY = ("model.n_layer=2", "model.n_embd=32", "model.n_head=2", "model.block_size=32", "data.batch_size=2")
DRY = Shapes(
    gpt2=("model=gpt2", *TINY),
    llama=("model=llama_350m", *TINY),
    common=("trainer.accelerator=cpu", "trainer.precision=bf16-mixed", "data.max_bytes=200000"),
    warmup=1,
    steps=2,
    parity_steps=3,
    budget=300.0,
    backend="eager",
    limits={k: 120.0 for k in LIMITS},
)

RUN = (  # every run: no validation, checkpoints, sample or figures inside the measured window
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "sample.max_new_tokens=0",
    "callbacks.telemetry.figures=false",
    "callbacks.tasks.names=[]",
)
