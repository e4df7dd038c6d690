"""Human-in-the-loop tasks (paper §4.5, App. B; HiL-Bench): environments that teach when to ask.

A HiL task is a Harbor task whose instruction reads as complete but withholds details, plus a
blocker registry (``blockers.json`` at the task root, outside ``environment/``, ``tests/`` and
``solution/``: the solver's container never sees it, and Harbor ignores it) of what is withheld.
The reference solution reads the withheld answers from ``solution/answers.json`` only.

* :mod:`aes.hil.blockers` — the registry: load and validate, and ``answers.json``.
* :mod:`aes.hil.settings` — the three settings, derived without model calls: ``full_info``
  (the answers stated in the instruction), ``ask_human`` (incomplete + the tool), ``no_tool``.
* :mod:`aes.hil.human` — the simulated human behind ``ask_human``: a judge (a model, or a
  deterministic keyword matcher) decides which blockers a question asks about.
* :mod:`aes.hil.metrics` — Ask-F1 (question precision x blocker recall), ask rate.
* :mod:`aes.hil.admission` — every blocker must matter; guessing and doing nothing fail.
"""
