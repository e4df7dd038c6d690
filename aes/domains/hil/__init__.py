"""Human-in-the-loop tasks (paper §4.5, App. B): seeds, the proposer's instructions and the judge
prompt of ``ask_human``. The machinery (registry, settings, tool, admission) is :mod:`aes.hil`."""
