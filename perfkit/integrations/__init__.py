"""perfkit where users train: callbacks for Lightning (``integrations.lightning``), the Hugging Face Trainer
(``integrations.transformers``) and Stable-Baselines3 (``integrations.sb3``), and ``perfkit.watch`` for a plain
loop (``integrations.loop``). Each is a thin adapter over one shared recorder, :class:`window.ProfileWindow`
(the framework's global step drives :class:`perfkit.profiling.recorder.Recorder`); at the window's end the
diagnosis goes to the run's own logger (``integrations.loggers``: TensorBoard, W&B, MLflow). The frameworks are
imported only by their adapter module, so ``import perfkit`` needs none of them.
"""
