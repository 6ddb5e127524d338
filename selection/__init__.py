"""The paper's selection of fine-tuning hyper-parameters, which `select_fine_tuning.py` runs:
the grid of `run_classifier.py` runs and the choice (`grid`), and its report (`report`)."""
