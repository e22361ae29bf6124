"""One process, many devices: the data-parallel executor group, and the executor-group
interface it shares with the Ray group."""
from .executor_group import DataParallelExecutorGroup
from .interface import ExecutorGroup
from .slicing import batch_axis, split_input_slice

__all__ = ["DataParallelExecutorGroup", "ExecutorGroup", "split_input_slice", "batch_axis"]
