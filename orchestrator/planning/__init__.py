"""Pure planning: which cells a host can accept and in what spelling, which cells a strategy launches first, which
localise a failure, and which past sweeps proved bad. No I/O: the engine (sweep/) asks, the plan answers."""
