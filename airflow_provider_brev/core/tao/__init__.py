"""NVIDIA TAO, pure: the ``docker run`` command (:mod:`.command`), what a run left behind and whether it succeeded
(:mod:`.report`), and resuming ``train`` from a checkpoint (:mod:`.checkpoints`)."""
