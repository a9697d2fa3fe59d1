"""The counter-based hash of :mod:`graphpipe.ops.random` in torch int64 arithmetic.

GPU samplers run as torch ops, so they need the same variates as the numba kernels:
``uniform(key, counter)`` here is bit-identical to the numba ``uniform`` for every
key and counter. torch has no uint64 arithmetic on CUDA, so the uint64 algebra is
carried out on int64 two's-complement bits: addition and multiplication wrap modulo
2**64 exactly as uint64 does, and a logical right shift is an arithmetic shift with the
sign-extended high bits masked off. Works on any device.
"""

import torch

__all__ = ["as_int64_key", "hash2", "logical_shift_right", "mix64", "uniform", "uniform_open"]


def _signed(value: int) -> int:
    """The int64 with the same bits as the uint64 ``value``."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN = _signed(0x9E3779B97F4A7C15)
_M1 = _signed(0xBF58476D1CE4E5B9)
_M2 = _signed(0x94D049BB133111EB)
_INV_2_53 = 1.0 / 9007199254740992.0


def as_int64_key(key: int) -> int:
    """A uint64 key (a Python int in ``[0, 2**64)``) as the int64 with the same bits."""
    return _signed(int(key))


def logical_shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """The uint64 ``x >> bits`` on int64 bits: arithmetic shift, sign extension masked off."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64 finaliser on int64 tensors holding uint64 bits."""
    x = (x ^ logical_shift_right(x, 30)) * _M1
    x = (x ^ logical_shift_right(x, 27)) * _M2
    return x ^ logical_shift_right(x, 31)


def hash2(key, counter: torch.Tensor) -> torch.Tensor:
    """int64 bits of the uint64 hash of (key, counter); ``key`` a uint64 int or int64 tensor."""
    if not isinstance(key, torch.Tensor):
        key = as_int64_key(key)
    return mix64(key + (counter.to(torch.int64) + 1) * _GOLDEN)


def uniform(key, counter: torch.Tensor) -> torch.Tensor:
    """float64 uniforms on [0, 1) from (key, counter): the numba ``uniform``, bit for bit."""
    return logical_shift_right(hash2(key, counter), 11).to(torch.float64) * _INV_2_53


def uniform_open(key, counter: torch.Tensor) -> torch.Tensor:
    """float64 uniforms on (0, 1): the numba ``uniform_open``, bit for bit."""
    return (logical_shift_right(hash2(key, counter), 11).to(torch.float64) + 0.5) * _INV_2_53
