# One import path: this folder is the package lumos_dagster.sensors (through the link lumos_dagster/sensors);
# imported as `sensors` from the repository's root it would be a second module object of every file in it.
if __name__ != "lumos_dagster.sensors":
    raise ImportError(f"import lumos_dagster.sensors, not {__name__} (the same files under another name)")
