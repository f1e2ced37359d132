"""Robot descriptions: ``RobotCfg`` (yaml) + compiled MuJoCo model + resolved indices."""

from simppo.robot.config import RobotCfg, load_robot_cfg, robot_cfg_from_dict
from simppo.robot.model import RobotModel, build_robot_model, load_mj_model

__all__ = [
    "RobotCfg",
    "RobotModel",
    "build_robot_model",
    "load_mj_model",
    "load_robot_cfg",
    "robot_cfg_from_dict",
]
