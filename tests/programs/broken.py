"""A program that does not compile: the doctor must say so in one line."""

DOCTOR = {"mesh": "x=4,y=2", "args": ["[8{y}, 64{x}, 128]", "[64, 512{x}]"]}


def step(x, w):
    return x @ w  # 128 vs 64: the contraction does not match
