"""The simulated GB10 cluster: host tool stand-ins, the simulated R37 engine, demo cluster and lab.

sim imports nothing from the cockpit except `cockpit.constants`: the cockpit reaches it only over SSH
and HTTP, exactly as it reaches real hosts.
"""
