"""``env.history_length``: the row carries the proprioceptive blocks the policy was fed at earlier control steps
(noisy where the actor's view is), set to the first block at an episode's start, in eager and graph steps, and
kept by a checkpoint of the env."""

from dataclasses import replace

import pytest
import torch

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.kernels.imitation import spec
from simppo.sim import SimCfg

N, H = 8, 4


def _env(observations: str, obs_noise: bool, graph: bool = True, seed: int = 3) -> HumanoidImitationEnv:
    cfg = replace(HumanoidImitationEnvCfg(), history_length=H, observations=observations, obs_noise=obs_noise,
                  graph_step=graph)
    return HumanoidImitationEnv(cfg, num_envs=N, device="cpu", sim_cfg=SimCfg(name="mjwarp"), seed=seed)


def _copies(row: torch.Tensor, width: int) -> list[torch.Tensor]:
    """Blocks 0 (this step) .. H - 1 of a row."""
    return [row[:, h * width:(h + 1) * width] for h in range(H)]


def test_layout_names_the_copies_after_the_proprioceptive_block():
    nj, nt, future = 29, 14, [1, 2, 4, 8]
    width = spec.history_block(nj, nt, "deploy")
    plain = spec.actor_obs_slices(nj, nt, future, "deploy")
    with_history = spec.actor_obs_slices(nj, nt, future, "deploy", H)
    proprio = [t.name for t in spec.OBS_SETS["deploy"].proprio]
    assert list(with_history)[:len(proprio) * H] == proprio + [f"prev{h}_{n}" for h in range(1, H) for n in proprio]
    assert with_history["prev1_gravity_b"] == slice(width, width + 3)
    assert with_history[f"prev{H - 1}_last_action"].stop == H * width
    for name, s in plain.items():  # every other term moves right by the copies' width
        shift = 0 if name in proprio else (H - 1) * width
        assert with_history[name] == slice(s.start + shift, s.stop + shift), name
    # a copy mirrors as its term does: the same signed permutation within its block
    partner, sign = list(range(nj)), [1.0] * nj
    index, signs = spec.mirror_columns(partner, sign, list(range(nt)), future, False, "deploy", H)
    for h in range(1, H):
        assert index[h * width:(h + 1) * width] == [i + h * width for i in index[:width]]
        assert signs[h * width:(h + 1) * width] == signs[:width]


@pytest.mark.parametrize("observations, obs_noise", [("default", False), ("deploy", True)])
def test_copies_are_the_blocks_of_earlier_steps_and_start_with_the_episode(observations, obs_noise):
    env = _env(observations, obs_noise)
    width = env.params.history_block
    obs = env.reset()
    views = ("obs", "critic_obs")  # the actor's (noisy with obs_noise) and the clean rows
    for key in views:
        assert all(torch.equal(c, _copies(obs[key], width)[0]) for c in _copies(obs[key], width)[1:]), key
    blocks = {key: [_copies(obs[key], width)[0].clone()] for key in views}
    started = [torch.ones(N, dtype=torch.bool)]
    g = torch.Generator().manual_seed(1)
    for _ in range(30):
        obs, _, _, _, _ = env.step(2.0 * torch.randn(N, env.num_actions, generator=g))
        started.append(env.done.clone())
        for key in views:
            blocks[key].append(_copies(obs[key], width)[0].clone())
            # NumPy-free oracle: copy h of env i is the block of step t - h, or this step's if an episode of i
            # started within the last h steps
            t = len(blocks[key]) - 1
            for h, copy in enumerate(_copies(obs[key], width)[1:], start=1):
                want = torch.empty_like(copy)
                for i in range(N):
                    since = [s for s in range(max(t - h + 1, 0), t + 1) if started[s][i]]
                    want[i] = blocks[key][since[-1] if since else t - h][i]
                assert torch.equal(copy, want), (key, t, h)
    assert int(torch.stack(started[1:]).sum()) >= 2  # episodes started mid-run
    if obs_noise:  # the actor's copies are its noisy readings, not the clean ones
        assert not torch.equal(obs["obs"][:, width:2 * width], obs["critic_obs"][:, width:2 * width])


def test_graph_and_eager_steps_carry_the_same_history():
    eager, graph = _env("deploy", True, graph=False), _env("deploy", True, graph=True)
    for env in (eager, graph):
        env.reset()
    g = torch.Generator().manual_seed(2)
    for _ in range(20):
        a = 2.0 * torch.randn(N, eager.num_actions, generator=g)
        eager.step(a)
        graph.step(a)
    assert graph._step_graph is not None and eager._step_graph is None
    assert torch.equal(eager.obs_full, graph.obs_full) and torch.equal(eager.obs_actor, graph.obs_actor)


def test_a_restored_env_continues_with_the_same_history():
    a, b = _env("deploy", True, seed=3), _env("deploy", True, seed=4)
    a.reset()
    b.reset()
    g = torch.Generator().manual_seed(3)
    for _ in range(6):
        a.step(torch.randn(N, a.num_actions, generator=g))
    state = a.state_dict()
    assert "obs_history" in state
    b.load_state_dict(state)
    b.get_observations()  # a fresh noise draw for this step's block: compare the copies of the noisy view
    history = slice(b.params.history_block, H * b.params.history_block)
    assert torch.equal(a.obs_full, b.obs_full) and torch.equal(a.obs_actor[:, history], b.obs_actor[:, history])
    for _ in range(4):
        x = torch.randn(N, a.num_actions, generator=g)
        a.step(x)
        b.step(x)
    assert torch.equal(a.obs_full, b.obs_full)


def test_without_history_the_row_and_the_checkpoint_keep_their_layout():
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=2, device="cpu", sim_cfg=SimCfg(name="mujoco"))
    assert env.params.history_copies == 0 and "obs_history" not in env.state_dict()
    assert env.actor_dim == spec.obs_dims(env.num_actions, env.num_tracked, [1, 2, 4, 8], True)[0]
