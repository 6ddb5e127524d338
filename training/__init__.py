"""Training: optimizer and schedule, strategies and dtype policies, the training loop with its
checkpoints and the one resume rule, and the fine-tuning recipe. Imports `modeling`, `running` and
`utils`, never `data`."""
