"""Training one run: the composition root (``registry``: which parts build a run), the
checks a config passes before anything is built (``checks``), the settling of what a
config leaves open (``resolve``), the session that runs the loop (``session``) and its
data-parallel launch (``data_parallel``)."""
