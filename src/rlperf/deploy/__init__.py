"""Deploying trained policies: export, calibration data, int8 quantization, timed inference.

One module per concept:

* :mod:`~rlperf.deploy.policy`: load a run's policy and the graph that gets exported;
* :mod:`~rlperf.deploy.export`: ONNX and TFLite files under ``RUN_DIR/export/``;
* :mod:`~rlperf.deploy.dataset`: representative observations recorded from the game;
* :mod:`~rlperf.deploy.quantize`: int8 post-training static quantization (ONNX Runtime, TFLite);
* :mod:`~rlperf.deploy.backends`: one small class per inference runtime behind one interface;
* :mod:`~rlperf.deploy.infer`: greedy episodes with the model call timed alone;
* :mod:`~rlperf.deploy.fidelity`: does the exported policy still act like the trained one?

The heavy runtimes (onnx, onnxruntime, litert-torch, ai-edge-litert) are optional (the
``export`` extra) and imported inside the functions that need them, so training and
``rlperf --help`` never load them.
"""
