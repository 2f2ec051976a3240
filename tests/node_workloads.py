"""A step for the node bench's test of failing configs (tests/test_bench_node.py): the bench
names a dataset and a step for every workload, and ``tests/workloads.py:breaks_on_rank_one``
(every trial fails on rank 1) needs a step that does nothing."""


def noop_step():
    def step(batch):
        return None

    return step
