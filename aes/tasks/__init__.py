"""Harbor task model: load, write and statically check task directories."""

from aes.tasks.config import TaskConfigError, TaskSpec, parse_task_toml, render_task_toml
from aes.tasks.static import Reason, check_task, check_task_with_config
from aes.tasks.task import Task, TaskLoadError, find_tasks, load_task, write_task

__all__ = [
    "Reason",
    "Task",
    "TaskConfigError",
    "TaskLoadError",
    "TaskSpec",
    "check_task",
    "check_task_with_config",
    "find_tasks",
    "load_task",
    "parse_task_toml",
    "render_task_toml",
    "write_task",
]
