"""simppo: massively parallel PPO for humanoid motion imitation on Warp and MuJoCo Warp."""
