import torch

from simppo.agent.config import ActorCfg, MLPCfg
from simppo.agent.models import PPOModel


def _model(normalize_obs: bool = True) -> PPOModel:
    torch.manual_seed(0)
    model = PPOModel(5, 7, 3, ActorCfg(units=[16]), MLPCfg(units=[16]), obs_clip=2.0, normalize_obs=normalize_obs)
    model.obs_norm.update(torch.randn(64, 5) * 3 + 1)
    return model


def test_act_inference_is_the_normalised_actor_mean():
    model = _model()
    obs = torch.randn(4, 5) * 10
    expected, _ = model.actor(torch.clamp((obs - model.obs_norm.mean.float()) / torch.sqrt(model.obs_norm.var + 1e-5)
                                          .float(), -2.0, 2.0))
    action = model.act_inference(obs)
    assert action.shape == (4, 3) and not action.requires_grad
    torch.testing.assert_close(action, expected)
    torch.testing.assert_close(model.act_inference({"obs": obs, "critic_obs": torch.zeros(4, 7)}), expected)
    torch.testing.assert_close(model.act_inference(obs), action)  # deterministic


def test_act_inference_without_normalization_and_normalize_update():
    model = _model(normalize_obs=False)
    obs = torch.randn(4, 5) * 10
    torch.testing.assert_close(model.act_inference(obs), model.actor(obs)[0])
    actor_obs, critic_obs = model.normalize({"obs": obs}, update=True)
    assert actor_obs is obs and critic_obs is obs
    assert model.obs_norm.count.item() == 64  # not updated when normalization is off


def test_normalize_critic_is_the_critic_half_of_normalize():
    for normalize_obs in (True, False):
        model = _model(normalize_obs)
        model.critic_obs_norm.update(torch.randn(64, 7) * 2 - 1)
        obs = {"obs": torch.randn(4, 5) * 10, "critic_obs": torch.randn(4, 7) * 10}
        assert torch.equal(model.normalize_critic(obs), model.normalize(obs)[1])


class _Policy(torch.nn.Module):
    def __init__(self, model: PPOModel):
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.model.act_inference(obs)


def test_act_inference_exports():
    """The graph an ONNX export starts from: one tensor in, the mean action out."""
    model = _model()
    obs = torch.randn(4, 5) * 10
    exported = torch.export.export(_Policy(model), (obs,))
    torch.testing.assert_close(exported.module()(obs), model.act_inference(obs))
