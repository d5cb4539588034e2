"""`oslens profile`: where a workload's time goes in the kernel, from the
records `oslens-engine profile` writes (BPF aggregates, per-thread times,
procfs snapshots, perf counters)."""
