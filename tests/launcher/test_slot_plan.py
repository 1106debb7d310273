"""The slot rules (gptlab.launcher.slots) on hand-made nodes: how many jobs run at once, which GPUs
and how many threads each gets, and the settings that are refused. The expected slots are written
out here for each node, not derived from the code."""

from __future__ import annotations

import pytest

from gptlab.launcher.slots import JobNeeds, SlotError, plan_slots, slot_env

EIGHT = [str(i) for i in range(8)]


def gpu_jobs(devices: int, n: int = 64) -> list[JobNeeds]:
    return [JobNeeds(on_gpu=True, devices=devices)] * n


def test_auto_fills_an_eight_gpu_node_with_one_gpu_jobs() -> None:
    slots = plan_slots("auto", gpu_jobs(1), EIGHT, cores=64)
    assert [s.gpus for s in slots] == [("0",), ("1",), ("2",), ("3",), ("4",), ("5",), ("6",), ("7",)]
    assert {s.threads for s in slots} == {8}  # 64 cores ÷ 8 slots


def test_two_gpu_jobs_get_disjoint_pairs() -> None:
    slots = plan_slots("auto", gpu_jobs(2), EIGHT, cores=64)
    assert [s.gpus for s in slots] == [("0", "1"), ("2", "3"), ("4", "5"), ("6", "7")]
    assert {s.threads for s in slots} == {8}  # 64 ÷ (4 slots × 2 processes)
    used = [g for s in slots for g in s.gpus]
    assert len(used) == len(set(used))  # no GPU in two slots


def test_visible_gpu_ids_are_kept_as_given() -> None:
    slots = plan_slots("auto", gpu_jobs(2), ["4", "5", "6", "7"], cores=16)
    assert [slot_env(s)["CUDA_VISIBLE_DEVICES"] for s in slots] == ["4,5", "6,7"]


def test_fewer_jobs_than_slots_take_fewer_slots() -> None:
    slots = plan_slots("auto", gpu_jobs(1, n=3), EIGHT, cores=48)
    assert len(slots) == 3 and {s.threads for s in slots} == {16}


def test_cpu_auto_is_one_slot_with_every_core_and_n_slots_split_them() -> None:
    cpu = [JobNeeds(on_gpu=False, devices=1)] * 8
    (one,) = plan_slots("auto", cpu, [], cores=2)
    assert one.threads == 2 and one.gpus == ()
    two = plan_slots(2, cpu, [], cores=2)
    assert [s.threads for s in two] == [1, 1]
    ddp = plan_slots(2, [JobNeeds(on_gpu=False, devices=2)] * 4, [], cores=8)
    assert [s.threads for s in ddp] == [2, 2]  # 8 cores ÷ (2 slots × 2 ranks)
    assert [s.threads for s in plan_slots(2, cpu, [], cores=8, threads=3)] == [3, 3]  # set: kept


def test_ports_are_the_slots_own() -> None:
    slots = plan_slots(2, [JobNeeds(False, 2)] * 2, [], cores=4, ports=[41000, 41001])
    assert [slot_env(s)["GPTLAB_MASTER_PORT"] for s in slots] == ["41000", "41001"]


@pytest.mark.parametrize(
    ("slots", "needs", "gpus", "message"),
    [
        (0, [JobNeeds(False, 1)], [], "hydra.launcher.slots=0 is not accepted; give auto or an integer >= 1"),
        ("4", [JobNeeds(False, 1)], [], "hydra.launcher.slots='4' is not accepted"),
        (5, gpu_jobs(2), EIGHT, "hydra.launcher.slots=5 with trainer.devices=2 needs 10 GPUs"),
        ("auto", gpu_jobs(16), EIGHT, "trainer.devices=16 is larger than the 8 GPU(s)"),
        ("auto", gpu_jobs(1), [], "the jobs ask for GPUs (trainer.accelerator) but none is visible"),
    ],
)
def test_impossible_settings_are_refused_in_one_line(
    slots: object, needs: list[JobNeeds], gpus: list[str], message: str
) -> None:
    with pytest.raises(SlotError) as err:
        plan_slots(slots, needs, gpus, cores=8)
    assert message in str(err.value) and "\n" not in str(err.value)
