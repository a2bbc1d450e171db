"""The gfootball adapter converts the old gym API to gymnasium's (against a fake gfootball)."""

import sys
import textwrap

import gymnasium
import numpy as np

from rlperf.envs import gfootball_adapter

FAKE = '''
import types
import numpy as np

class FakeGFootballEnv:
    """Old gym API: reset() -> obs, step() -> (obs, reward, done, info)."""

    def __init__(self, kwargs):
        self.kwargs = kwargs
        self.action_space = types.SimpleNamespace(n=19)
        self.t = 0

    def reset(self):
        self.t = 0
        return np.zeros(115)

    def step(self, action):
        self.t += 1
        goal = action == 12
        done = goal or self.t >= 400
        return np.full(115, self.t, dtype=np.float64), float(goal), done, {"t": self.t}

    def close(self):
        pass

def create_environment(**kwargs):
    return FakeGFootballEnv(kwargs)
'''


def test_adapter_registers_and_converts_done(tmp_path, monkeypatch):
    package = tmp_path / "gfootball"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "env.py").write_text(textwrap.dedent(FAKE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "gfootball", raising=False)
    monkeypatch.delitem(sys.modules, "gfootball.env", raising=False)
    assert gfootball_adapter.register()
    try:
        env = gymnasium.make(gfootball_adapter.GFOOTBALL_ENV_ID, disable_env_checker=True)
        assert env.unwrapped._env.kwargs["representation"] == "simple115v2"
        obs, _ = env.reset(seed=0)
        assert obs.shape == (115,) and obs.dtype == np.float32
        obs, reward, term, trunc, info = env.step(12)  # a goal ends the episode: terminated
        assert reward == 1.0 and term and not trunc and obs.dtype == np.float32
        env.reset()
        for _ in range(400):
            _, reward, term, trunc, _ = env.step(0)
        assert trunc and not term  # the scenario's duration is a time limit
    finally:
        gymnasium.registry.pop(gfootball_adapter.GFOOTBALL_ENV_ID, None)


def test_nothing_is_registered_without_gfootball(monkeypatch):
    monkeypatch.setattr(gfootball_adapter, "gfootball_available", lambda: False)
    assert not gfootball_adapter.register()
    assert gfootball_adapter.GFOOTBALL_ENV_ID not in gymnasium.registry
