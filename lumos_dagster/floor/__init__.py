"""The floor: the vocabulary every layer shares and nothing else. The metadata model (`model`,
`datatypes`, `snapshot_json`), lumos.yaml's models (`config`, `api_config`) and the resolved dataset
list (`dataset_specs`), the plug-in contract (`plugins`, `extras`), the scan report (`scan_report`),
time (`windows`, `time_partitions`) and small shared rules (`errors`, `limits`, `masking`, `naming`,
`wording`, `storable`, `graphs`, `progress`, `collector`). It imports no other package of Lumos;
its own layers are a contract in pyproject.toml.
"""
