"""Evaluation on the model's one inference method (:meth:`simppo.agent.models.PPOModel.act_inference`).

- :mod:`.loading`: rebuild a run (config.yaml + checkpoint, layout check) and its evaluation env.
- :mod:`.metrics`: batched deterministic play from t = 0 and the tracking metrics.
- :mod:`.report`: eval.json / eval.csv / error chart / failed-motions manifest / summary table.
- :mod:`.player`, :mod:`.scene`, :mod:`.native`, :mod:`.web`, :mod:`.video`: the viewers.
- :mod:`.export`: ONNX + policy.json; :mod:`.curves`: learning curves from metrics.csv.
- :mod:`.periodic`: the evaluation during training (and the learning benchmark's); :mod:`.training_video`: the
  clips recorded during training.
- :mod:`.config`: the typed configs of ``simppo-eval`` and ``simppo-export``; :mod:`.outfiles`: atomic output for
  the writers that take a path (ffmpeg, the ONNX exporter).
"""
