"""Trace-driven simulation through the real scheduler and state machine.

- `traces`, `clusters`, `history`: the inputs (public traces, PAI's own job history, the Philly
  and ITP evaluation clusters);
- `workload`: a trace job as the gang PAI schedules; `policies`, `quota`, `private`: what is
  compared (PAI's HiveD scheduler, a quota baseline, each VC on a private cluster);
- `engine` with `queue`: the replay in virtual time (`pai.executors.simulated` runs the tasks);
- `metrics`, `report`, `plots`, `evaluation`: from replays to numbers, markdown and PNGs.
"""
