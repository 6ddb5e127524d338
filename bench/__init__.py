"""The benchmarks, one package a topic; run each as a module from the repository root
(`python -m bench.<topic>.<name>`). bench/README.md lists them with their commands and results."""
