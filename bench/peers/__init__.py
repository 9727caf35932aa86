"""Peers run on the same machine with the same workload, each in a process of its own (so its
CPU is its own): ``python -m bench.peers KIND --rate R --count N ...`` prints one run as JSON."""
