#!/usr/bin/python3
"""Writes testdata/: small tests in ONNX's node-test layout whose outcomes the
runner must classify as runner_test.sh expects (a pass, values out of and
within tolerance, a wrong dtype, a wrong shape, NaN placement, exact integers,
an unsupported op, a shape fed as an input, a loop that never ends). Run once by hand (the files are
checked in, so the test needs no Python):

    /usr/bin/python3 tests/conformance/make_runner_fixtures.py
"""

import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata")
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def write(name, nodes, inputs, outputs, feeds, expected):
    """One test folder: model.onnx and test_data_set_0/."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    model = helper.make_model(graph, producer_name="kgrad-runner-fixture",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    d = os.path.join(OUT, name, "test_data_set_0")
    os.makedirs(d)
    with open(os.path.join(OUT, name, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for kind, values in (("input", feeds), ("output", expected)):
        for j, v in enumerate(values):
            with open(os.path.join(d, f"{kind}_{j}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(v).SerializeToString())


def binary(name, op, x, y, expected, dtype=F):
    shape = list(x.shape)
    write(name, [helper.make_node(op, ["x", "y"], ["z"])],
          [("x", dtype, shape), ("y", dtype, shape)], [("z", dtype, shape)],
          [x, y], [expected])


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    rng = np.random.RandomState(0)
    x = rng.randn(2, 3).astype(np.float32)
    y = rng.randn(2, 3).astype(np.float32)
    z = x + y
    binary("test_pass_add", "Add", x, y, z)
    # Within rtol=1e-3 of the reference: still a pass.
    binary("test_pass_within_tolerance", "Add", x, y, z * np.float32(1 + 2e-4))
    off = z.copy()
    off[1, 2] += 0.5
    binary("test_wrong_value", "Add", x, y, off)
    binary("test_wrong_dtype", "Add", x, y, z.astype(np.float64))
    binary("test_wrong_shape", "Add", x, y, z.reshape(3, 2))
    # 0/0 is NaN at [0, 0]: the reference must have NaN there too.
    num = np.array([[0, 1, 2]], np.float32)
    den = np.array([[0, 2, 4]], np.float32)
    binary("test_pass_nan", "Div", num, den, np.array([[np.nan, 0.5, 0.5]], np.float32))
    binary("test_wrong_nan", "Div", num, den, np.array([[0, 0.5, 0.5]], np.float32))
    a = np.array([[1, 2, 3]], np.int64)
    binary("test_pass_int", "Add", a, a, a + a, I64)
    binary("test_wrong_int", "Add", a, a, a + a + np.array([[0, 0, 1]], np.int64), I64)
    # A shape fed as an input: refused unless --fold-integer-inputs makes it a
    # constant.
    write("test_fold_reshape", [helper.make_node("Reshape", ["x", "shape"], ["z"])],
          [("x", F, [2, 3]), ("shape", I64, [2])], [("z", F, [3, 2])],
          [x, np.array([3, 2], np.int64)], [x.reshape(3, 2)])
    write("test_refused_op", [helper.make_node("Hardmax", ["x"], ["z"])],
          [("x", F, [2, 2])], [("z", F, [2, 2])],
          [np.eye(2, dtype=np.float32)], [np.eye(2, dtype=np.float32)])
    # A loop whose trip count and condition never stop it: the runner's time
    # limit must (the executor's own limits take about a minute).
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", F, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", F, [1])])
    write("test_crash_endless_loop",
          [helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.ones(1, np.float32))),
           helper.make_node("Constant", [], ["m"], value=numpy_helper.from_array(np.array(2**62, np.int64))),
           helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True))),
           helper.make_node("Loop", ["m", "c", "v"], ["z"], body=body)],
          [("v", F, [1])], [("z", F, [1])],
          [np.zeros(1, np.float32)], [np.zeros(1, np.float32)])


if __name__ == "__main__":
    main()
