#!/usr/bin/env python3
"""Writes the bundled example inputs in examples/data/ (needs python3-numpy).

Run from the repository root: python3 examples/make_data.py
The files are committed; this script documents where they came from.
"""
import numpy as np

rng = np.random.default_rng(20261121)
OUT = "examples/data/"
np.save(OUT + "mlp_x.npy", rng.uniform(-1, 1, size=(5, 4)).astype(np.float32))
labels = np.zeros((5, 2), dtype=np.float32)
labels[np.arange(5), [0, 1, 1, 0, 1]] = 1.0
np.save(OUT + "mlp_labels.npy", labels)
np.save(OUT + "x3.npy", np.array([0.5, -1.0, 2.0], dtype=np.float32))
np.save(OUT + "x4.npy", np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float32))
