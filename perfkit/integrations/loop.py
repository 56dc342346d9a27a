"""``perfkit.watch``: a plain training loop's step function, profiled on a schedule of its calls.

``step = perfkit.watch(train_step, active=3)``, then ``step(batch)`` in the loop: each call is one step (the
time from one call's end to the next one's, so the loop's data loading between calls is in the step), the
window records calls ``wait+warmup`` .. ``+active`` (the same :class:`perfkit.integrations.window.ProfileWindow`
as the framework callbacks), and at its end the verdict goes to ``writer`` (a TensorBoard ``SummaryWriter``) and
the active W&B and MLflow runs. ``step.result`` is the :class:`perfkit.profiling.session.ProfileResult`;
``step.close()`` ends a window cut short (or a ``trigger``'s), as does leaving ``with perfkit.watch(...) as step:``.
"""
from __future__ import annotations

import functools

from ..errors import ParameterError
from ..profiling.naming import current_rank
from .window import ProfileWindow


class watch:  # noqa: N801  (used as a function: ``step = perfkit.watch(train_step)``)
    """Wrap ``step_fn`` (see the module's docstring); options: ``ProfileWindow``'s (``wait``, ``warmup``, ``active``,
    ``repeat``, ``ranks``, ``out``, ``run``, ``memory``, ``report``, ``trigger``, ``keep``) and ``writer``."""

    def __init__(self, step_fn, *, writer=None, **options):
        if not callable(step_fn):
            raise ParameterError(f"perfkit.watch(step_fn={step_fn!r:.60}): pass the function the loop calls once "
                                 "per step")
        functools.update_wrapper(self, step_fn)
        self.step_fn, self.calls = step_fn, 0
        self.window = ProfileWindow("loop", **options)
        self._writers = (writer,) if writer is not None else ()

    def __call__(self, *args, **kwargs):
        if self.calls == 0:
            self.window.begin(0, rank=current_rank() or 0, writers=self._writers)
        out = self.step_fn(*args, **kwargs)
        self.calls += 1
        self.window.step(self.calls)
        return out

    @property
    def result(self):
        return self.window.result

    def close(self):
        """End the window now (cut short, or a trigger's) and return the result."""
        self.window.end()
        return self.window.result

    def __enter__(self) -> "watch":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False
