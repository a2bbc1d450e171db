"""Reports: run and sweep directories in, an offline HTML page with figures and tables out.

``report`` reads run directories (never live objects), so a report can be made on another
machine, later, from copied directories. One module per concept:

* :mod:`~rlperf.report.load`: finding runs, sweeps and inference results in directories;
* :mod:`~rlperf.report.summary`: per-configuration numbers without warm-up iterations;
* :mod:`~rlperf.report.analysis`: scaling knees, speed-ups, time to target;
* :mod:`~rlperf.report.diagnose`: one plain-language diagnosis per configuration;
* :mod:`~rlperf.report.plots`: the PNG figures (matplotlib, Agg canvas);
* :mod:`~rlperf.report.tables`: tables as CSV, Markdown and HTML;
* :mod:`~rlperf.report.render`: the HTML page;
* :mod:`~rlperf.report.build`: putting it together (``rlperf report``);
* :mod:`~rlperf.report.bench_scores`, :mod:`~rlperf.report.bench_stats`,
  :mod:`~rlperf.report.bench_section`, :mod:`~rlperf.report.bench_plots`: the benchmark
  section (``rlperf bench``): the score of a run, rliable's aggregates, the section, its figures;
* :mod:`~rlperf.report.bench_target`, :mod:`~rlperf.report.bench_target_section`: a bench's
  time to target (``rlperf bench --target``): each seed's, the median over seeds with its
  interval, and its section;
* :mod:`~rlperf.report.browser`: opening the page in headless Chromium to check it.
"""
