"""Training: the LightningModule, optimizer and schedule, strategies, callbacks and the app."""
