"""The Stable-Baselines3 callback on PPO over Gymnasium's CartPole on the CPU: a step is one rollout + update
(or, with ``step="env"``, one env step), and the verdict lands in the model's TensorBoard log."""
from __future__ import annotations

import pytest

sb3 = pytest.importorskip("stable_baselines3")

from perfkit.errors import ParameterError  # noqa: E402
from perfkit.integrations.sb3 import PerfkitCallback  # noqa: E402
from windowcheck import check_window, tensorboard_tags  # noqa: E402


def _ppo(tmp_path, tensorboard=True):
    return sb3.PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu",
                   tensorboard_log=str(tmp_path / "tb") if tensorboard else None)


def test_ppo_rollout_steps_and_the_verdict_in_tensorboard(tmp_path):
    callback = PerfkitCallback(wait=1, warmup=1, active=2, out=tmp_path / "traces", run="ppo")
    _ppo(tmp_path).learn(total_timesteps=32 * 6, callback=callback)  # 6 rollouts + updates
    check_window(callback.window, run="ppo", rank=0, steps=(2, 3))
    assert callback.window.logged == ["tensorboard"]
    tags = tensorboard_tags(tmp_path / "tb")
    assert "perfkit/verdict/text_summary" in tags["text"] and "perfkit/step_ms" in tags["scalars"]


def test_env_steps_are_steps_with_the_option(tmp_path):
    callback = PerfkitCallback(step="env", wait=3, warmup=1, active=3, out=tmp_path / "traces", run="env")
    _ppo(tmp_path, tensorboard=False).learn(total_timesteps=32, callback=callback)
    check_window(callback.window, run="env", rank=0, steps=(4, 6))
    assert callback.window.logged == []


def test_an_unknown_step_unit_is_refused():
    with pytest.raises(ParameterError, match="'rollout'"):
        PerfkitCallback(step="episode")
