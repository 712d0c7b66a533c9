#!/usr/bin/env python3
"""Writes the prompt texts of the real-shape GPU tests (deterministic: fixed seed, no
dependencies). Lengths are chosen to give about 1, 100, 300, 700 and 1100 tokens with the
synthetic 4096-token vocabulary of `moetier synth --n-vocab 4096`."""
import random

rng = random.Random(20261201)
words = ("the river model expert layer token cache memory speed router shared state attention delta rule "
         "prompt batch kernel tile subgroup bandwidth laptop gpu cpu offload placement context window").split()
code = ["def f(x):", "    return x * 2", "for i in range(10):", "    print(i, f(i))", "if a < b:", "    a, b = b, a"]
chinese = ["模型", "专家", "显存", "速度", "上下文", "注意力", "推理", "量化"]


def text(n_words):
    parts = []
    for i in range(n_words):
        r = rng.random()
        if r < 0.08:
            parts.append(rng.choice(code) + "\n")
        elif r < 0.14:
            parts.append(rng.choice(chinese))
        elif r < 0.2:
            parts.append(str(rng.randint(0, 99999)))
        else:
            parts.append(rng.choice(words))
    return " ".join(parts)


for name, n in [("t1", 0), ("t100", 25), ("t300", 72), ("t700", 165), ("t1100", 240)]:
    with open(f"{name}.txt", "w", encoding="utf-8") as f:
        f.write("x" if n == 0 else text(n))
