"""Studies: many runs to one report. ``study`` (rlperf study quick and thesis),
``thesis_study`` (the thesis's experiment matrices scaled to the machine) and ``bench``
(rlperf bench: presets across games and seeds, with intervals)."""
