"""`memq install|uninstall <agent>`: memq's hooks and MCP server in a coding agent's settings."""

from worker.ops.install.agents import plan_install, plan_uninstall
from worker.ops.install.model import (
    AGENTS,
    Edit,
    HttpHooks,
    InstallError,
    Plan,
    Target,
    UnsupportedInstallError,
)
from worker.ops.install.writes import apply_plan, describe_plan

__all__ = [
    "AGENTS",
    "Edit",
    "HttpHooks",
    "InstallError",
    "Plan",
    "Target",
    "UnsupportedInstallError",
    "apply_plan",
    "describe_plan",
    "plan_install",
    "plan_uninstall",
]
