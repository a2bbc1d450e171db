"""Experiment sweeps: a base config, a grid and/or a list of points, one isolated run each.

One module per concept:

* :mod:`~rlperf.sweep.spec`: the sweep file (YAML) and the shipped presets;
* :mod:`~rlperf.sweep.plan`: expanding a spec into named points with resolved configs;
* :mod:`~rlperf.sweep.machine`: what this machine offers, what a point needs, skip reasons;
* :mod:`~rlperf.sweep.ledger`: ``sweep.jsonl``, the status history of every point;
* :mod:`~rlperf.sweep.execute`: one attempt of one point in a fresh subprocess;
* :mod:`~rlperf.sweep.run`: the loop over points: resume, retry, failure isolation;
* :mod:`~rlperf.sweep.infer_point`: the process an inference point runs in;
* :mod:`~rlperf.sweep.tune`: ``rlperf tune``, a short search for the fastest configuration;
* :mod:`~rlperf.sweep.commands`: the ``rlperf sweep`` and ``rlperf tune`` subcommands.
"""
