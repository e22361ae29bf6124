"""One module per failure type, each the actions of one row of the controller's table.

========================= ============================================== ======================
failure (event)           action(s)                                      module
========================= ============================================== ======================
worker lost (WorkerDied)  Forget; its slices recomputed by the others    :mod:`.worker_lost`
worker hung (WorkerHung)  StopWorkers (process too); then as a loss      :mod:`.worker_hung`
server lost (ServerDied)  RestoreServers (snapshot + replay), Retry      :mod:`.server_lost`
node drained              LeaveNodes at the step boundary                :mod:`.node_drained`
too few workers           WaitForWorkers, GoShortHanded or Fail          ``cluster/pool.py``
========================= ============================================== ======================

The first three are mixed into
:class:`~raymod.cluster.remote_group.RayExecutorGroup`, the drain into
:class:`~raymod.cluster.pool.WorkerPool`; the table itself is
:data:`raymod.cluster.controller.TRANSITIONS`.
"""
