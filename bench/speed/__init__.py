"""Speed against the peers: the model (`run_benchmarks`), the scripts around it, the hosts it
runs on, the padding of its batches, and the sentence-vector and fill-mask tasks."""
