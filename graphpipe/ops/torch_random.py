"""The counter hash of :mod:`graphpipe.ops.random` in torch ops on any device, bit-identical
to the numba functions. CUDA has no uint64 arithmetic, so the uint64 algebra runs on int64
bits: addition and multiplication wrap modulo 2**64 alike, and a logical right shift is an
arithmetic one with the sign-extended bits masked off.
"""

import torch

__all__ = ["as_int64_key", "hash2", "logical_shift_right", "mix64", "uniform", "uniform_open"]


def as_int64_key(key: int) -> int:
    """A uint64 key (a Python int in ``[0, 2**64)``) as the int64 with the same bits."""
    key = int(key) & ((1 << 64) - 1)
    return key - (1 << 64) if key >= 1 << 63 else key


_GOLDEN = as_int64_key(0x9E3779B97F4A7C15)
_M1 = as_int64_key(0xBF58476D1CE4E5B9)
_M2 = as_int64_key(0x94D049BB133111EB)
_INV_2_53 = 1.0 / 9007199254740992.0


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
