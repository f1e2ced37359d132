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


def test_per_motion_log_std_gradient_is_the_same_every_time():
    """Per-motion rows: each sample reads its motion's row, and the table's gradient is the same sum on every
    backward (a threaded accumulation in arbitrary order would differ in the last bits from run to run, and the
    same seed would not give the same parameters)."""
    from simppo.agent.models import Actor

    torch.manual_seed(0)
    rows_count, actions, batch = 3, 29, 6144
    actor = Actor(5, actions, ActorCfg(units=[8]), num_rows=rows_count)
    with torch.no_grad():
        actor.log_std.copy_(torch.randn(rows_count, actions))
    obs, rows = torch.randn(batch, 5), torch.randint(0, rows_count, (batch,))
    upstream = torch.randn(batch, actions)
    _, log_std = actor(obs, rows)
    assert torch.equal(log_std, actor.log_std.detach()[rows])
    threads = torch.get_num_threads()
    torch.set_num_threads(max(2, threads))
    try:
        grads = []
        for _ in range(20):
            actor.zero_grad()
            actor(obs, rows)[1].backward(upstream)
            grads.append(actor.log_std.grad.clone())
    finally:
        torch.set_num_threads(threads)
    expected = torch.zeros(rows_count, actions, dtype=torch.float64).index_add_(0, rows, upstream.double())
    torch.testing.assert_close(grads[0].double(), expected, rtol=1e-5, atol=1e-4)  # float32 sums of ~2,000 terms
    assert all(torch.equal(g, grads[0]) for g in grads[1:])
