"""An instance, pure: its identity by id (:mod:`.identity`), its layered readiness (:mod:`.readiness`) and the
recovery of a lost one (:mod:`.recovery`)."""
