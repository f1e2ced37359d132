"""The env's left-right mirror (``env.symmetry()``) against the simulator: a robot on a clip's mirror image (packed
by ``simppo-pack --mirror``) observes the mirror image of what it observes on the clip, and stays mirrored when
it is driven by the mirrored actions."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from simppo.envs.base import Symmetry
from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.envs.imitation.config import ResetNoiseCfg
from simppo.motion.config import MotionCfg
from simppo.motion.pack import PackOptions, pack_motions
from simppo.paths import MOTIONS_DIR
from simppo.sim.config import SimCfg

CLIPS = ("walk", "turn")


@pytest.fixture(scope="module")
def mirrored_pack(tmp_path_factory):
    out = tmp_path_factory.mktemp("mirror") / "pack"
    pack_motions([str(MOTIONS_DIR / f"{c}.csv") for c in CLIPS], out, robot="g1", opts=PackOptions(mirror=True))
    return out


def make_env(pack, observations: str = "default", history_length: int = 0) -> HumanoidImitationEnv:
    # resets on the reference (no reset noise): a clip and its mirror image start as exact mirror images
    cfg = replace(HumanoidImitationEnvCfg(), observations=observations, history_length=history_length,
                  reset_noise=ResetNoiseCfg(enabled=False))
    return HumanoidImitationEnv(cfg, num_envs=2 * len(CLIPS), device="cpu", sim_cfg=SimCfg(name="mujoco"),
                                motion_cfg=MotionCfg(files=[str(pack)]))


def pairs(env) -> tuple[torch.Tensor, torch.Tensor]:
    """Envs 0, 2, ... on the clips and 1, 3, ... on their mirror images, at the same times."""
    ids = [env.motion_lib.motion_id(n) for c in CLIPS for n in (c, f"{c}_mirror")]
    times = [t for t in (1.3, 2.1) for _ in range(2)]
    return torch.tensor(ids, dtype=torch.int32), torch.tensor(times)


def mirror_errors(obs: dict, sym: Symmetry) -> dict[str, torch.Tensor]:
    """``|row of the mirror env - mirror image of the row of its clip's env|`` per row (actor's and critic's)."""
    out = {}
    for key, index, sign in (("obs", sym.obs_index, sym.obs_sign), ("critic_obs", sym.critic_index, sym.critic_sign)):
        x = obs[key]
        assert x[0::2].abs().max() > 0.5  # not a trivially zero row
        out[key] = (x[1::2] - Symmetry.apply(x[0::2], index, sign)).abs()
    return out


def assert_mirrored(obs: dict, sym: Symmetry, atol: float, mean_atol: float | None = None) -> None:
    for key, err in mirror_errors(obs, sym).items():
        assert err.max() < atol, (key, float(err.max()), int(err.argmax() % err.shape[1]))
        if mean_atol is not None:
            assert err.mean() < mean_atol, (key, float(err.mean()))


@pytest.mark.parametrize("observations, history_length", [("default", 0), ("deploy", 3)])
def test_mirror_image_of_a_clip_is_observed_as_the_mirrored_row(mirrored_pack, observations, history_length):
    env = make_env(mirrored_pack, observations, history_length)
    sym = env.symmetry()
    for index, sign in ((sym.obs_index, sym.obs_sign), (sym.critic_index, sym.critic_sign),
                        (sym.action_index, sym.action_sign)):
        x = torch.randn(3, index.numel())
        torch.testing.assert_close(Symmetry.apply(Symmetry.apply(x, index, sign), index, sign), x)  # an involution
        assert sorted(index.tolist()) == list(range(index.numel()))  # a permutation
    assert sym.obs_index.numel() == env.actor_dim and sym.critic_index.numel() == env.full_dim
    obs = env.reset_to(*pairs(env))
    assert_mirrored(obs, sym, atol=2e-3)


@pytest.mark.parametrize("mirror_actions", [True, False])
def test_mirrored_actions_keep_the_robots_mirrored(mirrored_pack, mirror_actions):
    env = make_env(mirrored_pack, history_length=3)  # the rows of the two steps before are mirrored too
    sym = env.symmetry()
    obs = env.reset_to(*pairs(env))
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        actions = torch.empty(len(CLIPS), env.num_actions).uniform_(-0.5, 0.5, generator=gen)
        other = Symmetry.apply(actions, sym.action_index, sym.action_sign) if mirror_actions else actions
        obs, _, terminated, _, _ = env.step(torch.stack([actions, other], 1).flatten(0, 1))
        assert not terminated.any()
    if mirror_actions:  # contacts and the MJCF's ~1e-5 m asymmetry part them a little (joint velocities, rad/s)
        assert_mirrored(obs, sym, atol=0.1, mean_atol=1e-3)
    else:  # the same actions on both sides: far from mirrored, so the check above can fail
        assert min(float(e.mean()) for e in mirror_errors(obs, sym).values()) > 0.02


def test_tracked_bodies_swap_with_their_partners_and_an_untracked_partner_is_named():
    from simppo.envs.imitation.symmetry import tracked_partners
    from simppo.robot.config import load_robot_cfg
    from simppo.robot.model import build_robot_model, load_mj_model

    g1 = load_robot_cfg("g1")
    m = load_mj_model(g1)
    partners = tracked_partners(g1, m, build_robot_model(g1, m).tracked_body_ids)
    names = g1.tracked_bodies
    assert [names[p] for p in partners] == [n.replace("left_", "\0").replace("right_", "left_").replace("\0", "right_")
                                            for n in names]
    one_sided = replace(g1, tracked_bodies=[n for n in names if n != "right_knee_link"])
    with pytest.raises(ValueError, match="tracked body left_knee_link mirrors onto right_knee_link, which is not "
                                         "tracked"):
        tracked_partners(one_sided, m, build_robot_model(one_sided, m).tracked_body_ids)
