# One import path: this folder is the package lumos_dagster.spark (through the link lumos_dagster/spark);
# imported as `spark` from the repository's root it would be a second module object of every file in it.
if __name__ != "lumos_dagster.spark":
    raise ImportError(f"import lumos_dagster.spark, not {__name__} (the same files under another name)")
