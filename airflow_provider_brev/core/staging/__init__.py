"""S3 <-> instance transfers, pure: shared types (:mod:`.types`), paths and filters (:mod:`.paths`), checksums
(:mod:`.checksums`), the input manifest (:mod:`.manifest`), rounds (:mod:`.rounds`), the transfer and listing scripts
(:mod:`.scripts`, :mod:`.listing`) and their reports (:mod:`.reports`), and S3 locations (:mod:`.locations`)."""
