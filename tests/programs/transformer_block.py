"""A small transformer MLP block with tensor (TP) and sequence (SP) parallelism, and the
jax#21562 layout change inside the same jitted step; the doctor's test program.

Mesh ``x=4,y=2``: batch over ``y``, sequence (SP) and hidden (TP) over ``x``.
``python -m executor doctor tests/programs/transformer_block.py:train_step``
reads ``DOCTOR`` below for the mesh and the example inputs.
"""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

#: mesh and example inputs (synth type syntax: global shape with the mesh axes of each dim)
DOCTOR = {
    "mesh": "x=4,y=2",
    "args": ["[8{y}, 64{x}, 128]", "[128, 512{x}]", "[512{x}, 128]"],
    "dtype": "float32",
}


def _constrain(a, spec):
    return jax.lax.with_sharding_constraint(a, spec)


def mlp(x, w1, w2):
    h = _constrain(x, P("y", None, None))          # SP -> TP: gather the sequence
    h = jax.nn.gelu(h @ w1)                         # [8{y}, 64, 512{x}]
    o = h @ w2                                      # partial sums over x
    return _constrain(o, P("y", "x", None))         # TP -> SP: reduce-scatter


def train_step(x, w1, w2):
    o = mlp(x, w1, w2) + x
    o = _constrain(o, P("y", None, "x"))            # the jax#21562 layout: P('y', None, 'x')
    o = _constrain(o, P(None, ("x", "y"), None))    # -> P(None, ('x','y'), None): full remat
    return jnp.tanh(o)


def train_step_fixed(x, w1, w2):
    from executor import reshard

    o = mlp(x, w1, w2) + x
    o = _constrain(o, P("y", None, "x"))
    o = reshard(o, P(None, ("x", "y"), None), src=P("y", None, "x"))  # the doctor's suggestion
    return jnp.tanh(o)


@jax.jit
def _relayout(o):
    o = _constrain(o, P("y", None, "x"))
    return _constrain(o, P(None, ("x", "y"), None))  # nested jit: the same layout change


def train_step_nested(x, w1, w2):
    o = mlp(x, w1, w2) + x
    return jnp.tanh(_relayout(o))                    # the remat happens inside this call
