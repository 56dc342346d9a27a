"""Host-device sync points in a trace: ``find`` finds them and what they waited for, ``result``
holds them with their per-step figures and findings."""
