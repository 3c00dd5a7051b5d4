"""Detached remote jobs, pure: the handle and its layout (:mod:`.handle`), the launch/poll/kill/cleanup scripts
(:mod:`.scripts`) and what they print (:mod:`.remote`), following a job (:mod:`.follower`), which try's job a try
follows (:mod:`.attempts`), and the foreground wrapper with secret redaction (:mod:`.shell`)."""
