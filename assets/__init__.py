# One import path: this folder is the package lumos_dagster.assets (through the link lumos_dagster/assets);
# imported as `assets` from the repository's root it would be a second module object of every file in it.
if __name__ != "lumos_dagster.assets":
    raise ImportError(f"import lumos_dagster.assets, not {__name__} (the same files under another name)")
