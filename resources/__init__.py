# One import path: this folder is the package lumos_dagster.resources (through the link lumos_dagster/resources);
# imported as `resources` from the repository's root it would be a second module object of every file in it.
if __name__ != "lumos_dagster.resources":
    raise ImportError(f"import lumos_dagster.resources, not {__name__} (the same files under another name)")
