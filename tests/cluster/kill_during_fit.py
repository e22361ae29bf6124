"""A fit batch callback that kills a worker twice: once between steps, once during one."""
import threading

import ray


def kill_one(pool, killed):
    """Kill the higher-ranked of two live workers (recording its rank); nothing otherwise."""
    alive = dict(pool.workers)  # the driver thread may change the pool meanwhile
    if len(alive) == 2:
        rank = max(alive)
        ray.kill(alive[rank], no_restart=True)
        killed.append(rank)


def killing_callback(batch_size, between, during, counted, killed):
    """``batch_end_callback`` that appends to ``counted`` how far the metric's sample count
    is from ``batch_size`` per batch so far (0: every row counted once), kills a worker after
    batch ``between = (epoch, nbatch)`` and, 10 ms into the steps after ``during``, another
    (once the pool has two workers again)."""
    def on_batch(param):
        counted.append(param.eval_metric.global_num_inst - batch_size * (param.nbatch + 1))
        pool = param.locals["self"]._pool
        if (param.epoch, param.nbatch) == between:
            kill_one(pool, killed)
        if (param.epoch, param.nbatch) == during:
            pool.wait_for(2, 120)
            threading.Timer(0.01, kill_one, args=(pool, killed)).start()
    return on_batch
