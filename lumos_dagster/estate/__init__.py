"""The estate as a portable document: export, validation, import, migration between catalogs."""
