"""The simulated R37 engine: vLLM-like boot logs, rendezvous of the ranks, and the OpenAI-compatible API.

Entry points: `main(argv)` (the CLI of `python -m cockpit.sim.engine`) and `schedule_info()` (the timing
model's numbers). See README.md next to this file for what is modelled.
"""

from cockpit.sim.engine.boot import main
from cockpit.sim.engine.schedule import Schedule, schedule_info

__all__ = ["Schedule", "main", "schedule_info"]
