"""One process, many devices: the data-parallel executor group."""
from .executor_group import DataParallelExecutorGroup
from .slicing import batch_axis, split_input_slice

__all__ = ["DataParallelExecutorGroup", "split_input_slice", "batch_axis"]
