"""The job on a cluster allocation: rollout servers, trainer ranks, the run, teardown.

``aes.run`` enters :func:`cluster_session` around the mode; the ``cluster`` config section
(:class:`aes.config.ClusterConfig`, ``conf/cluster/``, a cluster's own values in
``slurm/cluster_profile/``) says what to start. Modules:

- :mod:`aes.cluster.layout` — the allocation (SLURM's variables) and its split into servers and ranks
- :mod:`aes.cluster.servers` — server processes: start, health checks, restart with new weights, stop
- :mod:`aes.cluster.session` — the context manager that runs it all
- :mod:`aes.cluster.distributed` — trainer ranks: rank 0 runs the flywheel, the others follow its updates
- :mod:`aes.cluster.llamacpp_server` — llama.cpp's OpenAI-compatible server on a GGUF (CPU servers, tests)
- :mod:`aes.cluster.guard`, :mod:`aes.cluster.rank` — process entry points the session starts
"""

from aes.cluster.servers import ServerError, active_group
from aes.cluster.session import Job, cluster_session

__all__ = ["Job", "ServerError", "active_group", "cluster_session"]
