"""A document's own stream of uniforms (numba; no dask, no I/O): SplitMix64.

Steele, Lea & Flood (2014, "Fast splittable pseudorandom number generators"):
the state advances by a fixed odd constant and each output is the state
through a 64-bit finaliser; the top 53 bits make a uniform in [0, 1). The
stream of a document starts at its seed through the same finaliser, so
that the starts of nearby seeds are far apart on the state's cycle. It
costs a few ns a draw and nothing to start, where reseeding numba's
Mersenne Twister costs 1.3 µs (29 ns a token on documents of 45 tokens).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S27, _S30, _S31, _S11 = np.uint64(27), np.uint64(30), np.uint64(31), np.uint64(11)
_UNIT = 1.0 / 9007199254740992.0  # 2**-53


@njit(cache=True, nogil=True)
def _mix(z):
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@njit(cache=True, nogil=True)
def start_stream(state, seed):
    """Start the stream ``state`` (a uint64 array of one) at ``seed`` (a non-negative int)."""
    state[0] = _mix(np.uint64(seed))


@njit(cache=True, nogil=True)
def uniform(state):
    """The stream's next uniform in [0, 1)."""
    state[0] = state[0] + _GAMMA
    return float(_mix(state[0]) >> _S11) * _UNIT
