"""Fine-tuning a real pretrained BERT with this project's scripts and with transformers: dev
metrics, speed, optimizers, the paper's selection, and the two in lockstep."""
