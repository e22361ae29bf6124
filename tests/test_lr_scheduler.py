"""Learning-rate schedulers: the spec's points, argument checks, config round trip."""
import math

import pytest

from raymod import lr_scheduler as lrs


def test_factor_scheduler_with_constant_warmup():
    base, factor = 1.0, 0.1
    sched = lrs.FactorScheduler(step=100, factor=factor, stop_factor_lr=1e-4, base_lr=base,
                                warmup_steps=20, warmup_begin_lr=0.1, warmup_mode="constant")
    assert sched(0) == 0.1 and sched(10) == 0.1 and sched(19) == 0.1
    assert sched(21) == base and sched(100) == base
    assert sched(101) == pytest.approx(base * factor)
    assert sched(200) == pytest.approx(base * factor)
    assert sched(201) == pytest.approx(base * factor ** 2)
    assert sched(1000) == pytest.approx(1e-4)  # floor
    # a pure function of num_update: going back gives the earlier rate again
    assert sched(150) == pytest.approx(base * factor) and sched.base_lr == base


def test_factor_scheduler_linear_warmup():
    sched = lrs.FactorScheduler(step=10, factor=0.5, base_lr=2.0, warmup_steps=4)
    assert [sched(n) for n in range(5)] == [0.0, 0.5, 1.0, 1.5, 2.0]


def test_multifactor_scheduler():
    base, factor = 3.0, 0.5
    sched = lrs.MultiFactorScheduler(step=[15, 25], factor=factor, base_lr=base,
                                     warmup_steps=10, warmup_begin_lr=0.05, warmup_mode="linear")
    assert sched(0) == 0.05
    assert sched(5) == pytest.approx((base + 0.05) / 2)
    assert sched(15) == base
    assert sched(16) == base * factor and sched(20) == base * factor
    assert sched(25) == base * factor
    assert sched(26) == base * factor ** 2 and sched(100) == base * factor ** 2


def test_poly_scheduler():
    base = 3.0
    sched = lrs.PolyScheduler(max_update=1000, base_lr=base, pwr=2, warmup_steps=100,
                              warmup_begin_lr=0, warmup_mode="linear")
    assert sched(0) == 0
    assert sched(50) == pytest.approx(base / 2)
    assert sched(100) == pytest.approx(base)
    rates = [sched(n) for n in range(100, 1001, 50)]
    assert all(a > b for a, b in zip(rates, rates[1:]))
    assert sched(500) < 1.6
    assert sched(1000) == sched.final_lr == 0
    assert sched(5000) == 0


def test_poly_scheduler_final_lr():
    sched = lrs.PolyScheduler(max_update=10, base_lr=1.0, pwr=1, final_lr=0.2)
    assert sched(0) == 1.0 and sched(5) == pytest.approx(0.6) and sched(10) == 0.2


def test_cosine_scheduler():
    base, final = 3.0, 0.1
    sched = lrs.CosineScheduler(max_update=1000, base_lr=base, final_lr=final)
    assert sched(0) == base
    assert sched(1000) == pytest.approx(final) and sched(2000) == final
    assert sched(500) > 1.5
    assert sched(500) == pytest.approx(final + (base - final) / 2)
    assert sched(250) == pytest.approx(final + (base - final) * (1 + math.cos(math.pi / 4)) / 2)


def test_base_scheduler_is_constant_after_warmup():
    sched = lrs.LRScheduler(base_lr=0.5, warmup_steps=5, warmup_begin_lr=0.0)
    assert sched(0) == 0.0 and sched(5) == 0.5 and sched(10 ** 6) == 0.5
    assert sched.warmup_final_lr == 0.5
    with pytest.raises(ValueError, match="past the warmup"):
        sched.get_warmup_lr(5)


def test_changing_base_lr_moves_the_whole_schedule():
    sched = lrs.PolyScheduler(max_update=100, base_lr=1.0, warmup_steps=10)
    sched.base_lr = 2.0
    assert sched(5) == pytest.approx(1.0) and sched(10) == 2.0


@pytest.mark.parametrize("make,match", [
    (lambda: lrs.FactorScheduler(step=0), "step"),
    (lambda: lrs.FactorScheduler(step=10, factor=1.5), "factor"),
    (lambda: lrs.MultiFactorScheduler(step=[10, 10]), "increasing"),
    (lambda: lrs.MultiFactorScheduler(step=[20, 10]), "increasing"),
    (lambda: lrs.MultiFactorScheduler(step=[0, 10]), "step"),
    (lambda: lrs.MultiFactorScheduler(step=[5], factor=2), "factor"),
    (lambda: lrs.PolyScheduler(max_update=0), "max_update"),
    (lambda: lrs.PolyScheduler(max_update=10, warmup_steps=10), "max_update"),
    (lambda: lrs.CosineScheduler(max_update=100, base_lr=0.1, warmup_begin_lr=0.2),
     "warmup_begin_lr"),
    (lambda: lrs.LRScheduler(warmup_steps=-1), "warmup_steps"),
    (lambda: lrs.LRScheduler(warmup_mode="cubic"), "warmup_mode"),
])
def test_bad_arguments_raise_value_error(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("make", [
    lambda: lrs.MultiFactorScheduler(step=15),
    lambda: lrs.FactorScheduler(step=2.5),
    lambda: lrs.PolyScheduler(max_update=10, pwr="2"),
])
def test_bad_argument_types_raise_type_error(make):
    with pytest.raises(TypeError):
        make()


@pytest.mark.parametrize("sched", [
    lrs.FactorScheduler(step=7, factor=0.9, base_lr=0.2, warmup_steps=3),
    lrs.MultiFactorScheduler(step=[3, 9], factor=0.1, warmup_mode="constant", warmup_steps=2),
    lrs.PolyScheduler(max_update=50, pwr=3, final_lr=0.001),
    lrs.CosineScheduler(max_update=50, base_lr=1.0, final_lr=0.1, warmup_steps=5),
])
def test_config_round_trip(sched):
    again = lrs.create(type(sched).__name__, **sched.get_config())
    assert type(again) is type(sched)
    assert [again(n) for n in range(60)] == [sched(n) for n in range(60)]


def test_create_by_alias_and_unknown_name():
    assert type(lrs.create("cosine", max_update=10)) is lrs.CosineScheduler
    assert type(lrs.create("MultiFactor", step=[1])) is lrs.MultiFactorScheduler
    with pytest.raises(ValueError, match="factorscheduler"):
        lrs.create("exponential")
