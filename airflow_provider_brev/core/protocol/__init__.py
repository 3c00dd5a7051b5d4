"""One ``brev`` call, pure: its argv (:mod:`.argv`), the call protocol its sync and async drivers run
(:mod:`.invocation`), what a failure means (:mod:`.classify`), listings and search results (:mod:`.output`), the
connection's settings and the installed CLI's capabilities (:mod:`.config`), output lines (:mod:`.lines`) and
instance names (:mod:`.names`)."""
