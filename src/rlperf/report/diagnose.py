"""A short diagnosis per configuration: what bounds its speed and what would help.

It reads the phase split of the mean steady iteration and two rates the session records:
``perf/learner_samples_per_s`` (samples the learner gets through per second of ``learn``)
and ``perf/actor_steps_per_s`` (env steps acting produces per second of ``sample``). In a
synchronous runner the slower of the two sets the pace; the phase with the largest share
is where time goes. Advice names config keys and only suggests what the machine offers
(bf16 only on CPUs with bf16 units, a GPU learner only where the learner is on the CPU).
"""

from __future__ import annotations

from rlperf.report.summary import RunSummary

DOMINANT = 50.0
"""A phase above this share of the iteration bounds the configuration."""
NOTABLE = 20.0
"""A secondary phase above this share is worth a sentence."""
IDLE_CPU = 60.0
"""Whole-machine CPU use below this (with everything on the CPU) leaves cores idle."""
CONTENDED = 20.0
"""Other processes using this much of the machine's CPU (%) slowed the run down."""


def _bf16(s: RunSummary) -> bool:
    isa = s.cpu.get("isa") or {}
    return bool(isa.get("amx_bf16") or isa.get("avx512_bf16"))


def _learner_help(s: RunSummary) -> str:
    options = []
    if s.learner_device == "cpu":
        options.append("a GPU learner (runner.learner_device=cuda)")
    if s.precision == "fp32" and (s.learner_device != "cpu" or _bf16(s)):
        # CPU flags do not say whether bf16 pays: auto times it on the run's network.
        options.append("bf16 where it measures faster (runner.precision=auto)")
    if not options:
        options.append("fewer epochs or a smaller model")
    return " or ".join(options) + " would help"


def _actor_help(s: RunSummary) -> str:
    cores = int(s.cpu.get("available_cores") or 0)
    options = []
    if s.engine == "gymnasium" and s.env_id.startswith("ALE/"):
        where = "env.engine" if s.runner != "subprocess" else "runner.name=inproc with env.engine"
        options.append(f"a C++ engine ({where}=envpool or ale-vector)")
    if s.engine == "gymnasium" and s.runner == "inproc" and cores > 1:
        options.append(f"env worker processes (runner.name=subprocess, up to {cores} workers)")
    elif s.workers is not None and cores and s.workers < cores:
        options.append(f"more workers (up to {cores}, the cores here)")
    if s.algo in ("appo", "impala") and s.runner != "decoupled":
        options.append("acting beside learning (runner.name=decoupled)")
    if s.actor_device != "cpu":
        options.append("actors on the CPU (runner.actor_device=cpu: small batches wait on the GPU)")
    if not options:
        options.append("more cores, or fewer envs per core")
    return " or ".join(options) + " would help"


def diagnose(s: RunSummary) -> str:
    """One or two sentences about ``s``; says so when there is nothing to go on."""
    pct = s.phase_pct
    if not pct:
        return "no iterations recorded: nothing to diagnose"
    rates = ""
    if s.learner_sps and s.actor_sps:
        rates = (
            f" (the learner gets through {s.learner_sps:,.0f} samples/s, acting produces "
            f"{s.actor_sps:,.0f} steps/s)"
        )
    top = max(("sample", "load", "learn", "update"), key=lambda p: pct.get(p, 0.0))
    share = pct.get(top, 0.0)
    if share >= DOMINANT and top == "learn":
        text = f"learner-bound: learn is {share:.0f}% of the iteration{rates}; {_learner_help(s)}."
    elif share >= DOMINANT and top == "sample":
        text = f"actor-bound: sample is {share:.0f}% of the iteration{rates}; {_actor_help(s)}."
    elif share >= DOMINANT and top == "load":
        text = (
            f"transfer-bound: load is {share:.0f}% of the iteration; keep actors and learner on "
            "one device, or use pinned memory (a GPU learner with CPU actors does)."
        )
    elif share >= DOMINANT:
        text = (
            f"weight-sync-bound: update is {share:.0f}% of the iteration; actors on the "
            "learner's device (runner.actor_device) need no copy."
        )
    else:
        split = ", ".join(f"{p} {pct.get(p, 0.0):.0f}%" for p in ("sample", "learn") if p in pct)
        text = f"balanced: {split}{rates}; acting and learning could overlap (runner.name=decoupled with appo or impala)."
    extra = []
    for phase in ("load", "update", "other"):
        if phase != top and pct.get(phase, 0.0) >= NOTABLE:
            extra.append(f"{phase} takes {pct[phase]:.0f}%")
    if pct.get("other", 0.0) >= NOTABLE:
        extra.append("other is time outside the four phases (telemetry, checkpoints, Python)")
    cores = int(s.cpu.get("available_cores") or 0)
    if s.workers is not None and cores and s.workers > cores:
        extra.append(
            f"{s.workers} workers share {cores} cores: fewer workers would measure parallelism, not time-sharing"
        )
    elif (
        s.cpu_percent is not None
        and s.cpu_percent < IDLE_CPU
        and s.learner_device == "cpu"
        and s.actor_device == "cpu"
    ):
        extra.append(f"the CPU was only {s.cpu_percent:.0f}% busy: cores sat idle")
    others = s.others_cpu_percent
    if others is not None and others >= CONTENDED:
        extra.append(
            f"other processes used about {others:.0f}% of the machine's CPU meanwhile: these "
            "numbers are lower than on an idle machine"
        )
    if s.warmup_only:
        extra.append("warm-up iterations only: numbers include start-up costs")
    if not extra:
        return text
    notes = "; ".join(extra)
    return f"{text} {notes[0].upper()}{notes[1:]}."
