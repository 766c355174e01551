#!/usr/bin/env python3
"""Writes the .npy fixtures of tests/tools/npy_test.cc with NumPy itself.

Run from the repository root (needs python3-numpy):
    python3 tests/tools/make_npy_fixtures.py
The outputs are committed; the test checks that kgrad reads them and writes the
same bytes.
"""
import numpy as np

OUT = "tests/tools/testdata/"
np.save(OUT + "f32_2x3.npy", np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1)
np.save(OUT + "f64_4.npy", np.array([1.0, -2.5, 3.25, 1e-300], dtype=np.float64))
np.save(OUT + "i32_scalar.npy", np.array(-7, dtype=np.int32))
np.save(OUT + "i64_2x1x2.npy", np.array([[[1, 2]], [[3, -4]]], dtype=np.int64))
np.save(OUT + "bool_3.npy", np.array([True, False, True]))
np.save(OUT + "f32_0x3.npy", np.zeros((0, 3), dtype=np.float32))
